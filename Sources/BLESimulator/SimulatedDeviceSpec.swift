import BLE
import Support
import YAML

/// One device of the simulated fleet, as the inventory describes it.
public struct SimulatedDeviceSpec: Sendable {
    /// The inventory id (`${id}` in model values, e.g. the serial number).
    public var id: String
    /// The inventory name (advertised as the local name; `${name}`). Defaults to the id.
    public var name: String?
    /// The inventory address; without one the device gets a static random address derived from its id.
    public var address: BluetoothAddress?
    /// Per-device variables from the inventory (available as `${var}` in model values).
    public var variables: [String: String]
    /// The inventory's per-device `simulator:` mapping: `model`, variable overrides such as
    /// `firmware: "1.9.0"`, `variables: {...}`, and `faults: {...}`.
    public var overrides: YAMLNode?

    public init(id: String, name: String? = nil, address: BluetoothAddress? = nil, variables: [String: String] = [:],
                overrides: YAMLNode? = nil) {
        self.id = id
        self.name = name
        self.address = address
        self.variables = variables
        self.overrides = overrides
    }

    /// A static random address (two top bits set) derived from the id: the same id gives the same
    /// address in every run.
    public static func derivedAddress(for id: String) -> BluetoothAddress {
        var r = SimulatorRandom(seed: 0xADD2E55, device: id, stream: 0)
        let v = (r.next() & 0x3FFF_FFFF_FFFF) | 0xC000_0000_0000
        return BluetoothAddress(value: v, kind: .random)
    }
}

/// A spec's `simulator:` overrides, validated against its model.
struct DeviceOverrides {
    var model: String?
    var variables: [String: String] = [:]
    var faults: YAMLNode?

    static func parse(_ node: YAMLNode?, file: String) throws(SimulatorError) -> DeviceOverrides {
        var out = DeviceOverrides()
        guard let node, !node.isNull else { return out }
        let r = ModelReader(file: file)
        guard let pairs = node.mapping else {
            throw r.fail("`simulator` must be a mapping, not \(node.kindDescription)", node)
        }
        for p in pairs {
            let key = try r.string(p.key, "a key")
            switch key {
            case "model": out.model = try r.string(p.value, "model")
            case "faults": out.faults = p.value
            case "variables":
                for (k, v) in try r.mapping(p.value, "variables", allowed: [], anyKey: true) {
                    out.variables[k] = try r.string(v, "variables.\(k)")
                }
            default:
                // Any other scalar key overrides a model default (`firmware: "1.9.0"`); checked against
                // the model once it is known.
                out.variables[key] = try r.string(p.value, key)
            }
        }
        return out
    }

    /// Checks that shorthand variable overrides name a model default (a misspelt `firmwre:` must not
    /// be silently ignored).
    func check(against model: DeviceModel, node: YAMLNode?, file: String) throws(SimulatorError) {
        guard let pairs = node?.mapping else { return }
        let allowed = ["model", "faults", "variables"] + model.defaults.keys.sorted()
        for p in pairs {
            guard let key = p.key.scalar, !allowed.contains(key) else { continue }
            let hint = Suggestions.hint(for: key, in: allowed)
                ?? "expected one of: \(allowed.joined(separator: ", "))"
            throw SimulatorError("unknown key `\(key)` in `simulator` (model \(model.name) has no such default)",
                                 file: file, at: p.key.mark, hint: hint)
        }
    }
}
