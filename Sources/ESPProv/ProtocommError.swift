import BLESecurity

/// Why a protocomm exchange failed, in the words a line report needs.
///
/// `kind` is what the engine reports (`security_failed`, `wifi_auth_failed`, ...); `message` says what
/// happened, never with a passphrase, a proof of possession or a key in it.
public struct ProtocommError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Kind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The session could not be secured: a wrong proof of possession (or SRP password), a device that
        /// could not prove it knows it, a scheme the workflow does not allow or does not match.
        public static let securityFailed = Self(rawValue: "security_failed")
        /// The unit tried the network and the access point refused the passphrase.
        public static let wifiAuthFailed = Self(rawValue: "wifi_auth_failed")
        /// The unit found no access point with that SSID.
        public static let wifiAPNotFound = Self(rawValue: "wifi_ap_not_found")
        /// A provisioning endpoint (or the provisioning service) is missing on the device.
        public static let endpointNotFound = Self(rawValue: "not_found")
        /// The device answered with a non-success status (an SSID too long, an internal error, ...).
        public static let deviceRefused = Self(rawValue: "device_refused")
        /// What came back is not what protocomm sends (undecodable, the wrong message, a bad tag).
        public static let protocolError = Self(rawValue: "protocol_error")
        public var description: String { rawValue }
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { "\(kind): \(message)" }

    static func crypto(_ error: CryptoError) -> ProtocommError {
        ProtocommError(.protocolError, error.description)
    }
}
