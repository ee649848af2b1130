import BLE
import Workflow
import YAML

/// The kind of a device failure as reports show it (`error.kind`).
public enum FailureKind: String, Sendable, Codable, CaseIterable, Comparable {
    case timeout
    case disconnected
    case connectFailed = "connect_failed"
    /// The device's advertisement never came within the scan timeout.
    case notFound = "not_found"
    case busy
    case verifyFailed = "verify_failed"
    case attError = "att_error"
    case insufficientSecurity = "insufficient_security"
    case notPermitted = "not_permitted"
    case attributeNotFound = "attribute_not_found"
    case unsupportedProperty = "unsupported_property"
    case invalidInput = "invalid_input"
    case protocolError = "protocol_error"
    case adapterFailure = "adapter_failure"
    /// Pairing failed (wrong passkey, the device refused, authentication requirements not met, ...).
    /// Never retried: devices count failed attempts, and a wrong passkey tried again can lock one out.
    case pairingFailed = "pairing_failed"
    /// Encryption with the stored bond failed with PIN or Key Missing: the device no longer has the
    /// bond. Paired again only when the workflow says so (`on_bond_lost: pair`).
    case bondLost = "bond_lost"
    /// The controller could not start encryption (its HCI status in the message).
    case encryptionFailed = "encryption_failed"
    /// Cut by a second Ctrl-C or a deadline while the run was stopping.
    case interrupted
    /// A run crashed after an irreversible write was sent to this device and before its outcome was
    /// known; it is not run again automatically (it might be provisioned twice).
    case needsReview = "needs_review"
    /// After a firmware update's reset the device runs its old image: the new one did not boot (MCUboot
    /// reverted it) or was not installed. Never retried.
    case dfuReverted = "dfu_reverted"
    /// The image is not newer than the running one and the step is `upgrade_only` (or the device refused
    /// it as a downgrade). Never retried.
    case dfuDowngrade = "dfu_downgrade"
    /// The device marks the uploaded image not bootable: it was not reset. Never retried.
    case dfuNotBootable = "dfu_not_bootable"
    /// The device answered an MCUmgr command with an error (its code and kind in the message).
    case mcumgrError = "mcumgr_error"

    /// The retry class a policy's `on:` list names.
    public var errorClass: ErrorClass? {
        switch self {
        case .timeout, .notFound: return .timeout
        case .disconnected, .adapterFailure: return .disconnected
        case .connectFailed: return .connectFailed
        case .busy: return .busy
        case .verifyFailed: return .mismatch
        case .attError, .protocolError: return .attError
        case .insufficientSecurity: return .insufficientSecurity
        case .notPermitted: return .notPermitted
        case .attributeNotFound, .unsupportedProperty: return .notFound
        case .invalidInput: return .invalidInput
        case .encryptionFailed: return .encryptionFailed
        case .mcumgrError: return .attError
        case .pairingFailed, .bondLost, .interrupted, .needsReview, .dfuReverted, .dfuDowngrade, .dfuNotBootable: return nil
        }
    }

    /// Transient failures are worth retrying; permanent ones fail the device at once.
    public var isTransient: Bool {
        switch self {
        case .timeout, .disconnected, .connectFailed, .busy, .notFound, .adapterFailure, .encryptionFailed: return true
        default: return false
        }
    }

    public static func < (a: FailureKind, b: FailureKind) -> Bool { a.rawValue < b.rawValue }
}

/// Why a step (and so a device) failed: kind, message and the chain of causes, innermost last.
public struct DeviceFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public var kind: FailureKind
    public var message: String
    public var causes: [String]

    public init(_ kind: FailureKind, _ message: String, causes: [String] = []) {
        self.kind = kind
        self.message = message
        self.causes = causes
    }

    public var description: String { ([message] + causes).joined(separator: ": ") }

    /// Classifies any error a step can throw.
    public static func from(_ error: any Error) -> DeviceFailure {
        switch error {
        case let f as DeviceFailure:
            return f
        case let e as BLEError:
            return from(e)
        case let e as ValueError:
            return DeviceFailure(.invalidInput, e.message)
        case let e as Template.TemplateError:
            return DeviceFailure(.invalidInput, e.message)
        case is CancellationError:
            return DeviceFailure(.interrupted, "cancelled")
        default:
            return DeviceFailure(.protocolError, String(describing: error))
        }
    }

    static func from(_ e: BLEError) -> DeviceFailure {
        switch e {
        case .timeout: return DeviceFailure(.timeout, e.description)
        case .disconnected: return DeviceFailure(.disconnected, e.description)
        case .connectFailed: return DeviceFailure(.connectFailed, e.description)
        case .att(let att):
            let kind: FailureKind
            switch att.code {
            case .insufficientAuthentication, .insufficientAuthorization, .insufficientEncryption,
                 .insufficientEncryptionKeySize:
                kind = .insufficientSecurity
            case .readNotPermitted, .writeNotPermitted: kind = .notPermitted
            case .prepareQueueFull, .insufficientResources: kind = .busy
            default: kind = .attError
            }
            return DeviceFailure(kind, e.description)
        case .attributeNotFound: return DeviceFailure(.attributeNotFound, e.description)
        case .unsupportedProperty: return DeviceFailure(.unsupportedProperty, e.description)
        case .protocolError: return DeviceFailure(.protocolError, e.description)
        case .adapterFailure: return DeviceFailure(.adapterFailure, e.description)
        case .cancelled: return DeviceFailure(.interrupted, "cancelled")
        case .security(let f):
            let kind: FailureKind
            switch f.category {
            case .pairingFailed: kind = .pairingFailed
            case .bondLost: kind = .bondLost
            case .timeout: kind = .timeout
            case .encryptionFailed: kind = .encryptionFailed
            }
            return DeviceFailure(kind, f.reason, causes: f.detail.isEmpty ? [] : [f.detail])
        }
    }
}
