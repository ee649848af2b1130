import BLE
import Foundation
import Support

/// How the bytes of a characteristic become a typed value (`read … as: uint8`), and how a typed value
/// becomes bytes for a write: the `as:` names of the workflow language.
///
/// | format                         | bytes       | value                                        |
/// |--------------------------------|-------------|----------------------------------------------|
/// | `uint8`                        | 1           | unsigned integer                             |
/// | `uint16le` / `uint16be`        | 2           | unsigned integer, little / big endian        |
/// | `uint32le` / `uint32be`        | 4           | unsigned integer                             |
/// | `uint64le` / `uint64be`        | 8           | unsigned integer up to 2^63-1                |
/// | `int8`, `int16le`/`be`, `int32le`/`be`, `int64le`/`be` | 1, 2, 4, 8 | integer (two's complement) |
/// | `sfloat`                       | 2           | real: IEEE 11073 16-bit SFLOAT, little endian |
/// | `float`                        | 4           | real: IEEE 11073 32-bit FLOAT, little endian  |
/// | `utf8`                         | any         | text; invalid UTF-8 is an error              |
/// | `hex`                          | any         | bytes                                        |
/// | `version`                      | any         | version, from UTF-8 text such as `2.4.1` (NUL and whitespace padding trimmed) |
/// | `base64`                       | any         | text: the bytes in standard base64            |
///
/// Decoding never traps: a wrong length, invalid UTF-8, an IEEE 11073 NaN/NRes/reserved value or text
/// that is not a version is a `ValueError` saying what was expected and what came.
public enum ValueFormat: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case uint8, uint16le, uint16be, uint32le, uint32be, uint64le, uint64be
    case int8, int16le, int16be, int32le, int32be, int64le, int64be
    case sfloat, float
    case utf8, hex, version, base64

    /// The type of the values this format produces.
    public var valueType: ValueType {
        switch self {
        case .sfloat, .float: return .real
        case .utf8, .base64: return .text
        case .hex: return .bytes
        case .version: return .version
        default: return .integer(signed: integer?.isSigned ?? false)
        }
    }

    /// The exact number of bytes, for fixed-size formats.
    public var size: Int? {
        switch self {
        case .sfloat: return 2
        case .float: return 4
        case .utf8, .hex, .version, .base64: return nil
        default: return integer?.size
        }
    }

    /// The format named `name`, or nil; `hint` is "did you mean …" for a misspelt name.
    public static func named(_ name: String) -> (format: ValueFormat?, hint: String?) {
        if let f = ValueFormat(rawValue: name) { return (f, nil) }
        return (nil, Suggestions.hint(for: name, in: allCases.map(\.rawValue)))
    }

    /// The integer format this one reads and writes (integers have one home: `IntegerFormat`).
    public var integer: IntegerFormat? { IntegerFormat(rawValue: rawValue) }

    // MARK: Decoding

    /// The typed value `bytes` hold in this format.
    public func decode(_ bytes: [UInt8]) throws(ValueError) -> TypedValue {
        if let size, bytes.count != size {
            throw ValueError("\(rawValue) needs exactly \(size) byte\(size == 1 ? "" : "s"), got \(bytes.count)\(Self.shown(bytes))")
        }
        if let format = integer {
            guard let n = format.decode(bytes) else {
                throw ValueError("\(rawValue) value \(bytes.hexString) is above \(Int64.max), the largest integer a value can hold")
            }
            return .integer(n, signed: format.isSigned)
        }
        switch self {
        case .sfloat:
            return try Self.real(IEEE11073Float(sfloat: UInt16(bytes[0]) | UInt16(bytes[1]) << 8), bytes, format: self)
        case .float:
            let raw = bytes.reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            return try Self.real(IEEE11073Float(float: raw), bytes, format: self)
        case .utf8:
            return .text(try Self.text(bytes))
        case .hex:
            return .bytes(bytes)
        case .base64:
            return .text(Data(bytes).base64EncodedString())
        case .version:
            // Devices often pad a version string with NULs or spaces (a fixed-size field): trim both.
            var text = Substring(try Self.text(bytes)).unicodeScalars
            let padding: Set<Unicode.Scalar> = ["\0", " ", "\t", "\r", "\n"]
            while let c = text.last, padding.contains(c) { text = text.dropLast() }
            while let c = text.first, padding.contains(c) { text = text.dropFirst() }
            return .version(try SemanticVersion(parsing: String(text)))
        default:
            throw ValueError("\(rawValue) cannot decode bytes")
        }
    }

    private static func real(_ value: IEEE11073Float, _ bytes: [UInt8], format: ValueFormat) throws(ValueError) -> TypedValue {
        guard let d = value.doubleValue else {
            throw ValueError("\(format.rawValue) \(bytes.hexString) is \(value.meaning)")
        }
        return .real(d)
    }

    private static func text(_ bytes: [UInt8]) throws(ValueError) -> String {
        guard let s = String(validating: bytes, as: UTF8.self) else {
            throw ValueError("value \(shownHex(bytes)) is not valid UTF-8")
        }
        return s
    }

    // MARK: Encoding

    /// The bytes that write `value` in this format. Integers must fit the width (`300` is not a
    /// `uint8`); `utf8` writes text (or a version's text), `hex` writes bytes, `version` writes the
    /// version as written, `base64` writes the bytes base64 text stands for. IEEE 11073 floats are
    /// read-only.
    public func encode(_ value: TypedValue) throws(ValueError) -> [UInt8] {
        if let format = integer {
            guard case .integer(let n, _) = value else { throw mismatch(value) }
            guard let bytes = format.encode(n) else {
                throw ValueError("\(n) does not fit in \(rawValue) (\(format.range.lowerBound)...\(format.range.upperBound))")
            }
            return bytes
        }
        switch (self, value) {
        case (.utf8, .text(let s)): return Array(s.utf8)
        case (.utf8, .version(let v)), (.version, .version(let v)): return Array(v.text.utf8)
        case (.hex, .bytes(let b)): return b
        case (.base64, .text(let s)):
            guard let data = Data(base64Encoded: s) else { throw ValueError("\"\(TypedValue.quoted(s))\" is not valid base64") }
            return [UInt8](data)
        case (.sfloat, _), (.float, _):
            throw ValueError("\(rawValue) is for reading measurements; write the bytes with hex or an integer format")
        default: throw mismatch(value)
        }
    }

    private func mismatch(_ value: TypedValue) -> ValueError {
        ValueError("\(rawValue) writes \(valueType.phrase), not \(value.type.phrase) (\(value.quotedForMessage))")
    }

    // MARK: Messages

    /// ` (0a0b…)` for an error message: the bytes in hex, at most 32 of them.
    private static func shown(_ bytes: [UInt8]) -> String {
        bytes.isEmpty ? "" : " (\(shownHex(bytes)))"
    }

    private static func shownHex(_ bytes: [UInt8]) -> String {
        bytes.count > 32 ? Array(bytes.prefix(32)).hexString + "…" : bytes.hexString
    }

    public var description: String { rawValue }
}
