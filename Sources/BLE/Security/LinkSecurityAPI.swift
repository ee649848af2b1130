// What a session asks of a link's security, and what it gets: the API the engine uses without knowing
// the adapter (docs/security.md). The simulator and the HCI host implement `Link.secure(_:)` with the
// Security Manager of the BLESecurity target; this file holds only the words both sides share.

/// A peer's LE Secure Connections OOB data (Vol 3 Part H 2.3.5.6.4): its random r and confirm value
/// C = f4(PKx, PKx, r, 0), read from a label, an NFC tag or a factory database. Printing it shows
/// neither value.
public struct OOBData: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var random: UInt128
    public var confirm: UInt128

    public init(random: UInt128, confirm: UInt128) {
        self.random = random
        self.confirm = confirm
    }

    public var description: String { "OOBData(redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// What a session asks for when it secures a link: the level, and what this side brings to a pairing.
/// Printing it shows no passkey and no OOB value.
public struct SecurityRequest: Sendable, Hashable, CustomStringConvertible {
    /// The level the link must reach (`none` asks for nothing).
    public var level: SecurityLevel
    /// The device's passkey (from the inventory, a secret): this side enters it (Passkey Entry).
    public var passkey: Passkey?
    /// The device's OOB data (LE Secure Connections only).
    public var oob: OOBData?
    /// LE legacy pairing (and legacy bonds) allowed, for devices without LE Secure Connections.
    public var allowLegacy: Bool
    /// Ask the device to bond, so that a later link encrypts without pairing (kept with `--bonds`).
    public var bond: Bool
    /// Pair even when a stored bond exists (a lost bond made again, when the workflow allows it).
    public var pairAgain: Bool
    /// When the device has lost its bond (encryption fails with PIN or Key Missing), pair again at once
    /// instead of failing with `bond_lost` (a session's choice; adapters ignore it).
    public var pairIfBondLost: Bool

    public init(level: SecurityLevel, passkey: Passkey? = nil, oob: OOBData? = nil, allowLegacy: Bool = false,
                bond: Bool = true, pairAgain: Bool = false, pairIfBondLost: Bool = false) {
        self.level = level
        self.passkey = passkey
        self.oob = oob
        self.allowLegacy = allowLegacy
        self.bond = bond
        self.pairAgain = pairAgain
        self.pairIfBondLost = pairIfBondLost
    }

    /// The same request at another level.
    public func at(_ level: SecurityLevel) -> SecurityRequest {
        var r = self
        r.level = level
        return r
    }

    /// The highest level this side can reach with what it brings: authenticated with a passkey or OOB data.
    public var achievableLevel: SecurityLevel { passkey != nil || oob != nil ? .authenticated : .encrypted }

    public var description: String {
        var parts = [level.name]
        if passkey != nil { parts.append("passkey") }
        if oob != nil { parts.append("OOB data") }
        if allowLegacy { parts.append("legacy allowed") }
        if !bond { parts.append("no bond") }
        if pairAgain { parts.append("pair again") }
        if pairIfBondLost { parts.append("pair if the bond is lost") }
        return "SecurityRequest(\(parts.joined(separator: ", ")))"
    }
}

/// How a pairing authenticated (Vol 3 Part H 2.3.5.1), in the words reports use.
public enum SecurityMethod: String, Sendable, Hashable, Codable, CaseIterable {
    case justWorks = "just_works"
    case passkeyEntry = "passkey_entry"
    case numericComparison = "numeric_comparison"
    case outOfBand = "oob"
}

/// Whether a bond played a part in securing a link.
public enum BondUse: String, Sendable, Hashable, Codable, CaseIterable {
    /// No bond: nothing was secured, or the pairing did not bond.
    case none
    /// Pairing made a new bond (stored when the adapter has a bond store).
    case made
    /// The link was encrypted with a stored bond, without pairing.
    case used
}

/// What securing a link achieved.
public struct SecurityOutcome: Sendable, Hashable, CustomStringConvertible {
    /// The link's protection now.
    public var security: LinkSecurity
    /// How the keys were made; nil when a stored bond was used or nothing was needed.
    public var method: SecurityMethod?
    public var bond: BondUse
    /// The device had lost its bond, and it was made again (`pairIfBondLost`).
    public var bondWasLost: Bool

    public init(security: LinkSecurity, method: SecurityMethod? = nil, bond: BondUse = .none, bondWasLost: Bool = false) {
        self.security = security
        self.method = method
        self.bond = bond
        self.bondWasLost = bondWasLost
    }

    /// Nothing secured.
    public static let none = SecurityOutcome(security: .none)

    /// What a device's links achieved together, this outcome first and `later` after it (a reconnect
    /// that encrypted with the bond the first link made): the latest link's protection; the method of
    /// the last pairing; a bond made on any link counts as made, else one used counts as used.
    public func followed(by later: SecurityOutcome) -> SecurityOutcome {
        let bond: BondUse = bond == .made || later.bond == .made ? .made : (bond == .used || later.bond == .used ? .used : .none)
        return SecurityOutcome(security: later.security, method: later.method ?? method, bond: bond,
                               bondWasLost: bondWasLost || later.bondWasLost)
    }
    public var description: String {
        var text = security.description
        if let method { text += ", \(method.rawValue)" }
        switch bond {
        case .none: break
        case .made: text += ", bond made"
        case .used: text += ", stored bond used"
        }
        if bondWasLost { text += " (the device had lost its bond)" }
        return text
    }
}

/// Why a link could not be secured, as the engine classifies it: the category decides the error kind
/// (`pairing_failed`, `bond_lost`, `timeout`, `encryption_failed`), `reason` names the cause in a few
/// words (`wrong passkey`), `detail` says what this side knows. Never holds a key or a passkey.
public struct SecurityFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The engine's view: which error class a failure belongs to.
    public enum Category: String, Sendable, Hashable, CaseIterable {
        case pairingFailed = "pairing_failed"
        case bondLost = "bond_lost"
        case timeout = "timeout"
        case encryptionFailed = "encryption_failed"
    }

    public var category: Category
    public var reason: String
    public var detail: String

    public init(_ category: Category, reason: String, detail: String = "") {
        self.category = category
        self.reason = reason
        self.detail = detail
    }

    public var description: String { detail.isEmpty ? reason : "\(reason): \(detail)" }
}
