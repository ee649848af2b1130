import BLE
import Foundation

/// What this station keeps about one peer after bonding: the keys to encrypt the next link without
/// pairing again, and the IRK that recognises the peer behind its resolvable private addresses.
///
/// Keys are `Key128` and never print; neither does a bond (its description names the peer and the
/// level only).
public struct Bond: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The peer's identity address (public or static random) with its type; the connection address
    /// when the peer distributed no identity.
    public var peer: BluetoothAddress
    /// The key the central starts encryption with.
    public var ltk: Key128
    /// EDIV and Rand that identify a legacy LTK; 0 for LE Secure Connections.
    public var ediv: UInt16
    public var rand: UInt64
    /// Encryption key size in octets (7...16).
    public var keySize: Int
    /// The keys came from pairing with MITM protection.
    public var authenticated: Bool
    /// The keys came from LE Secure Connections (false: LE legacy pairing).
    public var secureConnections: Bool
    /// The peer's Identity Resolving Key, if it distributed one.
    public var peerIRK: Key128?
    /// The peer's Connection Signature Resolving Key, if it was asked for and distributed.
    public var peerCSRK: Key128?
    /// When the bond was made; set by the bond store when it saves a bond without one.
    public var created: Date?
    /// The peer connected from a resolvable private address when it bonded: it uses privacy, so a later
    /// connection goes to the private address it advertises with then (found with `peerIRK`).
    public var usesPrivateAddress: Bool

    public init(peer: BluetoothAddress, ltk: Key128, ediv: UInt16 = 0, rand: UInt64 = 0, keySize: Int,
                authenticated: Bool, secureConnections: Bool, peerIRK: Key128? = nil, peerCSRK: Key128? = nil,
                created: Date? = nil, usesPrivateAddress: Bool = false) {
        self.peer = peer
        self.ltk = ltk
        self.ediv = ediv
        self.rand = rand
        self.keySize = keySize
        self.authenticated = authenticated
        self.secureConnections = secureConnections
        self.peerIRK = peerIRK
        self.peerCSRK = peerCSRK
        self.created = created
        self.usesPrivateAddress = usesPrivateAddress
    }

    /// The level a link encrypted with this bond has.
    public var level: SecurityLevel { authenticated ? .authenticated : .encrypted }

    /// The link security that encrypting with this bond gives.
    public var linkSecurity: LinkSecurity {
        LinkSecurity(level: level, keySize: keySize, secureConnections: secureConnections)
    }

    /// The key to start encryption with (the LTK shortened to the bond's key size).
    public var encryptionKey: SMPEncryptionKey {
        SMPEncryptionKey(ltk: ltk.masked(toSize: keySize), ediv: ediv, rand: rand, keySize: keySize)
    }

    public var description: String {
        "Bond(\(peer) \(peer.kind), \(level), \(secureConnections ? "LE Secure Connections" : "LE legacy"), \(keySize)-octet key\(peerIRK == nil ? "" : ", IRK"), keys redacted)"
    }

    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["peer": peer, "level": level]) }
}
