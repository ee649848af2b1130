import BLE
import CBOR

/// An MCUmgr return code of SMP version 1 (`rc`, Zephyr's `mcumgr_err_t`), also used by version 2 for
/// errors of SMP itself. Open: per-user codes (256 and above) survive.
public struct McuMgrReturnCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }

    public static let ok = McuMgrReturnCode(rawValue: 0)
    public static let unknown = McuMgrReturnCode(rawValue: 1)
    public static let noMemory = McuMgrReturnCode(rawValue: 2)
    public static let invalid = McuMgrReturnCode(rawValue: 3)
    public static let timeout = McuMgrReturnCode(rawValue: 4)
    public static let noEntry = McuMgrReturnCode(rawValue: 5)
    public static let badState = McuMgrReturnCode(rawValue: 6)
    public static let messageTooLarge = McuMgrReturnCode(rawValue: 7)
    public static let notSupported = McuMgrReturnCode(rawValue: 8)
    public static let corrupt = McuMgrReturnCode(rawValue: 9)
    public static let busy = McuMgrReturnCode(rawValue: 10)
    public static let accessDenied = McuMgrReturnCode(rawValue: 11)
    public static let protocolTooOld = McuMgrReturnCode(rawValue: 12)
    public static let protocolTooNew = McuMgrReturnCode(rawValue: 13)

    public var description: String {
        switch self {
        case .ok: return "EOK"
        case .unknown: return "EUNKNOWN"
        case .noMemory: return "ENOMEM"
        case .invalid: return "EINVAL"
        case .timeout: return "ETIMEOUT"
        case .noEntry: return "ENOENT"
        case .badState: return "EBADSTATE"
        case .messageTooLarge: return "EMSGSIZE"
        case .notSupported: return "ENOTSUP"
        case .corrupt: return "ECORRUPT"
        case .busy: return "EBUSY"
        case .accessDenied: return "EACCESSDENIED"
        case .protocolTooOld: return "UNSUPPORTED_TOO_OLD"
        case .protocolTooNew: return "UNSUPPORTED_TOO_NEW"
        default: return rawValue >= 256 ? "EPERUSER(\(rawValue))" : "rc \(rawValue)"
        }
    }
}

/// What went wrong, as the layers above decide on it (retry, fail the device, report).
public enum SMPErrorKind: String, Sendable, Hashable {
    /// The device does not implement the command (or group).
    case notSupported = "not_supported"
    /// The device is busy: try again later.
    case busy
    /// The device's state does not allow the command now (an image already pending, a slot in use).
    case badState = "bad_state"
    /// The device refused an image older than (or as old as) the one it runs (`upgrade` only).
    case downgrade
    /// The device has no room (memory, a free slot, an image too large for its slot).
    case noSpace = "no_space"
    /// The request's arguments were refused (an invalid offset, length, hash, header).
    case invalid
    /// What was asked for does not exist (no such image, setting, file).
    case notFound = "not_found"
    /// The device refused access.
    case accessDenied = "access_denied"
    /// The device's storage failed (flash read, write or erase).
    case storage
    /// The device does not speak this version of SMP.
    case version
    /// Anything else the device reported.
    case other
}

/// An error a device reported in a response: version 1 `rc` (with its optional `rsn`), or version 2
/// `err { group, rc }`, with the kind it maps to.
public struct SMPDeviceError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: Sendable, Hashable {
        case v1(McuMgrReturnCode)
        case v2(group: SMPGroup, rc: UInt64)
    }

    public var code: Code
    /// `rsn`: the device's own words, when it sent them.
    public var reason: String?

    public init(_ code: Code, reason: String? = nil) {
        self.code = code
        self.reason = reason
    }

    public var kind: SMPErrorKind {
        switch code {
        case .v1(let rc):
            switch rc {
            case .notSupported: return .notSupported
            case .busy: return .busy
            case .badState: return .badState
            case .noMemory, .messageTooLarge: return .noSpace
            case .invalid: return .invalid
            case .noEntry: return .notFound
            case .accessDenied: return .accessDenied
            case .corrupt: return .storage
            case .protocolTooOld, .protocolTooNew: return .version
            default: return .other
            }
        case .v2(let group, let rc):
            return Self.groupKind(group, rc)
        }
    }

    /// Group error codes of version 2 (Zephyr's `img_mgmt_err_code_t`, `settings_mgmt_ret_code_t`,
    /// `fs_mgmt_err_code_t`).
    private static func groupKind(_ group: SMPGroup, _ rc: UInt64) -> SMPErrorKind {
        switch group {
        case .image:
            switch rc {
            case 3, 4, 8: return .notFound            // no image, no TLVs, hash not found
            case 9, 15, 30: return .noSpace           // no free slot, no free memory, image too large
            case 10, 11, 12, 13: return .storage      // flash open, read, write, erase failed
            case 14, 19, 20, 21, 22, 23, 24, 25, 29, 31: return .invalid
            case 27: return .downgrade                // current version is newer
            case 28: return .badState                 // an image is already pending
            case 32, 33: return .accessDenied         // confirmation / test of the active slot denied
            default: return .other
            }
        case .settings:
            switch rc {
            case 3, 5: return .notFound               // key, root key not found
            case 2: return .invalid                   // key too long
            case 4, 6, 7, 8: return .notSupported     // read, write, delete, save not supported
            default: return .other
            }
        case .file:
            switch rc {
            case 2, 11, 12: return .invalid           // invalid name, offset not valid, offset past the end
            case 3, 14: return .notFound              // file, mount point not found
            case 4: return .invalid                   // is a directory
            case 5, 6, 7, 8, 9, 10: return .storage
            case 13: return .notSupported             // checksum/hash type not supported
            case 15: return .accessDenied             // read-only filesystem
            default: return .other
            }
        default:
            return .other
        }
    }

    public var description: String {
        var text: String
        switch code {
        case .v1(let rc): text = "device returned rc \(rc.rawValue) (\(rc))"
        case .v2(let group, let rc): text = "device returned \(group) error \(rc)"
        }
        text += " [\(kind.rawValue)]"
        if let reason, !reason.isEmpty { text += ": \(reason)" }
        return text
    }

    /// The error a response body reports, if any: v2 `err {group, rc}` with rc ≠ 0, else v1 `rc` ≠ 0
    /// (version 2 servers still report SMP's own errors as `rc`). Nil when the body reports success.
    public static func reported(in body: CBOR) throws(SMPMessageError) -> SMPDeviceError? {
        guard case .map = body else { throw SMPMessageError("the response is \(body.kindName), not a map") }
        let reason = body["rsn"]?.textValue
        if let err = body["err"] {
            guard let group = err["group"]?.unsignedValue, let rc = err["rc"]?.unsignedValue, group <= UInt64(UInt16.max) else {
                throw SMPMessageError("`err` must be a map of unsigned `group` and `rc`, not \(err)")
            }
            if rc != 0 { return SMPDeviceError(.v2(group: SMPGroup(rawValue: UInt16(group)), rc: rc), reason: reason) }
        }
        if let rc = body["rc"] {
            guard let value = rc.intValue else { throw SMPMessageError("`rc` must be an integer, not \(rc)") }
            if value != 0 { return SMPDeviceError(.v1(McuMgrReturnCode(rawValue: value)), reason: reason) }
        }
        return nil
    }
}

/// A response (or request) whose CBOR does not have the shape its command defines.
public struct SMPMessageError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { "malformed SMP message: \(message)" }
}

/// Why an SMP exchange failed.
public enum SMPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The device answered with an error.
    case device(SMPDeviceError)
    /// The answer could not be decoded (a bad header, bad CBOR, a body of the wrong shape).
    case malformed(String)
    /// No answer within the deadline.
    case timeout(operation: String, after: Duration)
    /// The link went down (the request may or may not have reached the device).
    case disconnected(String)
    /// The request is larger than the device can take in one frame.
    case tooLarge(size: Int, limit: Int)
    /// The transport failed otherwise (the characteristic is missing, a write failed).
    case transport(String)
    /// The caller was cancelled.
    case cancelled

    public var description: String {
        switch self {
        case .device(let e): return e.description
        case .malformed(let m): return "malformed SMP response: \(m)"
        case .timeout(let op, let after): return "\(op): no SMP response within \(after)"
        case .disconnected(let why): return "disconnected: \(why)"
        case .tooLarge(let size, let limit): return "SMP request of \(size) bytes exceeds the device's limit of \(limit)"
        case .transport(let m): return "SMP transport: \(m)"
        case .cancelled: return "cancelled"
        }
    }
}
