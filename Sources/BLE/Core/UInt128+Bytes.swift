// The Security Manager's numbers are 128-bit values printed most-significant octet first in the Core
// specification (and in its sample data); SMP PDUs carry them least-significant octet first. This file
// is the one home of those conversions.

extension UInt128 {
    /// From up to 16 bytes, most significant first; nil when there are more than 16.
    public init?<C: Collection>(bigEndianBytes bytes: C) where C.Element == UInt8 {
        guard bytes.count <= 16 else { return nil }
        var value: UInt128 = 0
        for b in bytes { value = value << 8 | UInt128(b) }
        self = value
    }

    /// From up to 16 bytes, least significant first (SMP wire order); nil when there are more than 16.
    public init?<C: Collection>(littleEndianBytes bytes: C) where C.Element == UInt8 {
        guard let value = UInt128(bigEndianBytes: bytes.reversed()) else { return nil }
        self = value
    }

    /// 16 bytes, most significant first (the order AES and AES-CMAC take their keys and blocks in).
    public var bigEndianBytes: [UInt8] {
        (0..<16).map { UInt8(truncatingIfNeeded: self >> (8 * (15 - UInt128($0)))) }
    }

    /// 16 bytes, least significant first (SMP wire order).
    public var littleEndianBytes: [UInt8] {
        (0..<16).map { UInt8(truncatingIfNeeded: self >> (8 * UInt128($0))) }
    }
}
