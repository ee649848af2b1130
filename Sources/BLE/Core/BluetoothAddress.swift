/// A 48-bit Bluetooth device address with its type (public or random).
///
/// Printed most-significant byte first, `AA:BB:CC:DD:EE:FF`, as every tool does; `bytes` hold the
/// little-endian order used on the wire.
public struct BluetoothAddress: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// Public (IEEE-assigned) or random (static, resolvable or non-resolvable private).
    public enum Kind: UInt8, Hashable, Sendable, Codable {
        case `public` = 0
        case random = 1
    }

    /// Six bytes, least significant first (wire order).
    public let bytes: [UInt8]
    public var kind: Kind

    /// From six wire-order bytes; nil if the count is not six.
    public init?(wireBytes: [UInt8], kind: Kind = .public) {
        guard wireBytes.count == 6 else { return nil }
        self.bytes = wireBytes
        self.kind = kind
    }

    /// Parses `AA:BB:CC:DD:EE:FF` (also `-` separators, any case); nil when malformed.
    public init?(_ text: String, kind: Kind = .public) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        let groups = parts.count == 6 ? parts : text.split(separator: "-", omittingEmptySubsequences: false)
        guard groups.count == 6 else { return nil }
        var out: [UInt8] = []
        for g in groups {
            guard g.utf8.count == 2, let v = UInt8(g, radix: 16) else { return nil }
            out.append(v)
        }
        self.bytes = out.reversed()
        self.kind = kind
    }

    /// The address as a 48-bit integer (most significant byte is the first printed).
    public var value: UInt64 {
        bytes.reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    public init(value: UInt64, kind: Kind = .public) {
        var b: [UInt8] = []
        for i in 0..<6 { b.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
        self.bytes = b
        self.kind = kind
    }

    public var description: String {
        let digits: [Character] = Array("0123456789ABCDEF")
        var s = ""
        for (i, b) in bytes.reversed().enumerated() {
            if i > 0 { s.append(":") }
            s.append(digits[Int(b >> 4)])
            s.append(digits[Int(b & 0xF)])
        }
        return s
    }

    public static func < (a: BluetoothAddress, b: BluetoothAddress) -> Bool { a.value < b.value }

    /// Equal addresses regardless of kind (an inventory often does not know the type).
    public func sameDevice(as other: BluetoothAddress) -> Bool { bytes == other.bytes }
}
