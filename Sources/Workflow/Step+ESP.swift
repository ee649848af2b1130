import BLE
import YAML

/// The ESP-IDF provisioning step family (`wifi_provision`, `wifi_scan`, `esp_custom`; docs/esp.md).
extension Step {
    /// `wifi_provision`: a protocomm session, then the station's SSID and passphrase set, applied, and
    /// its status asked until it joined or failed.
    public struct WiFiProvision: Sendable, Equatable {
        public var ssid: Template
        /// Nil for an open network. A secret: never written out in the workflow.
        public var passphrase: Template?
        /// The protocomm security scheme: 0, 1 or 2.
        public var security: Int
        /// Security 2's SRP username.
        public var username: Template?
        /// The proof of possession (security 1) or SRP password (security 2). A secret.
        public var pop: Template?
        /// Security 0 runs only when this is true.
        public var allowInsecure: Bool
        /// The provisioning service's UUID, when the product does not use ESP-IDF's example one.
        public var service: BluetoothUUID?

        public init(ssid: Template, passphrase: Template?, security: Int, username: Template? = nil, pop: Template? = nil,
                    allowInsecure: Bool = false, service: BluetoothUUID? = nil) {
            self.ssid = ssid
            self.passphrase = passphrase
            self.security = security
            self.username = username
            self.pop = pop
            self.allowInsecure = allowInsecure
            self.service = service
        }

        /// What a `wifi_provision` records for the report (as captures): the station's state, its IP,
        /// the channel it joined on.
        public static let figures: [(String, ValueType)] = [("wifi_state", .text), ("wifi_ip", .text), ("wifi_channel", .integer(signed: false))]

        /// The templates whose values are secret wherever they come from (inventory, defaults, --secrets).
        public var secretTemplates: [Template] { [passphrase, pop].compactMap { $0 } }
    }

    /// The security options every step of the family shares (the session they run in).
    public struct ProtocommSecurity: Sendable, Equatable {
        public var security: Int
        public var username: Template?
        public var pop: Template?
        public var allowInsecure: Bool
        public var service: BluetoothUUID?

        public init(security: Int, username: Template? = nil, pop: Template? = nil, allowInsecure: Bool = false, service: BluetoothUUID? = nil) {
            self.security = security
            self.username = username
            self.pop = pop
            self.allowInsecure = allowInsecure
            self.service = service
        }
    }

    /// `wifi_scan`: the access points the unit sees, captured as text (`ssid (channel, dBm, auth)`, one per line).
    public struct WiFiScan: Sendable, Equatable {
        public var capture: String?
        public var session: ProtocommSecurity?
        public init(capture: String?, session: ProtocommSecurity? = nil) {
            self.capture = capture
            self.session = session
        }
    }

    /// `esp_custom`: one request to a vendor's custom endpoint in the protocomm session.
    public struct ESPCustom: Sendable, Equatable {
        public var endpoint: String
        public var value: ValueSpec
        public var capture: String?
        /// How the answer is captured (default utf8).
        public var format: ValueFormat
        public var session: ProtocommSecurity?
        public init(endpoint: String, value: ValueSpec, capture: String? = nil, format: ValueFormat = .utf8, session: ProtocommSecurity? = nil) {
            self.endpoint = endpoint
            self.value = value
            self.capture = capture
            self.format = format
            self.session = session
        }
    }
}

extension Step.WiFiProvision {
    /// The session options this step gives (later `wifi_scan` / `esp_custom` steps reuse its session).
    public var sessionSecurity: Step.ProtocommSecurity {
        Step.ProtocommSecurity(security: security, username: username, pop: pop, allowInsecure: allowInsecure, service: service)
    }
}

extension Step {
    /// The protocomm session options of a step of the ESP family.
    public var protocommSession: ProtocommSecurity? {
        switch kind {
        case .wifiProvision(let w): return w.sessionSecurity
        case .wifiScan(let w): return w.session
        case .espCustom(let c): return c.session
        default: return nil
        }
    }
}
