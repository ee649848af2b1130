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

    /// What a command does. Repeated, each behaves as the reference device's (docs/devices/sensor-v2.md:
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
        /// Allowed payload length (bytes after the opcode, without a checked CRC) for `set_config`.
        public var length: ClosedRange<Int>
        /// The state value after success, if the command changes it.
        public var state: UInt8?
        /// The CRC the device checks at the end of the payload, if it checks one.
        public var crc: CRCCheck? = nil
    }

    /// A device's own check of a command (`crc: { algorithm: CRC-16/CCITT-FALSE, as: uint16be }`): the
    /// payload ends in the CRC, written in the given byte order, of the payload bytes before it. A
    /// command whose CRC does not match is refused (`<opcode> 01`) and changes nothing; one that matches
    /// is executed on the payload without its CRC.
    public struct CRCCheck: Sendable, Equatable {
        public var algorithm: CRCAlgorithm
        /// True when the CRC's most significant byte comes first.
        public var bigEndian: Bool

        /// The CRC's size in bytes.
        public var size: Int { algorithm.width / 8 }

        /// The payload without its CRC when the CRC matches; else why it does not.
        public func check(_ payload: [UInt8]) -> Result<[UInt8], Mismatch> {
            guard payload.count >= size else {
                return .failure(Mismatch(reason: "\(payload.count) byte\(payload.count == 1 ? "" : "s"), shorter than the \(size)-byte \(algorithm)"))
            }
            let body = Array(payload.dropLast(size))
            let crc = algorithm.checksum(body)
            let little = (0..<size).map { UInt8(truncatingIfNeeded: crc >> (UInt32($0) * 8)) }
            let expected = bigEndian ? Array(little.reversed()) : little
            let received = Array(payload.suffix(size))
            guard received == expected else {
                return .failure(Mismatch(reason: "\(algorithm) \(received.hexString) does not match \(expected.hexString), the CRC of the \(body.count) bytes before it"))
            }
            return .success(body)
        }

        /// Why a command's CRC was refused.
        public struct Mismatch: Error, Sendable, Equatable {
            public var reason: String
        }
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
                    var crc: CRCCheck?
                    for (k, v) in try r.mapping(item, "a command", allowed: ["opcode", "action", "length", "state", "crc"]) {
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
                        case "crc": crc = try parseCRC(v, r)
                        default: break
                        }
                    }
                    guard let opcode else { throw r.fail("a command needs an `opcode`", item) }
                    guard let action else { throw r.fail("a command needs an `action`", item) }
                    guard commands[opcode] == nil else { throw r.fail("opcode \([opcode].hexString) is defined twice", item) }
                    commands[opcode] = Command(opcode: opcode, action: action, length: length, state: newState, crc: crc)
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

    /// `{ algorithm: CRC-16/CCITT-FALSE, as: uint16be }`: the catalogue name, and how the CRC is written
    /// (`uint16le`/`uint16be` for a 16-bit CRC, `uint32le`/`uint32be` for a 32-bit one).
    private static func parseCRC(_ node: YAMLNode, _ r: ModelReader) throws(SimulatorError) -> CRCCheck {
        var algorithm: CRCAlgorithm?
        var written: (node: YAMLNode, text: String)?
        for (k, v) in try r.mapping(node, "crc", allowed: ["algorithm", "as"]) {
            switch k {
            case "algorithm":
                let name = try r.string(v, "crc.algorithm")
                guard let a = CRCAlgorithm(name: name) else {
                    let all = CRCAlgorithm.allCases.map(\.rawValue)
                    throw r.fail("unknown CRC `\(name)`", v, hint: Suggestions.hint(for: name, in: all) ?? "expected one of: \(all.joined(separator: ", "))")
                }
                algorithm = a
            default:
                written = (v, try r.string(v, "crc.as"))
            }
        }
        guard let algorithm else { throw r.fail("`crc` needs an `algorithm` (a catalogue name such as CRC-16/CCITT-FALSE)", node) }
        guard let written else {
            throw r.fail("`crc` needs `as`: how the device writes its CRC", node, hint: "`uint\(algorithm.width)le` (low byte first) or `uint\(algorithm.width)be`")
        }
        let allowed = ["uint\(algorithm.width)le", "uint\(algorithm.width)be"]
        guard allowed.contains(written.text) else {
            throw r.fail("\(algorithm) is written as `\(allowed[0])` or `\(allowed[1])`, not `\(written.text)`", written.node,
                         hint: Suggestions.hint(for: written.text, in: allowed))
        }
        return CRCCheck(algorithm: algorithm, bigEndian: written.text.hasSuffix("be"))
    }
}
