/// The CRCs of the workflow language (`set: { crc: … }`, `{ uint16be: { crc: … } }`) and of the
/// simulator's device models (a command that checks its own CRC), by their names in the RevEng CRC
/// catalogue (each algorithm's `check` is its CRC of the ASCII bytes "123456789"). One home for both.
///
/// | name                 | width | poly   | init   | reflected | xorout     | check      |
/// |----------------------|-------|--------|--------|-----------|------------|------------|
/// | `CRC-16/CCITT-FALSE` | 16    | 0x1021 | 0xFFFF | no        | 0          | 0x29B1     |
/// | `CRC-16/MODBUS`      | 16    | 0x8005 | 0xFFFF | yes       | 0          | 0x4B37     |
/// | `CRC-16/XMODEM`      | 16    | 0x1021 | 0      | no        | 0          | 0x31C3     |
/// | `CRC-32/ISO-HDLC`    | 32    | 0x04C11DB7 | 0xFFFFFFFF | yes | 0xFFFFFFFF | 0xCBF43926 |
///
/// (CRC-16/CCITT-FALSE is catalogued as CRC-16/IBM-3740; CRC-32/ISO-HDLC is the CRC-32 of zlib,
/// Ethernet and PNG.) The result is an unsigned integer; write it with the byte order the device
/// expects (`{ uint16le: "${crc}" }`: Modbus sends the low byte first).
public enum CRCAlgorithm: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case crc16CCITTFalse = "CRC-16/CCITT-FALSE"
    case crc16Modbus = "CRC-16/MODBUS"
    case crc16XModem = "CRC-16/XMODEM"
    case crc32ISOHDLC = "CRC-32/ISO-HDLC"

    /// The algorithm with this catalogue name (case-insensitive), or nil.
    public init?(name: String) {
        guard let a = Self.allCases.first(where: { $0.rawValue.lowercased() == name.lowercased() }) else { return nil }
        self = a
    }

    /// Bits in the result.
    public var width: Int { self == .crc32ISOHDLC ? 32 : 16 }

    /// The catalogue's check value: the CRC of "123456789".
    public var check: UInt32 {
        switch self {
        case .crc16CCITTFalse: return 0x29B1
        case .crc16Modbus: return 0x4B37
        case .crc16XModem: return 0x31C3
        case .crc32ISOHDLC: return 0xCBF4_3926
        }
    }

    /// The CRC of `bytes` (in the low `width` bits).
    public func checksum(_ bytes: [UInt8]) -> UInt32 {
        switch self {
        case .crc16CCITTFalse: return UInt32(Self.msbFirst16(bytes, initial: 0xFFFF))
        case .crc16XModem: return UInt32(Self.msbFirst16(bytes, initial: 0))
        case .crc16Modbus:
            let table = Self.modbusTable
            var crc: UInt16 = 0xFFFF
            for b in bytes { crc = (crc >> 8) ^ table[Int(UInt8(truncatingIfNeeded: crc) ^ b)] }
            return UInt32(crc)
        case .crc32ISOHDLC:
            let table = Self.crc32Table
            var crc: UInt32 = 0xFFFF_FFFF
            for b in bytes { crc = (crc >> 8) ^ table[Int(UInt8(truncatingIfNeeded: crc) ^ b)] }
            return crc ^ 0xFFFF_FFFF
        }
    }

    public var description: String { rawValue }

    /// Poly 0x1021, not reflected, no final xor: CCITT-FALSE and XMODEM differ only in the initial value.
    private static func msbFirst16(_ bytes: [UInt8], initial: UInt16) -> UInt16 {
        let table = ccittTable
        var crc = initial
        for b in bytes { crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ b)] }
        return crc
    }

    private static let ccittTable: [UInt16] = (0..<256).map { i in
        var c = UInt16(i) << 8
        for _ in 0..<8 { c = c & 0x8000 != 0 ? (c << 1) ^ 0x1021 : c << 1 }
        return c
    }

    /// Reflected tables: the polynomial bit-reversed (0x8005 → 0xA001, 0x04C11DB7 → 0xEDB88320).
    private static let modbusTable: [UInt16] = (0..<256).map { i in
        var c = UInt16(i)
        for _ in 0..<8 { c = c & 1 != 0 ? (c >> 1) ^ 0xA001 : c >> 1 }
        return c
    }

    private static let crc32Table: [UInt32] = (0..<256).map { i in
        var c = UInt32(i)
        for _ in 0..<8 { c = c & 1 != 0 ? (c >> 1) ^ 0xEDB8_8320 : c >> 1 }
        return c
    }
}
