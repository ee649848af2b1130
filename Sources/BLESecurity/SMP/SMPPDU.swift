import BLE

/// Every SMP PDU this host sends or receives on the Security Manager channel (L2CAP CID 0x0006), code first.
///
/// One registry: `init(decoding:)` dispatches on the code. A code this host does not know becomes
/// `.unknown(code, payload)`; a known code with a malformed body throws `DecodeError`.
/// Printing a PDU never shows a key: the key PDUs hold `Key128`, which prints as "redacted".
public enum SMPPDU: Sendable, Hashable {
    case pairingRequest(SMPPairingParameters)
    case pairingResponse(SMPPairingParameters)
    case pairingConfirm(SMPPairingConfirm)
    case pairingRandom(SMPPairingRandom)
    case pairingFailed(SMPPairingFailed)
    case encryptionInformation(SMPEncryptionInformation)
    case centralIdentification(SMPCentralIdentification)
    case identityInformation(SMPIdentityInformation)
    case identityAddressInformation(SMPIdentityAddressInformation)
    case signingInformation(SMPSigningInformation)
    case securityRequest(SMPSecurityRequest)
    case pairingPublicKey(SMPPairingPublicKey)
    case pairingDHKeyCheck(SMPPairingDHKeyCheck)
    case keypressNotification(SMPKeypressNotification)
    case unknown(code: SMPCode, payload: [UInt8])

    /// Decodes one PDU. Empty input, or a known code with a malformed body, throws.
    public init(decoding bytes: [UInt8]) throws(DecodeError) {
        var r = ByteReader(bytes)
        let code = SMPCode(try r.readUInt8("SMP code"))
        switch code {
        case .pairingRequest: self = .pairingRequest(try SMPPairingParameters(from: &r))
        case .pairingResponse: self = .pairingResponse(try SMPPairingParameters(from: &r))
        case .pairingConfirm: self = .pairingConfirm(try SMPPairingConfirm(from: &r))
        case .pairingRandom: self = .pairingRandom(try SMPPairingRandom(from: &r))
        case .pairingFailed: self = .pairingFailed(try SMPPairingFailed(from: &r))
        case .encryptionInformation: self = .encryptionInformation(try SMPEncryptionInformation(from: &r))
        case .centralIdentification: self = .centralIdentification(try SMPCentralIdentification(from: &r))
        case .identityInformation: self = .identityInformation(try SMPIdentityInformation(from: &r))
        case .identityAddressInformation: self = .identityAddressInformation(try SMPIdentityAddressInformation(from: &r))
        case .signingInformation: self = .signingInformation(try SMPSigningInformation(from: &r))
        case .securityRequest: self = .securityRequest(try SMPSecurityRequest(from: &r))
        case .pairingPublicKey: self = .pairingPublicKey(try SMPPairingPublicKey(from: &r))
        case .pairingDHKeyCheck: self = .pairingDHKeyCheck(try SMPPairingDHKeyCheck(from: &r))
        case .keypressNotification: self = .keypressNotification(try SMPKeypressNotification(from: &r))
        default: self = .unknown(code: code, payload: r.readRemaining())
        }
    }

    public var code: SMPCode {
        switch self {
        case .pairingRequest: return .pairingRequest
        case .pairingResponse: return .pairingResponse
        case .pairingConfirm: return .pairingConfirm
        case .pairingRandom: return .pairingRandom
        case .pairingFailed: return .pairingFailed
        case .encryptionInformation: return .encryptionInformation
        case .centralIdentification: return .centralIdentification
        case .identityInformation: return .identityInformation
        case .identityAddressInformation: return .identityAddressInformation
        case .signingInformation: return .signingInformation
        case .securityRequest: return .securityRequest
        case .pairingPublicKey: return .pairingPublicKey
        case .pairingDHKeyCheck: return .pairingDHKeyCheck
        case .keypressNotification: return .keypressNotification
        case .unknown(let code, _): return code
        }
    }

    /// The PDU's bytes, code first: what goes into the L2CAP frame on CID 0x0006.
    public var bytes: [UInt8] {
        var w = ByteWriter(capacity: 65)
        w.write(code.rawValue)
        switch self {
        case .pairingRequest(let p), .pairingResponse(let p): p.encode(into: &w)
        case .pairingConfirm(let p): p.encode(into: &w)
        case .pairingRandom(let p): p.encode(into: &w)
        case .pairingFailed(let p): p.encode(into: &w)
        case .encryptionInformation(let p): p.encode(into: &w)
        case .centralIdentification(let p): p.encode(into: &w)
        case .identityInformation(let p): p.encode(into: &w)
        case .identityAddressInformation(let p): p.encode(into: &w)
        case .signingInformation(let p): p.encode(into: &w)
        case .securityRequest(let p): p.encode(into: &w)
        case .pairingPublicKey(let p): p.encode(into: &w)
        case .pairingDHKeyCheck(let p): p.encode(into: &w)
        case .keypressNotification(let p): p.encode(into: &w)
        case .unknown(_, let payload): w.write(payload)
        }
        return w.bytes
    }
}
