import BLE
import Support
import YAML

/// The `command-ack` behaviour: commands written to a control characteristic (first byte = opcode),
/// each acknowledged by a notification `<opcode> <status>` on an ack characteristic, a state
/// characteristic the commands advance, and a blob characteristic whose write-without-response bytes
/// are appended to a buffer. The opcodes, their actions and the state values come from the model file;
/// the actions themselves are built in (see docs/simulator.md).
public struct CommandBehaviour: Sendable, Equatable {
    /// A characteristic named by service and characteristic UUID.
    public struct Path: Sendable, Hashable {
        public var service: BluetoothUUID
        public var characteristic: BluetoothUUID
    }

    /// What a command does. Repeated, each behaves as the reference device's (REFERENCE-DEVICE.md:
    /// only the commit is idempotent); `CommandBehaviourTests` checks every one.
    public enum Action: String, Sendable, Equatable, CaseIterable {
        /// Store the payload as the configuration if its length is in range. Repeated: replaces it.
        case setConfig = "set_config"
        /// Payload: u32 little-endian length. Clears the blob buffer and expects that many bytes.
        /// Repeated: clears the buffer again and starts over.
        case beginBlob = "begin_blob"
        /// Checks that exactly the expected number of blob bytes arrived, and closes the blob.
        /// Repeated (no blob open any more): answers invalid (`01`) and changes nothing.
        case endBlob = "end_blob"
        /// Valid only after a configuration was set and a begun blob was ended. Idempotent: repeated,
        /// answers ok again.
        case commit
    }

    public struct Command: Sendable, Equatable {
        public var opcode: UInt8
        public var action: Action
        /// Allowed payload length (bytes after the opcode) for `set_config`.
        public var length: ClosedRange<Int>
        /// The state value after success, if the command changes it.
        public var state: UInt8?
    }

    public var control: Path
    public var ack: Path
    public var state: Path?
    public var blob: Path?
    public var commands: [UInt8: Command]

    /// Ack statuses.
    public static let ok: UInt8 = 0x00
    public static let invalid: UInt8 = 0x01
    public static let busy: UInt8 = 0x02
    public static let unknown: UInt8 = 0xFF

    static func parse(_ node: YAMLNode, services: [DeviceModel.Service], _ r: ModelReader) throws(SimulatorError) -> CommandBehaviour {
        var type: String?
        var control: Path?
        var ack: Path?
        var state: Path?
        var blob: Path?
        var commands: [UInt8: Command] = [:]
        func find(_ v: YAMLNode, _ what: String, needs: GATTProperties) throws(SimulatorError) -> Path {
            let u = try r.uuid(v, what)
            for s in services {
                for c in s.characteristics where c.uuid == u {
                    guard c.properties.isSuperset(of: needs) else {
                        throw r.fail("\(what) characteristic \(u) must declare \(needs.names.joined(separator: ", "))", v)
                    }
                    return Path(service: s.uuid, characteristic: u)
                }
            }
            throw r.fail("\(what) characteristic \(u) is not in `services:`", v)
        }
        let keys = ["type", "control", "ack", "state", "blob", "commands"]
        for (key, value) in try r.mapping(node, "behaviour", allowed: keys) {
            switch key {
            case "type":
                type = try r.string(value, "behaviour.type")
                guard type == "command-ack" else {
                    throw r.fail("unknown behaviour type `\(type ?? "")`", value, hint: "the built-in behaviour is `command-ack`")
                }
            case "control": control = try find(value, "control", needs: [.write])
            case "ack": ack = try find(value, "ack", needs: [])
            case "state": state = try find(value, "state", needs: [.read])
            case "blob": blob = try find(value, "blob", needs: [.writeWithoutResponse])
            case "commands":
                for item in try r.list(value, "behaviour.commands") {
                    var opcode: UInt8?
                    var action: Action?
                    var length = 0...512
                    var newState: UInt8?
                    for (k, v) in try r.mapping(item, "a command", allowed: ["opcode", "action", "length", "state"]) {
                        switch k {
                        case "opcode": opcode = try r.byte(v, "opcode")
                        case "action":
                            let name = try r.string(v, "action")
                            guard let a = Action(rawValue: name) else {
                                let all = Action.allCases.map(\.rawValue)
                                throw r.fail("unknown action `\(name)`", v,
                                             hint: Suggestions.hint(for: name, in: all)
                                                ?? "expected one of: \(all.joined(separator: ", "))")
                            }
                            action = a
                        case "length":
                            let items = try r.list(v, "length")
                            guard items.count == 2 else { throw r.fail("length must be [min, max]", v) }
                            let lo = try r.int(items[0], "length", in: 0...512)
                            let hi = try r.int(items[1], "length", in: 0...512)
                            guard lo <= hi else { throw r.fail("the minimum length is above the maximum", items[1]) }
                            length = lo...hi
                        case "state": newState = try r.byte(v, "state")
                        default: break
                        }
                    }
                    guard let opcode else { throw r.fail("a command needs an `opcode`", item) }
                    guard let action else { throw r.fail("a command needs an `action`", item) }
                    guard commands[opcode] == nil else { throw r.fail("opcode \([opcode].hexString) is defined twice", item) }
                    commands[opcode] = Command(opcode: opcode, action: action, length: length, state: newState)
                }
            default: break
            }
        }
        guard type != nil else { throw r.fail("behaviour needs a `type` (command-ack)", node) }
        guard let control else { throw r.fail("behaviour needs a `control` characteristic", node) }
        guard let ack else { throw r.fail("behaviour needs an `ack` characteristic", node) }
        if commands.values.contains(where: { $0.action == .beginBlob || $0.action == .endBlob }), blob == nil {
            throw r.fail("blob commands need a `blob` characteristic", node)
        }
        return CommandBehaviour(control: control, ack: ack, state: state, blob: blob, commands: commands)
    }
}
