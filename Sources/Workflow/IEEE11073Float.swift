import Foundation

/// An IEEE 11073-20601 decimal float, as health and sensor GATT profiles carry measurements
/// (temperature, weight, glucose, SpO2): a signed base-10 exponent and a signed mantissa.
///
/// | type   | size    | bits 15/31…     | rest              | value                     |
/// |--------|---------|-----------------|-------------------|---------------------------|
/// | SFLOAT | 2 bytes | exponent: 4 bit | mantissa: 12 bit  | mantissa × 10^exponent    |
/// | FLOAT  | 4 bytes | exponent: 8 bit | mantissa: 24 bit  | mantissa × 10^exponent    |
///
/// Both fields are two's complement. On the air the value is little-endian. With exponent 0, five
/// mantissa values are reserved (IEEE 11073-20601 "special values"; the Bluetooth Personal Health
/// Devices Transcoding White Paper lists the same):
///
/// | meaning                          | SFLOAT  | FLOAT        |
/// |----------------------------------|---------|--------------|
/// | +INFINITY                        | 0x07FE  | 0x007FFFFE   |
/// | NaN (not a number)               | 0x07FF  | 0x007FFFFF   |
/// | NRes (not at this resolution)    | 0x0800  | 0x00800000   |
/// | reserved for future use          | 0x0801  | 0x00800001   |
/// | -INFINITY                        | 0x0802  | 0x00800002   |
///
/// Those mantissas with any other exponent are ordinary numbers (as Wireshark decodes them).
public enum IEEE11073Float: Sendable, Hashable, CustomStringConvertible {
    case number(mantissa: Int32, exponent: Int8)
    case positiveInfinity
    case negativeInfinity
    case nan
    case notAtThisResolution
    case reserved

    /// Decodes a 16-bit SFLOAT (the raw value, already assembled from its little-endian bytes).
    public init(sfloat raw: UInt16) {
        switch raw {
        case 0x07FE: self = .positiveInfinity
        case 0x07FF: self = .nan
        case 0x0800: self = .notAtThisResolution
        case 0x0801: self = .reserved
        case 0x0802: self = .negativeInfinity
        default:
            let exponent = Int8(bitPattern: UInt8(truncatingIfNeeded: raw >> 12) << 4) >> 4
            let mantissa = Int16(bitPattern: (raw & 0x0FFF) << 4) >> 4
            self = .number(mantissa: Int32(mantissa), exponent: exponent)
        }
    }

    /// Decodes a 32-bit FLOAT (the raw value, already assembled from its little-endian bytes).
    public init(float raw: UInt32) {
        switch raw {
        case 0x007F_FFFE: self = .positiveInfinity
        case 0x007F_FFFF: self = .nan
        case 0x0080_0000: self = .notAtThisResolution
        case 0x0080_0001: self = .reserved
        case 0x0080_0002: self = .negativeInfinity
        default:
            let exponent = Int8(bitPattern: UInt8(truncatingIfNeeded: raw >> 24))
            let mantissa = Int32(bitPattern: (raw & 0x00FF_FFFF) << 8) >> 8
            self = .number(mantissa: mantissa, exponent: exponent)
        }
    }

    /// The value as a Double: the decimal `mantissa e exponent` correctly rounded; ±infinity for the
    /// infinities; nil for NaN, NRes and the reserved value, which carry no number.
    public var doubleValue: Double? {
        switch self {
        case .number(let m, let e):
            // Reading the decimal text rounds once, correctly; multiplying by a power of ten would not.
            return Double("\(m)e\(e)") ?? Double(m) * pow(10, Double(e))
        case .positiveInfinity: return .infinity
        case .negativeInfinity: return -.infinity
        case .nan, .notAtThisResolution, .reserved: return nil
        }
    }

    /// `-0.5`, `+INFINITY`, `NaN`, `NRes`, `reserved`.
    public var description: String {
        switch self {
        case .number: return TypedValue.numberText(doubleValue ?? 0)
        case .positiveInfinity: return "+INFINITY"
        case .negativeInfinity: return "-INFINITY"
        case .nan: return "NaN"
        case .notAtThisResolution: return "NRes"
        case .reserved: return "reserved"
        }
    }

    /// What a special value without a number means, for error messages.
    var meaning: String {
        switch self {
        case .nan: return "NaN (not a number): the device has no valid measurement"
        case .notAtThisResolution: return "NRes (not at this resolution): the value cannot be represented"
        case .reserved: return "a value reserved for future use"
        default: return description
        }
    }
}
