import BLE

/// Why pairing or encryption failed, typed so the engine can map it to an error kind
/// (`pairing_failed`, `bond_lost`, `timeout`) and a report can say what happened in words.
public struct SMPFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Sendable, Hashable {
        /// Passkey Entry: the confirm values disagree — the passkey entered on one side was not the other's.
        case wrongPasskey
        /// A confirm value did not match in Just Works, OOB or legacy pairing.
        case confirmValueFailed
        /// The passkey could not be entered (no passkey configured, or the peer's user cancelled).
        case passkeyEntryFailed
        /// OOB pairing was chosen but the OOB data is missing.
        case oobNotAvailable
        /// The asked level cannot be reached: IO capabilities allow no MITM protection, or a side refuses the other's requirements.
        case authenticationRequirements
        /// The peer supports only LE legacy pairing, and the caller did not allow legacy pairing.
        case legacyPairingRefused
        /// The peer does not support pairing (or refuses it now).
        case pairingNotSupported
        /// The negotiated encryption key is shorter than allowed.
        case encryptionKeySize
        /// A side received an SMP command it does not support.
        case commandNotSupported
        /// Too many attempts: the peer asks to wait before pairing again.
        case repeatedAttempts
        /// A PDU carried a value out of range.
        case invalidParameters
        /// LE Secure Connections: the DHKey check values disagree.
        case dhKeyCheckFailed
        /// LE Secure Connections: the user did not confirm the six digits.
        case numericComparisonFailed
        /// BR/EDR pairing is in progress on the peer.
        case brEdrPairingInProgress
        /// Cross-transport key derivation is not allowed.
        case crossTransportKeyNotAllowed
        /// The peer rejected the distributed key.
        case keyRejected
        /// The peer is busy with another pairing.
        case busy
        /// The peer's P-256 public key is not on the curve, is the point at infinity, or is our own.
        case invalidPublicKey
        /// A PDU arrived that the pairing procedure does not allow at this point.
        case unexpectedPDU
        /// A PDU could not be decoded.
        case malformedPDU
        /// No SMP progress for 30 s (Vol 3 Part H 3.4): the SMP channel is closed until the link is reconnected.
        case timeout
        /// The SMP channel timed out earlier on this link: no pairing until the link is reconnected.
        case channelClosed
        /// Encryption with the stored key failed with PIN or Key Missing: the peer no longer has the bond.
        case bondLost
        /// The controller could not start encryption (the HCI status).
        case encryptionFailed(status: UInt8)
        /// Encryption was turned off while pairing needed it.
        case encryptionLost
        /// A reason the specification defines no meaning for, or an unspecified one.
        case unspecified
    }

    /// Who ended the procedure.
    public enum Origin: Sendable, Hashable {
        /// This host found the problem (and sent Pairing Failed when a pairing was in progress).
        case local
        /// The peer sent Pairing Failed.
        case peer
        /// The controller reported it (encryption).
        case controller
    }

    public var kind: Kind
    public var origin: Origin
    /// The Pairing Failed reason sent or received, if there was one.
    public var reason: SMPPairingFailedReason?
    /// Plain words for the report: what this side knows about the failure.
    public var detail: String

    public init(_ kind: Kind, origin: Origin, reason: SMPPairingFailedReason? = nil, detail: String = "") {
        self.kind = kind
        self.origin = origin
        self.reason = reason
        self.detail = detail
    }

    /// The failure a peer's Pairing Failed reason means; `passkeyEntry` tells a confirm failure in
    /// Passkey Entry (a wrong passkey) from one in another method.
    public static func fromPeer(_ reason: SMPPairingFailedReason, passkeyEntry: Bool) -> SMPFailure {
        SMPFailure(kind(of: reason, passkeyEntry: passkeyEntry), origin: .peer, reason: reason,
                   detail: "the peer sent Pairing Failed: \(reason.name)")
    }

    /// The kind a Pairing Failed reason stands for.
    public static func kind(of reason: SMPPairingFailedReason, passkeyEntry: Bool) -> Kind {
        let kind: Kind
        switch reason {
        case .passkeyEntryFailed: kind = .passkeyEntryFailed
        case .oobNotAvailable: kind = .oobNotAvailable
        case .authenticationRequirements: kind = .authenticationRequirements
        case .confirmValueFailed: kind = passkeyEntry ? .wrongPasskey : .confirmValueFailed
        case .pairingNotSupported: kind = .pairingNotSupported
        case .encryptionKeySize: kind = .encryptionKeySize
        case .commandNotSupported: kind = .commandNotSupported
        case .repeatedAttempts: kind = .repeatedAttempts
        case .invalidParameters: kind = .invalidParameters
        case .dhKeyCheckFailed: kind = .dhKeyCheckFailed
        case .numericComparisonFailed: kind = .numericComparisonFailed
        case .brEdrPairingInProgress: kind = .brEdrPairingInProgress
        case .crossTransportKeyNotAllowed: kind = .crossTransportKeyNotAllowed
        case .keyRejected: kind = .keyRejected
        case .busy: kind = .busy
        default: kind = .unspecified
        }
        return kind
    }

    /// The engine's view: which error class the failure belongs to.
    public var category: SecurityFailure.Category {
        switch kind {
        case .bondLost: return .bondLost
        case .timeout: return .timeout
        case .encryptionFailed, .encryptionLost: return .encryptionFailed
        default: return .pairingFailed
        }
    }

    /// A short name for the kind, for reports and logs.
    public var kindName: String {
        switch kind {
        case .wrongPasskey: return "wrong passkey"
        case .confirmValueFailed: return "confirm value failed"
        case .passkeyEntryFailed: return "passkey entry failed"
        case .oobNotAvailable: return "OOB data not available"
        case .authenticationRequirements: return "authentication requirements not met"
        case .legacyPairingRefused: return "LE legacy pairing not allowed"
        case .pairingNotSupported: return "pairing not supported"
        case .encryptionKeySize: return "encryption key too short"
        case .commandNotSupported: return "command not supported"
        case .repeatedAttempts: return "repeated attempts"
        case .invalidParameters: return "invalid parameters"
        case .dhKeyCheckFailed: return "DHKey check failed"
        case .numericComparisonFailed: return "numeric comparison failed"
        case .brEdrPairingInProgress: return "BR/EDR pairing in progress"
        case .crossTransportKeyNotAllowed: return "cross-transport key not allowed"
        case .keyRejected: return "key rejected"
        case .busy: return "busy"
        case .invalidPublicKey: return "invalid public key"
        case .unexpectedPDU: return "unexpected SMP PDU"
        case .malformedPDU: return "malformed SMP PDU"
        case .timeout: return "SMP timeout"
        case .channelClosed: return "SMP channel closed after a timeout"
        case .bondLost: return "bond lost"
        case .encryptionFailed(let status): return "encryption failed (HCI status 0x\(String(status, radix: 16)))"
        case .encryptionLost: return "encryption lost"
        case .unspecified: return "unspecified"
        }
    }

    /// The failure as the BLE layer reports it (`BLEError.security`).
    public var securityFailure: SecurityFailure {
        SecurityFailure(category, reason: kindName, detail: detail)
    }

    public var description: String {
        var text = kindName
        if !detail.isEmpty { text += ": \(detail)" }
        return text
    }
}
