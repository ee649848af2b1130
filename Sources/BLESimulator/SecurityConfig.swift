import BLE
import BLESecurity
import Support
import YAML

extension DeviceModel {
    /// A model's `security:` section: the device's Security Manager (docs/simulator.md, "Security").
    ///
    /// ```yaml
    /// security:
    ///   io: display                 # display | keyboard | none (DisplayOnly, KeyboardOnly, NoInputNoOutput)
    ///   passkey: "${passkey}"       # what it displays (or is typed on it): a template, the inventory's per-device value
    ///   secure_connections: true    # false: a legacy-only device
    ///   require_mitm: false         # refuse pairings without MITM protection (Just Works)
    ///   bond: true                  # agree to bond
    /// ```
    public struct SecurityConfig: Sendable, Equatable {
        public var io: SMPIOCapability = .noInputNoOutput
        /// The passkey template; empty: a displayed passkey is drawn at random.
        public var passkey = Template(literal: "")
        public var secureConnections = true
        public var requireMITM = false
        public var bond = true

        static let keys = ["io", "passkey", "secure_connections", "require_mitm", "bond"]
        static let ioNames: [String: SMPIOCapability] = ["display": .displayOnly, "keyboard": .keyboardOnly, "none": .noInputNoOutput]

        static func parse(_ node: YAMLNode, _ r: ModelReader) throws(SimulatorError) -> SecurityConfig {
            var c = SecurityConfig()
            for (key, value) in try r.mapping(node, "security", allowed: keys) {
                switch key {
                case "io":
                    let name = try r.string(value, "security.io")
                    guard let io = ioNames[name] else {
                        throw r.fail("`security.io` is display, keyboard or none, not `\(name)`", value,
                                     hint: Suggestions.hint(for: name, in: ioNames.keys.sorted()))
                    }
                    c.io = io
                case "passkey": c.passkey = try r.template(value, "security.passkey")
                case "secure_connections": c.secureConnections = try r.bool(value, "security.secure_connections")
                case "require_mitm": c.requireMITM = try r.bool(value, "security.require_mitm")
                case "bond": c.bond = try r.bool(value, "security.bond")
                default: break
                }
            }
            if c.io == .keyboardOnly && c.passkey.source.isEmpty {
                throw r.fail("a device with `io: keyboard` needs `passkey`: the passkey typed on it", node)
            }
            return c
        }

        /// A characteristic's `security:` — `encrypted` or `authenticated` (both reading and writing
        /// need it), or `{ read: LEVEL, write: LEVEL }`.
        static func attributeSecurity(_ node: YAMLNode, _ r: ModelReader) throws(SimulatorError) -> AttributeSecurity {
            if node.scalar != nil {
                let level = try self.level(node, r, "security")
                return AttributeSecurity(read: level, write: level)
            }
            var s = AttributeSecurity()
            for (key, value) in try r.mapping(node, "security", allowed: ["read", "write"]) {
                if key == "read" { s.read = try level(value, r, "security.read") } else { s.write = try level(value, r, "security.write") }
            }
            return s
        }

        private static func level(_ node: YAMLNode, _ r: ModelReader, _ what: String) throws(SimulatorError) -> SecurityLevel {
            let name = try r.string(node, what)
            guard let level = SecurityLevel.allCases.first(where: { $0.name == name }) else {
                throw r.fail("`\(what)` is none, encrypted or authenticated, not `\(name)`", node,
                             hint: Suggestions.hint(for: name, in: SecurityLevel.allCases.map(\.name)))
            }
            return level
        }
    }
}
