/// Advertising and scan-response data (Bluetooth Core Supplement, Part A): a list of AD structures,
/// each `length | type | data`. Known types are decoded; unknown ones are kept.
public struct AdvertisingData: Sendable, Equatable {
    /// One raw AD structure.
    public struct Structure: Sendable, Equatable {
        public var type: UInt8
        public var data: [UInt8]
        public init(type: UInt8, data: [UInt8]) {
            self.type = type
            self.data = data
        }
    }

    public var structures: [Structure]

    public init(structures: [Structure] = []) {
        self.structures = structures
    }

    /// Decodes AD structures. A zero length ends the data (the rest is padding, as controllers send);
    /// a structure that runs past the end throws.
    public init(parsing bytes: [UInt8]) throws(DecodeError) {
        var reader = ByteReader(bytes)
        var out: [Structure] = []
        while !reader.isAtEnd {
            let length = Int(try reader.readUInt8("AD length"))
            if length == 0 { break }
            let type = try reader.readUInt8("AD type")
            let data = try reader.readBytes(length - 1, "AD data (type 0x\(String(type, radix: 16)))")
            out.append(Structure(type: type, data: data))
        }
        structures = out
    }

    /// Encodes back to bytes.
    public var bytes: [UInt8] {
        var w = ByteWriter()
        for s in structures {
            w.write(UInt8(truncatingIfNeeded: s.data.count + 1))
            w.write(s.type)
            w.write(s.data)
        }
        return w.bytes
    }

    public static let flagsType: UInt8 = 0x01
    public static let incomplete16Type: UInt8 = 0x02
    public static let complete16Type: UInt8 = 0x03
    public static let incomplete32Type: UInt8 = 0x04
    public static let complete32Type: UInt8 = 0x05
    public static let incomplete128Type: UInt8 = 0x06
    public static let complete128Type: UInt8 = 0x07
    public static let shortNameType: UInt8 = 0x08
    public static let completeNameType: UInt8 = 0x09
    public static let txPowerType: UInt8 = 0x0A
    public static let serviceData16Type: UInt8 = 0x16
    public static let appearanceType: UInt8 = 0x19
    public static let serviceData32Type: UInt8 = 0x20
    public static let serviceData128Type: UInt8 = 0x21
    public static let manufacturerType: UInt8 = 0xFF

    private func first(_ type: UInt8) -> [UInt8]? { structures.first(where: { $0.type == type })?.data }

    public var flags: UInt8? { first(Self.flagsType)?.first }

    /// The complete local name, else the shortened one (invalid UTF-8 repaired, never trapped on).
    public var localName: String? {
        guard let d = first(Self.completeNameType) ?? first(Self.shortNameType) else { return nil }
        return String(decoding: d, as: UTF8.self)
    }

    public var isNameComplete: Bool { first(Self.completeNameType) != nil }

    /// Every service UUID listed (16-, 32- and 128-bit, complete or incomplete lists).
    public var serviceUUIDs: [BluetoothUUID] {
        var out: [BluetoothUUID] = []
        for s in structures {
            let width: Int
            switch s.type {
            case Self.incomplete16Type, Self.complete16Type: width = 2
            case Self.incomplete32Type, Self.complete32Type: width = 4
            case Self.incomplete128Type, Self.complete128Type: width = 16
            default: continue
            }
            var i = 0
            while i + width <= s.data.count {
                if let u = BluetoothUUID(wire: Array(s.data[i..<i + width])) { out.append(u) }
                i += width
            }
        }
        return out
    }

    /// Service data entries: UUID and payload.
    public var serviceData: [(uuid: BluetoothUUID, data: [UInt8])] {
        var out: [(BluetoothUUID, [UInt8])] = []
        for s in structures {
            let width: Int
            switch s.type {
            case Self.serviceData16Type: width = 2
            case Self.serviceData32Type: width = 4
            case Self.serviceData128Type: width = 16
            default: continue
            }
            guard s.data.count >= width, let u = BluetoothUUID(wire: Array(s.data[0..<width])) else { continue }
            out.append((u, Array(s.data[width...])))
        }
        return out
    }

    /// Manufacturer-specific data: company identifier and payload (the first such structure).
    public var manufacturerData: (company: UInt16, data: [UInt8])? {
        guard let d = first(Self.manufacturerType), d.count >= 2 else { return nil }
        return (UInt16(d[0]) | UInt16(d[1]) << 8, Array(d[2...]))
    }

    public var txPower: Int8? { first(Self.txPowerType)?.first.map { Int8(bitPattern: $0) } }

    public var appearance: UInt16? {
        guard let d = first(Self.appearanceType), d.count == 2 else { return nil }
        return UInt16(d[0]) | UInt16(d[1]) << 8
    }

    /// Structures of `other` appended (a scan response merged into its advertisement).
    public func merged(with other: AdvertisingData) -> AdvertisingData {
        AdvertisingData(structures: structures + other.structures)
    }

    /// Builds typical advertising data: flags, complete name, 16-bit service list.
    public static func make(name: String?, services: [BluetoothUUID] = [], flags: UInt8? = 0x06) -> AdvertisingData {
        var s: [Structure] = []
        if let flags { s.append(Structure(type: flagsType, data: [flags])) }
        if let name { s.append(Structure(type: completeNameType, data: Array(name.utf8))) }
        let short = services.compactMap(\.value16)
        if !short.isEmpty {
            s.append(Structure(type: incomplete16Type, data: short.flatMap { [UInt8(truncatingIfNeeded: $0), UInt8($0 >> 8)] }))
        }
        let long = services.filter { $0.value16 == nil }
        for u in long { s.append(Structure(type: incomplete128Type, data: u.uuid128.reversed())) }
        return AdvertisingData(structures: s)
    }
}
