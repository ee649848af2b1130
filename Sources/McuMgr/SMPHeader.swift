import CBOR
import BLE

/// The operation of an SMP frame (Zephyr, "SMP Protocol Specification", header `OP`): open, so an
/// unknown value survives.
public struct SMPOp: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let read = SMPOp(rawValue: 0)
    public static let readResponse = SMPOp(rawValue: 1)
    public static let write = SMPOp(rawValue: 2)
    public static let writeResponse = SMPOp(rawValue: 3)

    /// The response operation a server answers this request with.
    public var response: SMPOp { SMPOp(rawValue: rawValue | 1) }
    public var isResponse: Bool { rawValue & 1 == 1 }

    public var description: String {
        switch self {
        case .read: return "read"
        case .readResponse: return "read response"
        case .write: return "write"
        case .writeResponse: return "write response"
        default: return "op \(rawValue)"
        }
    }
}

/// A management group (`Group ID`): open, so application groups (64 and above) survive.
public struct SMPGroup: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// OS management: echo, reset, MCUmgr parameters.
    public static let os = SMPGroup(rawValue: 0)
    /// Application/software image management.
    public static let image = SMPGroup(rawValue: 1)
    public static let statistics = SMPGroup(rawValue: 2)
    /// Settings (config) management.
    public static let settings = SMPGroup(rawValue: 3)
    /// File management.
    public static let file = SMPGroup(rawValue: 8)
    public static let shell = SMPGroup(rawValue: 9)
    public static let zephyr = SMPGroup(rawValue: 63)

    public var description: String {
        switch self {
        case .os: return "os"
        case .image: return "image"
        case .statistics: return "statistics"
        case .settings: return "settings"
        case .file: return "file"
        case .shell: return "shell"
        case .zephyr: return "zephyr"
        default: return "group \(rawValue)"
        }
    }
}

/// The protocol version in the header's `Ver` bits: 1 (legacy `rc` errors) or 2 (`err {group, rc}`).
public enum SMPVersion: UInt8, Sendable, Hashable {
    case v1 = 0
    case v2 = 1
}

/// The 8-byte header of every SMP frame (Zephyr, "SMP Protocol Specification", "Frame: the envelope";
/// multi-byte fields big-endian).
///
/// | field | bits |
/// |---|---|
/// | Res (0) | 3 |
/// | Ver | 2 |
/// | OP | 3 |
/// | Flags | 8 |
/// | Data Length | 16 |
/// | Group ID | 16 |
/// | Sequence Num | 8 |
/// | Command ID | 8 |
public struct SMPHeader: Sendable, Hashable, CustomStringConvertible {
    public static let size = 8

    /// The raw `Ver` bits (0...3): 0 is version 1, 1 is version 2, 2 and 3 reserved.
    public var versionBits: UInt8
    public var op: SMPOp
    public var flags: UInt8
    /// Length of the CBOR data after the header.
    public var length: UInt16
    public var group: SMPGroup
    public var sequence: UInt8
    public var command: UInt8

    public init(version: SMPVersion, op: SMPOp, flags: UInt8 = 0, length: UInt16, group: SMPGroup, sequence: UInt8, command: UInt8) {
        self.versionBits = version.rawValue
        self.op = op
        self.flags = flags
        self.length = length
        self.group = group
        self.sequence = sequence
        self.command = command
    }

    /// The version, nil for the reserved values.
    public var version: SMPVersion? { SMPVersion(rawValue: versionBits) }

    public init(from reader: inout ByteReader) throws(DecodeError) {
        let first = try reader.readUInt8("SMP Res/Ver/OP")
        guard first & 0xE0 == 0 else {
            throw .invalid(field: "SMP Res", reason: "reserved bits are set (first byte \(String(first, radix: 16)))")
        }
        versionBits = (first >> 3) & 0x03
        op = SMPOp(rawValue: first & 0x07)
        flags = try reader.readUInt8("SMP Flags")
        length = try reader.readUInt16BE("SMP Data Length")
        group = SMPGroup(rawValue: try reader.readUInt16BE("SMP Group ID"))
        sequence = try reader.readUInt8("SMP Sequence Num")
        command = try reader.readUInt8("SMP Command ID")
    }

    public func encode(into writer: inout ByteWriter) {
        writer.write((versionBits & 0x03) << 3 | (op.rawValue & 0x07))
        writer.write(flags)
        writer.writeUInt16BE(length)
        writer.writeUInt16BE(group.rawValue)
        writer.write(sequence)
        writer.write(command)
    }

    public var description: String {
        "SMP v\(versionBits + 1) \(op) \(group)/\(command) seq \(sequence) len \(length)"
    }
}

/// One whole SMP frame: the header and its CBOR data (not yet decoded).
public struct SMPFrame: Sendable, Hashable {
    public var header: SMPHeader
    public var data: [UInt8]

    public init(header: SMPHeader, data: [UInt8]) {
        self.header = header
        self.data = data
    }

    /// A frame whose data is `body`, its length set from it.
    public init(version: SMPVersion, op: SMPOp, group: SMPGroup, command: UInt8, sequence: UInt8, body: CBOR) {
        let data = body.encoded
        header = SMPHeader(version: version, op: op, length: UInt16(truncatingIfNeeded: data.count), group: group,
                           sequence: sequence, command: command)
        self.data = data
    }

    /// Reads exactly one frame: the data must be as long as the header says, and nothing may follow.
    public init(bytes: [UInt8]) throws(DecodeError) {
        var reader = ByteReader(bytes)
        header = try SMPHeader(from: &reader)
        data = try reader.readBytes(Int(header.length), "SMP Data")
        try reader.expectEnd("SMP frame")
    }

    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: SMPHeader.size + data.count)
        header.encode(into: &w)
        w.write(data)
        return w.bytes
    }

    /// The frame's size on the wire.
    public var size: Int { SMPHeader.size + data.count }
}
