/// Why bytes could not be decoded: which field, and how many bytes were needed.
public enum DecodeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The input ended inside `field`.
    case truncated(field: String, needed: Int, available: Int)
    /// Bytes were left over after the last field of `context`.
    case trailingBytes(context: String, count: Int)
    /// A field held a value that is not allowed.
    case invalid(field: String, reason: String)

    public var description: String {
        switch self {
        case .truncated(let field, let needed, let available):
            return "truncated \(field): needed \(needed) byte(s), \(available) available"
        case .trailingBytes(let context, let count):
            return "\(count) unexpected trailing byte(s) after \(context)"
        case .invalid(let field, let reason):
            return "invalid \(field): \(reason)"
        }
    }
}

/// A bounds-checked cursor over bytes received from a radio, a file or a user.
///
/// Every read checks the length first and throws `DecodeError.truncated` naming the field; a read that
/// throws does not advance. Integers are little-endian unless the name says otherwise.
public struct ByteReader: Sendable {
    public let bytes: [UInt8]
    public private(set) var offset: Int

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.offset = 0
    }

    public init<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        self.init(Array(bytes))
    }

    /// Bytes not yet read.
    public var remaining: Int { bytes.count - offset }
    public var isAtEnd: Bool { offset >= bytes.count }

    private func need(_ count: Int, _ field: String) throws(DecodeError) {
        if count < 0 || remaining < count {
            throw .truncated(field: field, needed: count, available: remaining)
        }
    }

    public mutating func readUInt8(_ field: String) throws(DecodeError) -> UInt8 {
        try need(1, field)
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func readUInt16LE(_ field: String) throws(DecodeError) -> UInt16 {
        try need(2, field)
        defer { offset += 2 }
        return UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    public mutating func readUInt24LE(_ field: String) throws(DecodeError) -> UInt32 {
        try need(3, field)
        defer { offset += 3 }
        return UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16
    }

    public mutating func readUInt32LE(_ field: String) throws(DecodeError) -> UInt32 {
        try need(4, field)
        defer { offset += 4 }
        var value: UInt32 = 0
        for i in 0..<4 { value |= UInt32(bytes[offset + i]) << (8 * i) }
        return value
    }

    public mutating func readUInt64LE(_ field: String) throws(DecodeError) -> UInt64 {
        try need(8, field)
        defer { offset += 8 }
        var value: UInt64 = 0
        for i in 0..<8 { value |= UInt64(bytes[offset + i]) << (8 * i) }
        return value
    }

    /// Reads a 128-bit little-endian value (SMP keys and values, wire order).
    public mutating func readUInt128LE(_ field: String) throws(DecodeError) -> UInt128 {
        try need(16, field)
        defer { offset += 16 }
        var value: UInt128 = 0
        for i in (0..<16).reversed() { value = value << 8 | UInt128(bytes[offset + i]) }
        return value
    }

    /// Reads a 16-bit big-endian value (network order: MCUmgr's SMP header).
    public mutating func readUInt16BE(_ field: String) throws(DecodeError) -> UInt16 {
        try need(2, field)
        defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }

    public mutating func readInt8(_ field: String) throws(DecodeError) -> Int8 {
        Int8(bitPattern: try readUInt8(field))
    }

    /// Reads exactly `count` bytes.
    public mutating func readBytes(_ count: Int, _ field: String) throws(DecodeError) -> [UInt8] {
        try need(count, field)
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    /// Reads everything left (possibly nothing).
    public mutating func readRemaining() -> [UInt8] {
        defer { offset = bytes.count }
        return Array(bytes[offset...])
    }

    /// Throws if bytes are left over.
    public func expectEnd(_ context: String) throws(DecodeError) {
        if remaining > 0 { throw .trailingBytes(context: context, count: remaining) }
    }
}

/// Builds bytes for the wire. Integers are little-endian unless the name says otherwise.
public struct ByteWriter: Sendable {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 32) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    public mutating func write(_ value: UInt8) { bytes.append(value) }

    public mutating func writeUInt16LE(_ value: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: value))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
    }

    /// Writes a 16-bit value most significant octet first (network order).
    public mutating func writeUInt16BE(_ value: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    public mutating func writeUInt24LE(_ value: UInt32) {
        for i in 0..<3 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt32(i)))) }
    }

    public mutating func writeUInt32LE(_ value: UInt32) {
        for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt32(i)))) }
    }

    public mutating func writeUInt64LE(_ value: UInt64) {
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }

    /// Writes a 128-bit value least significant octet first (SMP wire order).
    public mutating func writeUInt128LE(_ value: UInt128) {
        for i in 0..<16 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt128(i)))) }
    }

    public mutating func write<C: Collection>(_ data: C) where C.Element == UInt8 { bytes.append(contentsOf: data) }
}
