import BLE
import Foundation
import Workflow

/// Values of common SIG characteristics decoded for reading (`provision gatt`), from the layouts of the
/// GATT Specification Supplement: Battery Level as a percentage, strings as text, PnP ID and the
/// preferred connection parameters as their fields. A value of the wrong length decodes to nothing (it
/// is shown as hex): the bytes come from a device and are not trusted.
enum KnownCharacteristic {
    /// The strings: Device Name, Model Number, Serial Number, Firmware, Hardware and Software Revision,
    /// Manufacturer Name.
    static let strings: Set<UInt16> = [0x2A00, 0x2A24, 0x2A25, 0x2A26, 0x2A27, 0x2A28, 0x2A29]
    /// The characteristics `decode` knows.
    static let decoded: Set<UInt16> = strings.union([0x2A19, 0x2A01, 0x2A04, 0x2A05, 0x2A50, 0x2A6E, 0x2A6F, 0x2A1C])

    static func isKnown(_ uuid: BluetoothUUID) -> Bool { uuid.value16.map(decoded.contains) ?? false }
    static func isString(_ uuid: BluetoothUUID) -> Bool { uuid.value16.map(strings.contains) ?? false }

    /// The value in words, or nil when the characteristic is not one of these or the bytes do not fit it.
    static func decode(_ uuid: BluetoothUUID, _ b: [UInt8]) -> String? {
        guard let id = uuid.value16, decoded.contains(id) else { return nil }
        if strings.contains(id) { return GATTCommand.printable(b).map { "\"\($0)\"" } }
        switch id {
        case 0x2A19:  // Battery Level: uint8, percent 0–100.
            guard b.count == 1 else { return nil }
            return b[0] <= 100 ? "\(b[0]) %" : "\(b[0]) (not a percentage: 0 to 100)"
        case 0x2A01:  // Appearance: uint16, category in bits 15–6, subcategory in bits 5–0.
            guard let v = u16(b, 0), b.count == 2 else { return nil }
            return String(format: "0x%04X (category %d, subcategory %d)", v, v >> 6, v & 0x3F)
        case 0x2A04:  // Peripheral Preferred Connection Parameters: 4 × uint16.
            guard b.count == 8, let lo = u16(b, 0), let hi = u16(b, 2), let latency = u16(b, 4), let timeout = u16(b, 6) else { return nil }
            func interval(_ v: UInt16) -> String { v == 0xFFFF ? "any" : ms(Double(v) * 1.25) }
            return "interval \(interval(lo))–\(interval(hi)), latency \(latency), supervision timeout \(timeout == 0xFFFF ? "any" : ms(Double(timeout) * 10))"
        case 0x2A05:  // Service Changed: start and end handle.
            guard b.count == 4, let start = u16(b, 0), let end = u16(b, 2) else { return nil }
            return String(format: "handles 0x%04X-0x%04X", start, end)
        case 0x2A50:  // PnP ID: vendor id source, vendor, product, version.
            guard b.count == 7, let vendor = u16(b, 1), let product = u16(b, 3), let version = u16(b, 5) else { return nil }
            let source = b[0] == 1 ? "Bluetooth SIG" : b[0] == 2 ? "USB-IF" : "source \(b[0])"
            return String(format: "vendor 0x%04X", vendor) + " (\(source)), "
                + String(format: "product 0x%04X, version %d.%d.%d", product, version >> 8, (version >> 4) & 0xF, version & 0xF)
        case 0x2A6E:  // Temperature: sint16, 0.01 °C.
            guard b.count == 2, let v = u16(b, 0) else { return nil }
            return v == 0x8000 ? "unknown" : String(format: "%.2f °C", Double(Int16(bitPattern: v)) / 100)
        case 0x2A6F:  // Humidity: uint16, 0.01 %.
            guard b.count == 2, let v = u16(b, 0) else { return nil }
            return v == 0xFFFF ? "unknown" : String(format: "%.2f %%", Double(v) / 100)
        case 0x2A1C:  // Temperature Measurement: flags, then an IEEE 11073 FLOAT in °C (flag bit 0 clear) or °F.
            guard b.count >= 5, let raw = u32(b, 1) else { return nil }
            let value = IEEE11073Float(float: raw)
            return "\(value) \(b[0] & 1 == 0 ? "°C" : "°F")"
        default:
            return nil
        }
    }

    private static func u16(_ b: [UInt8], _ at: Int) -> UInt16? {
        guard at >= 0, at + 1 < b.count else { return nil }
        return UInt16(b[at]) | UInt16(b[at + 1]) << 8
    }

    private static func u32(_ b: [UInt8], _ at: Int) -> UInt32? {
        guard let lo = u16(b, at), let hi = u16(b, at + 2) else { return nil }
        return UInt32(lo) | UInt32(hi) << 16
    }

    private static func ms(_ v: Double) -> String {
        v == v.rounded() ? "\(Int(v)) ms" : String(format: "%.2f ms", v)
    }
}
