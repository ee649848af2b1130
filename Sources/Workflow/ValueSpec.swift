import BLE
import Foundation
import YAML

/// How a little-endian (or single-byte) integer is written or read.
public enum IntegerFormat: String, Sendable, Equatable, CaseIterable {
    case uint8, uint16le, uint32le, uint64le, int8, int16le, int32le, int64le

    /// Size in bytes.
    public var size: Int {
        switch self {
        case .uint8, .int8: return 1
        case .uint16le, .int16le: return 2
        case .uint32le, .int32le: return 4
        case .uint64le, .int64le: return 8
        }
    }

    public var isSigned: Bool {
        switch self {
        case .int8, .int16le, .int32le, .int64le: return true
        default: return false
        }
    }

    /// The range of values that fit.
    public var range: ClosedRange<Int64> {
        switch self {
        case .uint8: return 0...Int64(UInt8.max)
        case .uint16le: return 0...Int64(UInt16.max)
        case .uint32le: return 0...Int64(UInt32.max)
        case .uint64le: return 0...Int64.max
        case .int8: return Int64(Int8.min)...Int64(Int8.max)
        case .int16le: return Int64(Int16.min)...Int64(Int16.max)
        case .int32le: return Int64(Int32.min)...Int64(Int32.max)
        case .int64le: return Int64.min...Int64.max
        }
    }

    /// Little-endian bytes of `value` (two's complement for signed formats); nil when out of range.
    public func encode(_ value: Int64) -> [UInt8]? {
        guard range.contains(value) else { return nil }
        let bits = UInt64(bitPattern: value)
        return (0..<size).map { UInt8(truncatingIfNeeded: bits >> (UInt64($0) * 8)) }
    }

    /// Reads a value from exactly `size` little-endian bytes; nil on a length mismatch.
    public func decode(_ bytes: [UInt8]) -> Int64? {
        guard bytes.count == size else { return nil }
        var bits: UInt64 = 0
        for (i, b) in bytes.enumerated() { bits |= UInt64(b) << (UInt64(i) * 8) }
        if isSigned && size < 8 {
            let shift = UInt64(64 - size * 8)
            return Int64(bitPattern: bits << shift) >> Int64(shift)
        }
        if !isSigned && size == 8 && bits > UInt64(Int64.max) { return nil }
        return Int64(bitPattern: bits)
    }
}

/// Why a value could not be produced or decoded for a device.
public struct ValueError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The bytes a `write`, `write_blob` or `await equals` uses, written as text in the workflow.
///
/// Forms (each a one-key mapping; a list concatenates parts):
/// `{ hex: "01${config}" }`, `{ utf8: "hello" }`, `{ base64: "AQI=" }`, `{ uint16le: 300 }`,
/// `{ uint32le: { length_of: "${blob}" } }` (the size of a file), `{ file: "${blob}" }` (an empty file is
/// an error unless the spec says `allow_empty: true`). Files are read through `FileRoot`.
public indirect enum ValueSpec: Sendable, Equatable {
    /// Where an integer comes from.
    public enum IntegerSource: Sendable, Equatable {
        /// A number (decimal, or `0x` hex) after rendering the template.
        case literal(Template)
        /// The size in bytes of the file the template names.
        case lengthOf(Template)
    }

    case hex(Template)
    case utf8(Template)
    case base64(Template)
    case integer(IntegerFormat, IntegerSource)
    /// The contents of a file; `allowEmpty` accepts an empty one (`allow_empty: true`).
    case file(Template, allowEmpty: Bool = false)
    case concat([ValueSpec])

    /// Every template inside, in order.
    public var templates: [Template] {
        switch self {
        case .hex(let t), .utf8(let t), .base64(let t), .file(let t, _): return [t]
        case .integer(_, .literal(let t)), .integer(_, .lengthOf(let t)): return [t]
        case .concat(let parts): return parts.flatMap(\.templates)
        }
    }

    /// Templates that name files (`file:` and `length_of:`).
    public var fileTemplates: [Template] {
        switch self {
        case .file(let t, _), .integer(_, .lengthOf(let t)): return [t]
        case .concat(let parts): return parts.flatMap(\.fileTemplates)
        default: return []
        }
    }

    /// Produces the bytes. `lookup` resolves template references; file paths are read inside
    /// `baseDirectory` (the inventory's file root, see `FileRoot`).
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
        case .base64(let t):
            let text = try render(t, lookup)
            guard let data = Data(base64Encoded: text) else { throw ValueError("\"\(text)\" is not valid base64") }
            return [UInt8](data)
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
