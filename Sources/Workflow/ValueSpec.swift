import BLE
import Foundation
import Support
import YAML

/// How an integer is written or read: its width, whether it is signed, and its byte order (`le`
/// little-endian, `be` big-endian; one byte has no order). Signed formats are two's complement.
public enum IntegerFormat: String, Sendable, Equatable, CaseIterable {
    case uint8, uint16le, uint16be, uint32le, uint32be, uint64le, uint64be
    case int8, int16le, int16be, int32le, int32be, int64le, int64be

    /// Size in bytes.
    public var size: Int {
        switch self {
        case .uint8, .int8: return 1
        case .uint16le, .uint16be, .int16le, .int16be: return 2
        case .uint32le, .uint32be, .int32le, .int32be: return 4
        case .uint64le, .uint64be, .int64le, .int64be: return 8
        }
    }

    public var isSigned: Bool { rawValue.hasPrefix("int") }

    /// True when the most significant byte comes first.
    public var isBigEndian: Bool { rawValue.hasSuffix("be") }

    /// The range of values that fit.
    public var range: ClosedRange<Int64> {
        switch (size, isSigned) {
        case (1, false): return 0...Int64(UInt8.max)
        case (2, false): return 0...Int64(UInt16.max)
        case (4, false): return 0...Int64(UInt32.max)
        case (_, false): return 0...Int64.max
        case (1, true): return Int64(Int8.min)...Int64(Int8.max)
        case (2, true): return Int64(Int16.min)...Int64(Int16.max)
        case (4, true): return Int64(Int32.min)...Int64(Int32.max)
        case (_, true): return Int64.min...Int64.max
        }
    }

    /// The bytes of `value` in this format; nil when out of range.
    public func encode(_ value: Int64) -> [UInt8]? {
        guard range.contains(value) else { return nil }
        let bits = UInt64(bitPattern: value)
        let little = (0..<size).map { UInt8(truncatingIfNeeded: bits >> (UInt64($0) * 8)) }
        return isBigEndian ? little.reversed() : little
    }

    /// Reads a value from exactly `size` bytes; nil on a length mismatch, or for a `uint64` above
    /// `Int64.max` (the largest value a workflow holds).
    public func decode(_ bytes: [UInt8]) -> Int64? {
        guard bytes.count == size else { return nil }
        var bits: UInt64 = 0
        for (i, b) in (isBigEndian ? bytes.reversed() : bytes).enumerated() { bits |= UInt64(b) << (UInt64(i) * 8) }
        if isSigned && size < 8 {
            let shift = UInt64(64 - size * 8)
            return Int64(bitPattern: bits << shift) >> Int64(shift)
        }
        if !isSigned && size == 8 && bits > UInt64(Int64.max) { return nil }
        return Int64(bitPattern: bits)
    }

    /// The unsigned format of `bits` bits in this byte order (`uint16be` for a 16-bit CRC written
    /// big-endian): what an error's hint suggests.
    func unsigned(bits: Int) -> IntegerFormat {
        let order = size == 1 ? "le" : (isBigEndian ? "be" : "le")
        return IntegerFormat(rawValue: bits == 8 ? "uint8" : "uint\(bits)\(order)") ?? .uint32le
    }
}

/// Why a value could not be produced or decoded for a device.
public struct ValueError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The bytes a `write`, `write_blob`, `await` (`trigger`, `equals`), a `verify` limit or a `set:` builds:
/// typed encodings joined in order (docs/workflow.md, "Values").
///
/// Parts (each a one-key mapping, with the options its encoding takes; a list joins parts):
/// `{ hex: "01${config}" }`, `{ utf8: "hello" }`, `{ utf8: "${room}", length: 16, pad: 0x20 }` (a fixed
/// field, padded; longer text is an error), `{ base64: "AQI=" }`, `{ bytes: "${cfg}" }` (the bytes of a
/// value captured or declared as bytes), `{ uint16be: 300 }` (every `IntegerFormat`),
/// `{ uint32le: { length_of: "${blob}" } }` (the size of a file), `{ uint16be: { crc: CRC-16/CCITT-FALSE,
/// of: [ … ] } }` (the CRC of other parts, as that integer), `{ file: "${blob}" }` (an empty file is an
/// error unless the part says `allow_empty: true`). Files are read through `FileRoot`.
public indirect enum ValueSpec: Sendable, Equatable {
    /// Where an integer comes from.
    public enum IntegerSource: Sendable, Equatable {
        /// A number (decimal, or `0x` hex) after rendering the template.
        case literal(Template)
        /// The size in bytes of the file the template names.
        case lengthOf(Template)
        /// The CRC of the bytes a value makes (`{ crc: CRC-16/CCITT-FALSE, of: [ … ] }`).
        case crc(CRCAlgorithm, ValueSpec)
    }

    case hex(Template)
    case utf8(Template)
    /// `{ utf8: T, length: N, pad: B }`: the text's UTF-8 in a field of exactly `length` bytes, filled
    /// up with the byte `pad` (default 0); text longer than the field is an error, never cut.
    case utf8Field(Template, length: Int, pad: UInt8)
    case base64(Template)
    case integer(IntegerFormat, IntegerSource)
    /// The contents of a file; `allowEmpty` accepts an empty one (`allow_empty: true`).
    case file(Template, allowEmpty: Bool = false)
    /// `{ bytes: "${cfg}" }`: the bytes of a value captured or declared as bytes (a lone reference).
    case bytes(Template)
    case concat([ValueSpec])

    /// Every template inside, in order.
    public var templates: [Template] {
        switch self {
        case .hex(let t), .utf8(let t), .utf8Field(let t, _, _), .base64(let t), .file(let t, _), .bytes(let t): return [t]
        case .integer(_, .literal(let t)), .integer(_, .lengthOf(let t)): return [t]
        case .integer(_, .crc(_, let inner)): return inner.templates
        case .concat(let parts): return parts.flatMap(\.templates)
        }
    }

    /// Templates that name files (`file:` and `length_of:`).
    public var fileTemplates: [Template] {
        switch self {
        case .file(let t, _), .integer(_, .lengthOf(let t)): return [t]
        case .integer(_, .crc(_, let inner)): return inner.fileTemplates
        case .concat(let parts): return parts.flatMap(\.fileTemplates)
        default: return []
        }
    }

    /// Produces the bytes. `lookup` resolves template references (a typed value as it is shown: bytes
    /// in hex, numbers in decimal); file paths are read inside `baseDirectory` (the inventory's file
    /// root, see `FileRoot`).
    public func bytes(variables lookup: (String) -> String?, baseDirectory: String) throws(ValueError) -> [UInt8] {
        switch self {
        case .hex(let t):
            let text = try render(t, lookup)
            guard let bytes = [UInt8](hex: text) else {
                throw ValueError("\"\(text)\" is not valid hex (pairs of 0-9, a-f)")
            }
            return bytes
        case .utf8(let t):
            return Array(try render(t, lookup).utf8)
        case .utf8Field(let t, let length, let pad):
            let text = try render(t, lookup)
            let bytes = Array(text.utf8)
            guard bytes.count <= length else {
                throw ValueError("\"\(TypedValue.quoted(text))\" is \(bytes.count) bytes of UTF-8, longer than its field of \(length)")
            }
            return bytes + [UInt8](repeating: pad, count: length - bytes.count)
        case .base64(let t):
            let text = try render(t, lookup)
            guard let data = Data(base64Encoded: text) else { throw ValueError("\"\(text)\" is not valid base64") }
            return [UInt8](data)
        case .bytes(let t):
            let text = try render(t, lookup)
            guard let bytes = [UInt8](hex: text) else {
                throw ValueError("`\(t.source)` is not bytes (\"\(TypedValue.quoted(text))\")")
            }
            return bytes
        case .integer(let format, .literal(let t)):
            let text = try render(t, lookup)
            guard let value = YAMLReader.integer(text) else { throw ValueError("\"\(text)\" is not an integer") }
            guard let bytes = format.encode(value) else {
                throw ValueError("\(value) does not fit in \(format.rawValue) (\(format.range.lowerBound)...\(format.range.upperBound))")
            }
            return bytes
        case .integer(let format, .lengthOf(let t)):
            let path = try render(t, lookup)
            let size = try FileRoot(baseDirectory).size(of: path)
            guard let bytes = format.encode(size) else {
                throw ValueError("file \(path) is \(size) bytes, which does not fit in \(format.rawValue)")
            }
            return bytes
        case .integer(let format, .crc(let algorithm, let inner)):
            let crc = algorithm.checksum(try inner.bytes(variables: lookup, baseDirectory: baseDirectory))
            guard let bytes = format.encode(Int64(crc)) else {
                throw ValueError("\(algorithm) gives \(algorithm.width) bits, which do not fit in \(format.rawValue)")
            }
            return bytes
        case .file(let t, let allowEmpty):
            let path = try render(t, lookup)
            let bytes = try FileRoot(baseDirectory).read(path)
            if bytes.isEmpty && !allowEmpty { throw Self.emptyFile(path) }
            return bytes
        case .concat(let parts):
            var out: [UInt8] = []
            for p in parts { out += try p.bytes(variables: lookup, baseDirectory: baseDirectory) }
            return out
        }
    }

    /// True when `format` holds every value of a `algorithm.width`-bit CRC.
    public static func fits(_ algorithm: CRCAlgorithm, in format: IntegerFormat) -> Bool {
        format.range.upperBound >= (Int64(1) << Int64(algorithm.width)) - 1
    }

    /// A path as written, made absolute against `baseDirectory` unless it already is.
    public static func resolve(path: String, baseDirectory: String) -> String {
        if path.hasPrefix("/") || baseDirectory.isEmpty { return path }
        return baseDirectory.hasSuffix("/") ? baseDirectory + path : baseDirectory + "/" + path
    }

    /// Parses a decimal (optionally signed) or `0x` hex integer.
    static func emptyFile(_ path: String) -> ValueError {
        ValueError("file \(path) is empty; if an empty file is meant, say `allow_empty: true` beside `file:`")
    }

    private func render(_ t: Template, _ lookup: (String) -> String?) throws(ValueError) -> String {
        do {
            return try t.render(lookup)
        } catch {
            throw ValueError(error.message)
        }
    }
}
