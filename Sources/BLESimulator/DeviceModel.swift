import BLE
import Foundation
import Support
import YAML

/// A device model read from a YAML file (`inventory/models/*.yaml`): GATT layout and values,
/// advertising, latencies, the command behaviour and default faults. See docs/simulator.md.
public struct DeviceModel: Sendable {
    /// The model's name (`model:`), e.g. `sensor-v2`.
    public var name: String
    /// The file it came from (for messages).
    public var file: String
    public var advertising: Advertising
    public var latency: Latency
    /// The largest ATT_MTU the device accepts (before an `mtu_cap` fault).
    public var maxMTU: Int
    /// Default values for `${variables}` in values (e.g. `firmware: 2.4.1`), overridable per device.
    public var defaults: [String: String]
    public var services: [Service]
    /// The `command-ack` behaviour, if the model has one.
    public var behaviour: CommandBehaviour?
    /// The `store` behaviour: characteristics whose written values the device keeps.
    public var store: StoreBehaviour?
    public var faults: FaultSettings
    /// The device's Security Manager (`security:`): nil for a device that does not pair.
    public var security: SecurityConfig?
    /// The device's MCUmgr SMP server and MCUboot (`mcumgr:`): nil for a device without them.
    public var mcumgr: McuMgrConfig?

    /// How the device advertises.
    public struct Advertising: Sendable, Equatable {
        /// Advertising interval: the first advertisement of a scan comes after a draw in this range.
        public var interval = LatencyRange(.milliseconds(20), .milliseconds(100))
        public var services: [BluetoothUUID] = []
        public var rssi: ClosedRange<Int> = -70 ... -50
        /// The local name, a template (default `${name}`: the inventory name, else the id).
        public var name = Template(reference: "name")
        public var connectable = true
    }

    /// Latency ranges, scaled by the run's `latencyScale` and the device's `slow` factor.
    public struct Latency: Sendable, Equatable {
        /// From connect to link up.
        public var connect = LatencyRange.zero
        /// Before each ATT response.
        public var roundTrip = LatencyRange.zero
        /// From a control write's response to its ack notification.
        public var ack = LatencyRange.zero
        /// The connection interval (drawn per connection): when set, the link is paced. Every PDU either
        /// way waits for the next connection event, and a connect waits for the device's next advertising
        /// event; `connect` and `round_trip` are then not used (the link's timing replaces them).
        public var connectionInterval: LatencyRange?
    }

    public struct Service: Sendable {
        public var uuid: BluetoothUUID
        public var characteristics: [Characteristic]
    }

    public struct Characteristic: Sendable {
        public var uuid: BluetoothUUID
        public var properties: GATTProperties
        public var value: ValueTemplate
        /// What reading or writing the value needs of the link (`security:`).
        public var security: AttributeSecurity = .open
        var mark: SourceMark
    }

    /// How a characteristic's initial value is written in a model: text with `${variables}`, then
    /// encoded.
    public enum ValueTemplate: Sendable, Equatable {
        case utf8(Template)
        case hex(Template)
        case uint8(Template)

        /// The bytes for a device, or a message saying why the template does not make a value.
        func resolve(_ variables: (String) -> String?) -> Result<[UInt8], TemplateFailure> {
            switch self {
            case .utf8(let t):
                return t.expand(variables).map { Array($0.utf8) }
            case .hex(let t):
                return t.expand(variables).flatMap { text in
                    let compact = text.filter { $0 != " " }
                    guard let bytes = [UInt8](hex: compact) else { return .failure(TemplateFailure("`\(text)` is not hex")) }
                    return .success(bytes)
                }
            case .uint8(let t):
                return t.expand(variables).flatMap { text in
                    guard let v = UInt8(text) else { return .failure(TemplateFailure("`\(text)` is not a byte value 0-255")) }
                    return .success([v])
                }
            }
        }
    }

    /// Top-level keys of a model file.
    static let keys = ["model", "advertising", "latency", "mtu", "defaults", "services", "behaviour", "faults", "security", "mcumgr"]

    /// Reads a model file.
    public static func load(path: String) throws(SimulatorError) -> DeviceModel {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SimulatorError("cannot read the device model file", file: path)
        }
        return try parse([UInt8](data), file: path)
    }

    /// Reads every `*.yaml` model in a directory, keyed by model name.
    public static func loadDirectory(_ path: String) throws(SimulatorError) -> [String: DeviceModel] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: path)
        } catch {
            throw SimulatorError("cannot list the models directory", file: path)
        }
        var out: [String: DeviceModel] = [:]
        for n in names.sorted() where n.hasSuffix(".yaml") || n.hasSuffix(".yml") {
            let m = try load(path: path + "/" + n)
            if let other = out[m.name] {
                throw SimulatorError("model `\(m.name)` is defined twice (also in \(other.file))", file: m.file)
            }
            out[m.name] = m
        }
        return out
    }

    /// Parses model text; `file` names it in messages.
    public static func parse(_ bytes: [UInt8], file: String) throws(SimulatorError) -> DeviceModel {
        let root: YAMLNode?
        do {
            root = try YAMLParser().parse(bytes)
        } catch {
            throw SimulatorError(error.message, file: file, at: error.mark, hint: error.hint)
        }
        let r = ModelReader(file: file)
        guard let root else { throw SimulatorError("the model file is empty", file: file, at: SourceMark(line: 1, column: 1)) }
        let pairs = try r.mapping(root, "a device model", allowed: keys)
        var model = DeviceModel(name: "", file: file, advertising: Advertising(), latency: Latency(), maxMTU: 247,
                                defaults: [:], services: [], behaviour: nil, faults: FaultSettings(), security: nil)
        var behaviourNode: YAMLNode?
        var sawServices = false
        for (key, value) in pairs {
            switch key {
            case "model": model.name = try r.string(value, "model")
            case "advertising": model.advertising = try parseAdvertising(value, r)
            case "latency": model.latency = try parseLatency(value, r)
            case "mtu": model.maxMTU = try r.int(value, "mtu", in: 23...517)
            case "defaults":
                for (k, v) in try r.mapping(value, "defaults", allowed: [], anyKey: true) {
                    model.defaults[k] = try r.string(v, "defaults.\(k)")
                }
            case "services":
                sawServices = true
                for s in try r.list(value, "services") { model.services.append(try parseService(s, r)) }
            case "behaviour": behaviourNode = value
            case "faults": try model.faults.apply(value, r)
            case "security": model.security = try SecurityConfig.parse(value, r)
            case "mcumgr": model.mcumgr = try McuMgrConfig.parse(value, r)
            default: break
            }
        }
        guard !model.name.isEmpty else {
            throw r.fail("the model has no `model:` name", root, hint: "add e.g. `model: sensor-v2`")
        }
        guard sawServices, !model.services.isEmpty else {
            throw r.fail("the model has no `services:`", root, hint: "list the GATT services the device exposes")
        }
        if model.mcumgr != nil, !model.services.contains(where: { $0.uuid == McuMgrConfig.service.uuid }) {
            model.services.append(McuMgrConfig.service)
        }
        if let behaviourNode {
            (model.behaviour, model.store) = try parseBehaviours(behaviourNode, services: model.services, r)
        }
        // Every template must resolve with the model's defaults and the built-in variables.
        for s in model.services {
            for c in s.characteristics {
                if case .failure(let f) = c.value.resolve({ model.defaults[$0] ?? DeviceModel.builtinSample[$0] }) {
                    throw SimulatorError(f.message, file: file, at: c.mark)
                }
            }
        }
        return model
    }

    /// The behaviours: one mapping, or a list of them (at most one `command-ack`; `store` behaviours
    /// merge). A characteristic has one role: a stored one is not also the command-ack's.
    private static func parseBehaviours(_ node: YAMLNode, services: [Service], _ r: ModelReader) throws(SimulatorError)
        -> (CommandBehaviour?, StoreBehaviour?) {
        let items = node.sequence ?? [node]
        var command: CommandBehaviour?
        var stored: [CommandBehaviour.Path] = []
        let types = ["command-ack", "store"]
        for item in items {
            guard item.mapping != nil else { throw r.fail("a behaviour must be a mapping with a `type`, not \(item.kindDescription)", item) }
            guard let typeNode = item["type"] else {
                throw r.fail("a behaviour needs a `type` (\(types.joined(separator: ", ")))", item)
            }
            let type = try r.string(typeNode, "behaviour.type")
            switch type {
            case "command-ack":
                guard command == nil else { throw r.fail("a model has one `command-ack` behaviour", typeNode) }
                command = try CommandBehaviour.parse(item, services: services, r)
            case "store":
                for path in try StoreBehaviour.parse(item, services: services, r).characteristics {
                    guard !stored.contains(path) else { throw r.fail("characteristic \(path.characteristic) is stored twice", item) }
                    stored.append(path)
                }
            default:
                throw r.fail("unknown behaviour type `\(type)`", typeNode,
                             hint: Suggestions.hint(for: type, in: types) ?? "behaviours: \(types.joined(separator: ", "))")
            }
        }
        if let command {
            let roles = [command.control, command.ack] + [command.state, command.blob].compactMap { $0 }
            if let clash = stored.first(where: roles.contains) {
                throw r.fail("characteristic \(clash.characteristic) is stored and also used by the command-ack behaviour", node,
                             hint: "give each characteristic one role")
            }
        }
        return (command, stored.isEmpty ? nil : StoreBehaviour(characteristics: stored))
    }

    /// Values the built-in variables take while a model is checked on its own.
    static let builtinSample = ["id": "ID", "name": "NAME", "address": "00:00:00:00:00:00", "running_version": "1.0.0"]

    private static func parseAdvertising(_ node: YAMLNode, _ r: ModelReader) throws(SimulatorError) -> Advertising {
        var a = Advertising()
        for (key, value) in try r.mapping(node, "advertising", allowed: ["interval", "services", "rssi", "name", "connectable"]) {
            switch key {
            case "interval": a.interval = try r.latency(value, "advertising.interval")
            case "services":
                a.services = []
                for u in try r.list(value, "advertising.services") { a.services.append(try r.uuid(u, "a service")) }
            case "rssi":
                let items = try r.list(value, "advertising.rssi")
                guard items.count == 2 else { throw r.fail("advertising.rssi must be [low, high], e.g. [-80, -40]", value) }
                let lo = try r.int(items[0], "rssi", in: -127...20)
                let hi = try r.int(items[1], "rssi", in: -127...20)
                guard lo <= hi else { throw r.fail("the low RSSI is above the high one", items[1]) }
                a.rssi = lo...hi
            case "name": a.name = try r.template(value, "advertising.name")
            case "connectable": a.connectable = try r.bool(value, "advertising.connectable")
            default: break
            }
        }
        return a
    }

    private static func parseLatency(_ node: YAMLNode, _ r: ModelReader) throws(SimulatorError) -> Latency {
        var l = Latency()
        for (key, value) in try r.mapping(node, "latency", allowed: ["connect", "round_trip", "ack", "connection_interval"]) {
            switch key {
            case "connect": l.connect = try r.latency(value, "latency.connect")
            case "round_trip": l.roundTrip = try r.latency(value, "latency.round_trip")
            case "ack": l.ack = try r.latency(value, "latency.ack")
            case "connection_interval":
                let range = try r.latency(value, "latency.connection_interval")
                guard range.lower >= .microseconds(7_500), range.upper <= .seconds(4) else {
                    throw r.fail("latency.connection_interval must lie within 7.5ms...4s (Vol 6 Part B 4.5.1)", value)
                }
                l.connectionInterval = range
            default: break
            }
        }
        return l
    }

    private static func parseService(_ node: YAMLNode, _ r: ModelReader) throws(SimulatorError) -> Service {
        var uuid: BluetoothUUID?
        var chars: [Characteristic] = []
        for (key, value) in try r.mapping(node, "a service", allowed: ["uuid", "characteristics"]) {
            switch key {
            case "uuid": uuid = try r.uuid(value, "uuid")
            case "characteristics":
                for c in try r.list(value, "characteristics") { chars.append(try parseCharacteristic(c, r)) }
            default: break
            }
        }
        guard let uuid else { throw r.fail("a service needs a `uuid`", node) }
        return Service(uuid: uuid, characteristics: chars)
    }

    static let propertyNames: [String: GATTProperties] = [
        "broadcast": .broadcast, "read": .read, "write-without-response": .writeWithoutResponse, "write": .write,
        "notify": .notify, "indicate": .indicate,
    ]

    private static func parseCharacteristic(_ node: YAMLNode, _ r: ModelReader) throws(SimulatorError) -> Characteristic {
        var uuid: BluetoothUUID?
        var props: GATTProperties = []
        var value = ValueTemplate.hex(Template(literal: ""))
        var security = AttributeSecurity.open
        for (key, v) in try r.mapping(node, "a characteristic", allowed: ["uuid", "properties", "value", "security"]) {
            switch key {
            case "uuid": uuid = try r.uuid(v, "uuid")
            case "properties":
                for p in try r.list(v, "properties") {
                    let name = try r.string(p, "a property")
                    guard let bit = propertyNames[name] else {
                        let all = propertyNames.keys.sorted()
                        throw r.fail("unknown property `\(name)`", p,
                                     hint: Suggestions.hint(for: name, in: all)
                                        ?? "expected one of: \(all.joined(separator: ", "))")
                    }
                    props.insert(bit)
                }
            case "value": value = try parseValue(v, r)
            case "security": security = try SecurityConfig.attributeSecurity(v, r)
            default: break
            }
        }
        guard let uuid else { throw r.fail("a characteristic needs a `uuid`", node) }
        return Characteristic(uuid: uuid, properties: props, value: value, security: security, mark: node.mark)
    }

    /// `value: "text ${id}"` (UTF-8), or `{ hex: "00" }`, `{ utf8: "..." }`, `{ uint8: "${battery}" }`.
    private static func parseValue(_ node: YAMLNode, _ r: ModelReader) throws(SimulatorError) -> ValueTemplate {
        if node.scalar != nil { return .utf8(try r.template(node, "value")) }
        let pairs = try r.mapping(node, "value", allowed: ["hex", "utf8", "uint8"])
        guard pairs.count == 1, let (key, v) = pairs.first else {
            throw r.fail("a value has exactly one encoding: hex, utf8 or uint8", node)
        }
        let text = try r.template(v, "value.\(key)")
        switch key {
        case "hex": return .hex(text)
        case "uint8": return .uint8(text)
        default: return .utf8(text)
        }
    }
}

/// Why a value template did not resolve.
struct TemplateFailure: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

extension Template {
    /// The template filled in from a device's variables (a missing one is an undefined variable).
    func expand(_ variables: (String) -> String?) -> Result<String, TemplateFailure> {
        do {
            return .success(try render(variables, missing: .undefinedVariable))
        } catch {
            return .failure(TemplateFailure(error.message))
        }
    }
}
