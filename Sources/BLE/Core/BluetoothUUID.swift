/// A Bluetooth UUID: 16- or 32-bit short forms on the Bluetooth base UUID
/// (`0000xxxx-0000-1000-8000-00805F9B34FB`), or a full 128-bit value.
///
/// Equality is by the full 128-bit value, so `180A`, `0x180A`, `0000180A` and the long form are equal.
public struct BluetoothUUID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// 16 bytes, most significant first (the printed order).
    public let uuid128: [UInt8]

    static let baseSuffix: [UInt8] = [0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0x80, 0x5F, 0x9B, 0x34, 0xFB]

    public init(_ value16: UInt16) {
        self.init(value32: UInt32(value16))
    }

    public init(value32: UInt32) {
        uuid128 = [UInt8(value32 >> 24), UInt8(truncatingIfNeeded: value32 >> 16),
                   UInt8(truncatingIfNeeded: value32 >> 8), UInt8(truncatingIfNeeded: value32)] + Self.baseSuffix
    }

    /// From 16 big-endian bytes; nil unless exactly 16.
    public init?(bytes128: [UInt8]) {
        guard bytes128.count == 16 else { return nil }
        uuid128 = bytes128
    }

    /// From the little-endian wire form of 2, 4 or 16 bytes (ATT and advertising data); nil otherwise.
    public init?(wire: [UInt8]) {
        switch wire.count {
        case 2: self.init(UInt16(wire[0]) | UInt16(wire[1]) << 8)
        case 4:
            self.init(value32: UInt32(wire[0]) | UInt32(wire[1]) << 8 | UInt32(wire[2]) << 16 | UInt32(wire[3]) << 24)
        case 16: self.init(bytes128: wire.reversed())
        default: return nil
        }
    }

    /// Parses `180A`, `0x180A`, `0000180A` or `0000180a-0000-1000-8000-00805f9b34fb` (any case).
    public init?(_ text: String) {
        var t = Substring(text)
        if t.hasPrefix("0x") || t.hasPrefix("0X") { t = t.dropFirst(2) }
        let hexOnly = t.filter { $0 != "-" }
        if t.contains("-") {
            // Canonical 8-4-4-4-12 only.
            let groups = t.split(separator: "-", omittingEmptySubsequences: false).map(\.count)
            guard groups == [8, 4, 4, 4, 12] else { return nil }
        }
        guard hexOnly.allSatisfy(\.isHexDigit), hexOnly.allSatisfy(\.isASCII) else { return nil }
        switch hexOnly.count {
        case 4:
            guard let v = UInt16(hexOnly, radix: 16) else { return nil }
            self.init(v)
        case 8:
            guard let v = UInt32(hexOnly, radix: 16) else { return nil }
            self.init(value32: v)
        case 32:
            guard let bytes = [UInt8](hex: String(hexOnly)) else { return nil }
            self.init(bytes128: bytes)
        default:
            return nil
        }
    }

    /// True when the value lies on the Bluetooth base UUID.
    public var isShortForm: Bool { Array(uuid128[4...]) == Self.baseSuffix }

    /// The 16-bit value, when it has one.
    public var value16: UInt16? {
        guard isShortForm, uuid128[0] == 0, uuid128[1] == 0 else { return nil }
        return UInt16(uuid128[2]) << 8 | UInt16(uuid128[3])
    }

    /// The 32-bit value, when it has one.
    public var value32: UInt32? {
        guard isShortForm else { return nil }
        return uuid128[0..<4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// Shortest little-endian wire form: 2 bytes for 16-bit values, otherwise 16.
    /// (ATT carries only 16- and 128-bit UUIDs.)
    public var wireBytes: [UInt8] {
        if let v = value16 { return [UInt8(truncatingIfNeeded: v), UInt8(v >> 8)] }
        return uuid128.reversed()
    }

    /// `180A` for 16-bit values, `0000180A`-style 8 digits for 32-bit, otherwise the canonical long form
    /// in upper case.
    public var description: String {
        if let v = value16 { return hex(UInt64(v), digits: 4) }
        if let v = value32 { return hex(UInt64(v), digits: 8) }
        let h = uuid128.hexString.uppercased()
        let c = Array(h)
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-"
            + String(c[16..<20]) + "-" + String(c[20..<32])
    }

    private func hex(_ v: UInt64, digits: Int) -> String {
        let s = String(v, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - s.count)) + s
    }

    public static func < (a: BluetoothUUID, b: BluetoothUUID) -> Bool { a.uuid128.lexicographicallyPrecedes(b.uuid128) }
}

extension BluetoothUUID {
    public static let primaryService = BluetoothUUID(0x2800)
    public static let secondaryService = BluetoothUUID(0x2801)
    public static let include = BluetoothUUID(0x2802)
    public static let characteristic = BluetoothUUID(0x2803)
    public static let clientCharacteristicConfiguration = BluetoothUUID(0x2902)
    /// The Generic Attribute service (Vol 3 Part G 7) and its characteristics.
    public static let genericAttribute = BluetoothUUID(0x1801)
    public static let serviceChanged = BluetoothUUID(0x2A05)
    public static let clientSupportedFeatures = BluetoothUUID(0x2B29)
    public static let databaseHash = BluetoothUUID(0x2B2A)
    public static let serverSupportedFeatures = BluetoothUUID(0x2B3A)
}
