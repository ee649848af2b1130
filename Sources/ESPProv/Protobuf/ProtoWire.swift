import BLE

/// One field's value as the Protocol Buffers wire format carries it ("Encoding", protobuf.dev).
///
/// | wire type | name | carries |
/// |---|---|---|
/// | 0 | VARINT | int32, uint32, bool, enum (base-128, least significant group first, at most 10 bytes) |
/// | 1 | I64 | fixed64, sfixed64, double (8 bytes, little-endian) |
/// | 2 | LEN | bytes, string, embedded messages (a varint length, then that many bytes) |
/// | 5 | I32 | fixed32, sfixed32, float (4 bytes, little-endian) |
///
/// Wire types 3 and 4 (groups, deprecated and never written by proto3) and 6, 7 are refused.
public enum ProtoValue: Sendable, Equatable {
    case varint(UInt64)
    case fixed64(UInt64)
    case bytes([UInt8])
    case fixed32(UInt32)
}

/// Reads the fields of one message from hostile bytes: each call to `next()` returns a field number and
/// its value, or nil at the end. Nothing here traps: an overlong varint, a length past the end, field
/// number 0 or a group throw `DecodeError` naming the message.
package struct ProtoReader {
    private var reader: ByteReader
    private let message: String

    package init(_ bytes: [UInt8], message: String) {
        reader = ByteReader(bytes)
        self.message = message
    }

    /// The next field, or nil when the message's bytes are used up.
    package mutating func next() throws(DecodeError) -> (number: Int, value: ProtoValue)? {
        if reader.isAtEnd { return nil }
        let key = try varint("\(message) field key")
        let wireType = key & 0x7
        let number = key >> 3
        guard number >= 1, number <= 536_870_911 else {
            throw .invalid(field: "\(message) field key", reason: "field number \(number) is outside 1...536870911")
        }
        let field = "\(message) field \(number)"
        switch wireType {
        case 0:
            return (Int(number), .varint(try varint(field)))
        case 1:
            return (Int(number), .fixed64(try reader.readUInt64LE(field)))
        case 2:
            let length = try varint("\(field) length")
            guard length <= UInt64(reader.remaining) else {
                throw .truncated(field: field, needed: length > UInt64(Int.max) ? Int.max : Int(length), available: reader.remaining)
            }
            return (Int(number), .bytes(try reader.readBytes(Int(length), field)))
        case 5:
            return (Int(number), .fixed32(try reader.readUInt32LE(field)))
        default:
            throw .invalid(field: field, reason: "wire type \(wireType) is not one proto3 writes (groups are not read)")
        }
    }

    /// A base-128 varint of at most 10 bytes whose value fits 64 bits.
    private mutating func varint(_ field: String) throws(DecodeError) -> UInt64 {
        var value: UInt64 = 0
        for index in 0..<10 {
            let byte = try reader.readUInt8(field)
            let group = UInt64(byte & 0x7F)
            if index == 9, group > 1 {
                throw .invalid(field: field, reason: "varint does not fit 64 bits")
            }
            value |= group << UInt64(7 * index)
            if byte & 0x80 == 0 { return value }
        }
        throw .invalid(field: field, reason: "varint longer than 10 bytes")
    }
}

/// Builds a message's bytes field by field, in ascending field number (as protobuf's serializers do).
///
/// proto3 leaves out a scalar that holds its default (0, false, empty); a oneof member or an embedded
/// message that is present is always written, even when it is empty (`always:`).
public struct ProtoWriter {
    package private(set) var bytes: [UInt8] = []

    package init() {}

    private mutating func key(_ number: Int, _ wireType: UInt64) {
        varint(UInt64(number) << 3 | wireType)
    }

    private mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    package mutating func uint64(_ number: Int, _ value: UInt64, always: Bool = false) {
        guard value != 0 || always else { return }
        key(number, 0)
        varint(value)
    }

    package mutating func uint32(_ number: Int, _ value: UInt32, always: Bool = false) {
        uint64(number, UInt64(value), always: always)
    }

    /// int32 and enums: a negative value is sign-extended to 64 bits (ten bytes), as protobuf writes it.
    package mutating func int32(_ number: Int, _ value: Int32, always: Bool = false) {
        uint64(number, UInt64(bitPattern: Int64(value)), always: always)
    }

    package mutating func bool(_ number: Int, _ value: Bool) {
        uint64(number, value ? 1 : 0)
    }

    package mutating func bytes(_ number: Int, _ value: [UInt8], always: Bool = false) {
        guard !value.isEmpty || always else { return }
        key(number, 2)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    package mutating func string(_ number: Int, _ value: String) {
        bytes(number, Array(value.utf8))
    }

    /// An embedded message; nil writes nothing, a present message is written even when empty.
    package mutating func message<M: ProtoMessage>(_ number: Int, _ value: M?) {
        guard let value else { return }
        bytes(number, value.encoded, always: true)
    }

    package mutating func repeated<M: ProtoMessage>(_ number: Int, _ values: [M]) {
        for v in values { bytes(number, v.encoded, always: true) }
    }
}

/// A protobuf message with a declared layout: `decode(field:value:)` takes each known field (the field
/// table in its doc comment, in wire order) and ignores the rest; `encode(into:)` writes them back.
///
/// Unknown fields are skipped, and so is a known field that arrives with another wire type than its
/// declaration (protobuf keeps both as unknown fields). A repeated scalar field keeps its last value.
public protocol ProtoMessage: Sendable, Equatable {
    /// The message with every field at its default.
    init()
    /// Takes one field; unknown numbers and wire-type mismatches are ignored (never thrown).
    mutating func decode(field: Int, value: ProtoValue) throws(DecodeError)
    /// Writes the fields in ascending number.
    func encode(into writer: inout ProtoWriter)
}

extension ProtoMessage {
    /// Decodes a whole message from `bytes` (the message's name is used in errors).
    public init(protobuf bytes: [UInt8]) throws(DecodeError) {
        self.init()
        var reader = ProtoReader(bytes, message: String(describing: Self.self))
        while let (number, value) = try reader.next() {
            try decode(field: number, value: value)
        }
    }

    /// Decodes the rest of `reader` as this message.
    public init(from reader: inout ByteReader) throws(DecodeError) {
        try self.init(protobuf: reader.readRemaining())
    }

    /// The message's wire bytes.
    public var encoded: [UInt8] {
        var w = ProtoWriter()
        encode(into: &w)
        return w.bytes
    }

    public func encode(into writer: inout ByteWriter) {
        writer.write(encoded)
    }
}

/// Typed views of a field's value, each nil when the wire type does not fit (the field is then skipped).
extension ProtoValue {
    /// uint32: the low 32 bits of the varint (protobuf truncates).
    package var uint32: UInt32? {
        if case .varint(let v) = self { return UInt32(truncatingIfNeeded: v) }
        return nil
    }

    /// int32 and enums: the low 32 bits, as a signed value.
    package var int32: Int32? {
        if case .varint(let v) = self { return Int32(truncatingIfNeeded: v) }
        return nil
    }

    package var bool: Bool? {
        if case .varint(let v) = self { return v != 0 }
        return nil
    }

    package var bytes: [UInt8]? {
        if case .bytes(let b) = self { return b }
        return nil
    }

    /// A proto3 string: must be UTF-8.
    package func string(_ field: String) throws(DecodeError) -> String? {
        guard case .bytes(let b) = self else { return nil }
        guard let text = String(validating: b, as: UTF8.self) else {
            throw .invalid(field: field, reason: "not UTF-8")
        }
        return text
    }

    /// An embedded message, decoded.
    package func message<M: ProtoMessage>(_ type: M.Type = M.self) throws(DecodeError) -> M? {
        guard case .bytes(let b) = self else { return nil }
        return try M(protobuf: b)
    }
}
