// SMP wire codes (Bluetooth Core v5.4, Vol 3, Part H, 3.3 and 3.5). Open: every byte a peer sends is
// representable, and a value this host does not know is kept and printed, never trapped on.

/// An SMP command code (3.3, Table 3.3).
public struct SMPCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    public static let pairingRequest = SMPCode(0x01)
    public static let pairingResponse = SMPCode(0x02)
    public static let pairingConfirm = SMPCode(0x03)
    public static let pairingRandom = SMPCode(0x04)
    public static let pairingFailed = SMPCode(0x05)
    public static let encryptionInformation = SMPCode(0x06)
    public static let centralIdentification = SMPCode(0x07)
    public static let identityInformation = SMPCode(0x08)
    public static let identityAddressInformation = SMPCode(0x09)
    public static let signingInformation = SMPCode(0x0A)
    public static let securityRequest = SMPCode(0x0B)
    public static let pairingPublicKey = SMPCode(0x0C)
    public static let pairingDHKeyCheck = SMPCode(0x0D)
    public static let keypressNotification = SMPCode(0x0E)

    public var name: String {
        switch self {
        case .pairingRequest: return "Pairing Request"
        case .pairingResponse: return "Pairing Response"
        case .pairingConfirm: return "Pairing Confirm"
        case .pairingRandom: return "Pairing Random"
        case .pairingFailed: return "Pairing Failed"
        case .encryptionInformation: return "Encryption Information"
        case .centralIdentification: return "Central Identification"
        case .identityInformation: return "Identity Information"
        case .identityAddressInformation: return "Identity Address Information"
        case .signingInformation: return "Signing Information"
        case .securityRequest: return "Security Request"
        case .pairingPublicKey: return "Pairing Public Key"
        case .pairingDHKeyCheck: return "Pairing DHKey Check"
        case .keypressNotification: return "Keypress Notification"
        default: return "unknown SMP command 0x\(String(rawValue, radix: 16))"
        }
    }

    public var description: String { name }
}

/// IO Capability (3.5.1, Table 3.4): what a device can show and what a person can enter on it.
public struct SMPIOCapability: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let displayOnly = SMPIOCapability(rawValue: 0x00)
    public static let displayYesNo = SMPIOCapability(rawValue: 0x01)
    public static let keyboardOnly = SMPIOCapability(rawValue: 0x02)
    public static let noInputNoOutput = SMPIOCapability(rawValue: 0x03)
    public static let keyboardDisplay = SMPIOCapability(rawValue: 0x04)

    /// True for the five values the specification defines.
    public var isDefined: Bool { rawValue <= 0x04 }

    public var name: String {
        switch self {
        case .displayOnly: return "DisplayOnly"
        case .displayYesNo: return "DisplayYesNo"
        case .keyboardOnly: return "KeyboardOnly"
        case .noInputNoOutput: return "NoInputNoOutput"
        case .keyboardDisplay: return "KeyboardDisplay"
        default: return "reserved IO capability 0x\(String(rawValue, radix: 16))"
        }
    }

    public var description: String { name }
}

/// AuthReq (3.5.1, Figure 3.3): bonding flags, MITM, Secure Connections, keypress and CT2 bits.
/// Bits this host does not know (RFU) are kept as they came.
public struct SMPAuthRequirements: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Bonding_Flags = 01: the device asks to bond (store keys). 00 is no bonding; 10 and 11 are reserved.
    public static let bonding = SMPAuthRequirements(rawValue: 0x01)
    /// MITM protection (authenticated pairing) requested.
    public static let mitm = SMPAuthRequirements(rawValue: 0x04)
    /// LE Secure Connections supported.
    public static let secureConnections = SMPAuthRequirements(rawValue: 0x08)
    /// Keypress notifications in Passkey Entry.
    public static let keypress = SMPAuthRequirements(rawValue: 0x10)
    /// The h7 function is supported (cross-transport key derivation).
    public static let ct2 = SMPAuthRequirements(rawValue: 0x20)

    /// True when Bonding_Flags say "Bonding" (b1b0 = 01).
    public var isBonding: Bool { rawValue & 0x03 == 0x01 }

    public var description: String {
        var parts: [String] = []
        switch rawValue & 0x03 {
        case 0x00: parts.append("no bonding")
        case 0x01: parts.append("bonding")
        default: parts.append("reserved bonding flags \(rawValue & 0x03)")
        }
        if contains(.mitm) { parts.append("MITM") }
        if contains(.secureConnections) { parts.append("SC") }
        if contains(.keypress) { parts.append("keypress") }
        if contains(.ct2) { parts.append("CT2") }
        if rawValue & 0xC0 != 0 { parts.append("RFU 0x\(String(rawValue & 0xC0, radix: 16))") }
        return parts.joined(separator: "|")
    }
}

/// Key Distribution / Generation (3.6.1, Figure 3.11): which keys a side will hand over after encryption.
public struct SMPKeyDistribution: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// LTK (legacy pairing only) with EDIV and Rand: Encryption Information + Central Identification.
    public static let encryptionKey = SMPKeyDistribution(rawValue: 0x01)
    /// IRK and identity address: Identity Information + Identity Address Information.
    public static let identityKey = SMPKeyDistribution(rawValue: 0x02)
    /// CSRK: Signing Information.
    public static let signingKey = SMPKeyDistribution(rawValue: 0x04)
    /// Derive a BR/EDR link key (cross-transport); this host never asks for it.
    public static let linkKey = SMPKeyDistribution(rawValue: 0x08)

    public var description: String {
        var parts: [String] = []
        if contains(.encryptionKey) { parts.append("EncKey") }
        if contains(.identityKey) { parts.append("IdKey") }
        if contains(.signingKey) { parts.append("SignKey") }
        if contains(.linkKey) { parts.append("LinkKey") }
        if rawValue & 0xF0 != 0 { parts.append("RFU 0x\(String(rawValue & 0xF0, radix: 16))") }
        return parts.isEmpty ? "none" : parts.joined(separator: "|")
    }
}

/// Pairing Failed reason (3.5.5, Table 3.7).
public struct SMPPairingFailedReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let passkeyEntryFailed = SMPPairingFailedReason(rawValue: 0x01)
    public static let oobNotAvailable = SMPPairingFailedReason(rawValue: 0x02)
    public static let authenticationRequirements = SMPPairingFailedReason(rawValue: 0x03)
    public static let confirmValueFailed = SMPPairingFailedReason(rawValue: 0x04)
    public static let pairingNotSupported = SMPPairingFailedReason(rawValue: 0x05)
    public static let encryptionKeySize = SMPPairingFailedReason(rawValue: 0x06)
    public static let commandNotSupported = SMPPairingFailedReason(rawValue: 0x07)
    public static let unspecifiedReason = SMPPairingFailedReason(rawValue: 0x08)
    public static let repeatedAttempts = SMPPairingFailedReason(rawValue: 0x09)
    public static let invalidParameters = SMPPairingFailedReason(rawValue: 0x0A)
    public static let dhKeyCheckFailed = SMPPairingFailedReason(rawValue: 0x0B)
    public static let numericComparisonFailed = SMPPairingFailedReason(rawValue: 0x0C)
    public static let brEdrPairingInProgress = SMPPairingFailedReason(rawValue: 0x0D)
    public static let crossTransportKeyNotAllowed = SMPPairingFailedReason(rawValue: 0x0E)
    public static let keyRejected = SMPPairingFailedReason(rawValue: 0x0F)
    public static let busy = SMPPairingFailedReason(rawValue: 0x10)

    public var name: String {
        switch rawValue {
        case 0x01: return "passkey entry failed"
        case 0x02: return "OOB not available"
        case 0x03: return "authentication requirements"
        case 0x04: return "confirm value failed"
        case 0x05: return "pairing not supported"
        case 0x06: return "encryption key size"
        case 0x07: return "command not supported"
        case 0x08: return "unspecified reason"
        case 0x09: return "repeated attempts"
        case 0x0A: return "invalid parameters"
        case 0x0B: return "DHKey check failed"
        case 0x0C: return "numeric comparison failed"
        case 0x0D: return "BR/EDR pairing in progress"
        case 0x0E: return "cross-transport key derivation/generation not allowed"
        case 0x0F: return "key rejected"
        case 0x10: return "busy"
        default: return "reserved reason 0x\(String(rawValue, radix: 16))"
        }
    }

    public var description: String { name }
}

/// Keypress Notification type (3.5.8, Table 3.8).
public struct SMPKeypressType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let entryStarted = SMPKeypressType(rawValue: 0x00)
    public static let digitEntered = SMPKeypressType(rawValue: 0x01)
    public static let digitErased = SMPKeypressType(rawValue: 0x02)
    public static let cleared = SMPKeypressType(rawValue: 0x03)
    public static let entryCompleted = SMPKeypressType(rawValue: 0x04)

    public var name: String {
        switch rawValue {
        case 0x00: return "passkey entry started"
        case 0x01: return "passkey digit entered"
        case 0x02: return "passkey digit erased"
        case 0x03: return "passkey cleared"
        case 0x04: return "passkey entry completed"
        default: return "reserved keypress 0x\(String(rawValue, radix: 16))"
        }
    }

    public var description: String { name }
}
