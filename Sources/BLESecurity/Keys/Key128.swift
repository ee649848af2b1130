/// A 128-bit secret key: an LTK, STK, IRK or CSRK. Printing it shows no byte of it.
///
/// `description`, `debugDescription` and its mirror (what `dump` and the default description of an
/// enclosing struct use) all say "redacted", so a key interpolated into a log, an error or a report
/// by accident leaks nothing. The value is reached only by name: `value`, `littleEndianBytes`.
public struct Key128: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The key as a number (the specification prints keys most significant octet first).
    public let value: UInt128

    public init(_ value: UInt128) { self.value = value }

    /// From 16 bytes least significant first (SMP PDUs, HCI commands); nil unless 16 bytes.
    public init?(littleEndian bytes: [UInt8]) {
        guard bytes.count == 16, let value = UInt128(littleEndianBytes: bytes) else { return nil }
        self.value = value
    }

    /// 16 bytes least significant first: what LE Enable Encryption and the key PDUs carry.
    public var littleEndianBytes: [UInt8] { value.littleEndianBytes }

    /// The key shortened to `size` octets (7...16): the most significant octets are zeroed (Vol 3 Part H 2.3.4).
    public func masked(toSize size: Int) -> Key128 {
        let octets = min(max(size, 0), 16)
        if octets == 16 { return self }
        return Key128(value & ((UInt128(1) << (8 * UInt128(octets))) - 1))
    }

    public var description: String { "Key128(redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
