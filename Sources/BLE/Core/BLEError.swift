/// An ATT error code (Vol 3 Part F 3.4.1.1). Open: any byte a device sends is representable.
public struct ATTErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let invalidHandle = ATTErrorCode(rawValue: 0x01)
    public static let readNotPermitted = ATTErrorCode(rawValue: 0x02)
    public static let writeNotPermitted = ATTErrorCode(rawValue: 0x03)
    public static let invalidPDU = ATTErrorCode(rawValue: 0x04)
    public static let insufficientAuthentication = ATTErrorCode(rawValue: 0x05)
    public static let requestNotSupported = ATTErrorCode(rawValue: 0x06)
    public static let invalidOffset = ATTErrorCode(rawValue: 0x07)
    public static let insufficientAuthorization = ATTErrorCode(rawValue: 0x08)
    public static let prepareQueueFull = ATTErrorCode(rawValue: 0x09)
    public static let attributeNotFound = ATTErrorCode(rawValue: 0x0A)
    public static let attributeNotLong = ATTErrorCode(rawValue: 0x0B)
    public static let insufficientEncryptionKeySize = ATTErrorCode(rawValue: 0x0C)
    public static let invalidAttributeValueLength = ATTErrorCode(rawValue: 0x0D)
    public static let unlikelyError = ATTErrorCode(rawValue: 0x0E)
    public static let insufficientEncryption = ATTErrorCode(rawValue: 0x0F)
    public static let unsupportedGroupType = ATTErrorCode(rawValue: 0x10)
    public static let insufficientResources = ATTErrorCode(rawValue: 0x11)
    public static let databaseOutOfSync = ATTErrorCode(rawValue: 0x12)
    public static let valueNotAllowed = ATTErrorCode(rawValue: 0x13)

    public var name: String {
        switch rawValue {
        case 0x01: return "invalid handle"
        case 0x02: return "read not permitted"
        case 0x03: return "write not permitted"
        case 0x04: return "invalid PDU"
        case 0x05: return "insufficient authentication"
        case 0x06: return "request not supported"
        case 0x07: return "invalid offset"
        case 0x08: return "insufficient authorization"
        case 0x09: return "prepare queue full"
        case 0x0A: return "attribute not found"
        case 0x0B: return "attribute not long"
        case 0x0C: return "insufficient encryption key size"
        case 0x0D: return "invalid attribute value length"
        case 0x0E: return "unlikely error"
        case 0x0F: return "insufficient encryption"
        case 0x10: return "unsupported group type"
        case 0x11: return "insufficient resources"
        case 0x12: return "database out of sync"
        case 0x13: return "value not allowed"
        case 0x80...0x9F: return "application error 0x\(String(rawValue, radix: 16))"
        case 0xFC: return "write request rejected"
        case 0xFD: return "CCCD improperly configured"
        case 0xFE: return "procedure already in progress"
        case 0xFF: return "out of range"
        default: return "reserved error 0x\(String(rawValue, radix: 16))"
        }
    }

    public var description: String { name }
}

/// An Error Response received from a peer: which request, on which handle, and why.
public struct ATTError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: ATTErrorCode
    public var handle: UInt16
    public var requestOpcode: UInt8

    public init(code: ATTErrorCode, handle: UInt16, requestOpcode: UInt8) {
        self.code = code
        self.handle = handle
        self.requestOpcode = requestOpcode
    }

    public var description: String {
        "ATT error \(code.name) (0x\(String(code.rawValue, radix: 16))) on handle 0x\(String(handle, radix: 16)) for request 0x\(String(requestOpcode, radix: 16))"
    }
}

/// Errors of the Bluetooth layer, as the engine classifies them.
public enum BLEError: Error, Sendable, Hashable, CustomStringConvertible {
    /// An operation did not finish within its limit.
    case timeout(operation: String, limit: Duration)
    /// The link went down (unexpectedly, or before the operation could finish).
    case disconnected(DisconnectReason)
    /// The link could not be established.
    case connectFailed(String)
    /// The peer answered with an ATT Error Response.
    case att(ATTError)
    /// A service, characteristic or descriptor named by UUID does not exist on the device.
    case attributeNotFound(String)
    /// The characteristic does not declare the property the operation needs (strict mode).
    case unsupportedProperty(characteristic: BluetoothUUID, property: String)
    /// The peer sent something malformed or unexpected.
    case protocolError(String)
    /// The adapter (transport, controller) failed.
    case adapterFailure(String)
    /// The operation was cancelled by its task.
    case cancelled
    /// The link could not be secured: pairing failed, the device lost its bond, the Security Manager
    /// timed out, or encryption could not start.
    case security(SecurityFailure)

    public var description: String {
        switch self {
        case .timeout(let op, let limit): return "\(op) timed out after \(limit)"
        case .disconnected(let reason): return "disconnected: \(reason)"
        case .connectFailed(let why): return "connect failed: \(why)"
        case .att(let e): return e.description
        case .attributeNotFound(let what): return "not found on the device: \(what)"
        case .unsupportedProperty(let c, let p): return "characteristic \(c) does not declare \(p)"
        case .protocolError(let why): return "protocol error: \(why)"
        case .adapterFailure(let why): return "adapter failure: \(why)"
        case .cancelled: return "cancelled"
        case .security(let f): return "security: \(f)"
        }
    }
}
