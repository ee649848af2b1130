import YAML
import BLE
import Support

/// A value derived from others by `set:`: a slice of bytes, a CRC, a concatenation. Each is a pure
/// function of typed values; a wrong type or an out-of-range slice is a `ValueError`, never a trap.
///
/// | derivation           | inputs                                   | result                       |
/// |----------------------|------------------------------------------|------------------------------|
/// | `slice(start, length)` | one: bytes                             | bytes                        |
/// | `crc(algorithm)`     | one or more, joined: all bytes, or all text (its UTF-8) | unsigned integer |
/// | `concat`             | one or more: all bytes, or all text      | bytes, or text               |
///
/// Inputs built from typed parts (`Step.Derive.Input.encoded`) are bytes.
public enum Derivation: Sendable, Hashable, CustomStringConvertible {
    /// Bytes `start ..< start + length`. A negative `start` counts from the end (`-2` is the last two
    /// bytes); `length` nil runs to the end.
    case slice(start: Int, length: Int?)
    case crc(CRCAlgorithm)
    case concat

    /// The result type for inputs of these types, or why they do not fit: for validation.
    public func resultType(for inputs: [ValueType]) throws(ValueError) -> ValueType {
        switch self {
        case .slice:
            guard inputs.count == 1 else { throw ValueError("slice takes one value, got \(inputs.count)") }
            guard inputs[0] == .bytes else { throw ValueError("slice needs bytes, but the value is \(inputs[0].phrase)") }
            return .bytes
        case .crc(let algorithm):
            guard let first = inputs.first else { throw ValueError("\(algorithm) needs a value") }
            guard first == .bytes || first == .text else {
                throw ValueError("\(algorithm) needs bytes or text, but the value is \(first.phrase)")
            }
            guard inputs.allSatisfy({ $0 == first }) else {
                throw ValueError("\(algorithm) joins all bytes or all text, got \(inputs.map(\.name).joined(separator: ", "))")
            }
            return .integer(signed: false)
        case .concat:
            guard let first = inputs.first else { throw ValueError("concat needs at least one value") }
            guard first == .bytes || first == .text, inputs.allSatisfy({ $0 == first }) else {
                throw ValueError("concat joins all bytes or all text, got \(inputs.map(\.name).joined(separator: ", "))")
            }
            return first
        }
    }

    /// Derives the value.
    public func apply(_ inputs: [TypedValue]) throws(ValueError) -> TypedValue {
        _ = try resultType(for: inputs.map(\.type))
        switch self {
        case .slice(let start, let length):
            guard case .bytes(let b) = inputs[0] else { throw ValueError("slice needs bytes") }
            return .bytes(try Self.slice(b, start: start, length: length))
        case .crc(let algorithm):
            var bytes: [UInt8] = []
            for input in inputs {
                switch input {
                case .bytes(let b): bytes += b
                case .text(let s): bytes += Array(s.utf8)
                default: throw ValueError("\(algorithm) needs bytes or text")
                }
            }
            return .integer(Int64(algorithm.checksum(bytes)), signed: false)
        case .concat:
            if case .text = inputs[0] {
                return .text(inputs.map(\.description).joined())
            }
            var out: [UInt8] = []
            for case .bytes(let b) in inputs { out += b }
            return .bytes(out)
        }
    }

    /// `bytes[start ..< start + length]` with a negative `start` counted from the end; an error naming
    /// the range and the size when the slice does not lie inside the value.
    public static func slice(_ bytes: [UInt8], start: Int, length: Int?) throws(ValueError) -> [UInt8] {
        let count = bytes.count
        let from = start < 0 ? count.addingReportingOverflow(start).partialValue : start
        func outside() -> ValueError {
            let range = length.map { "start \(start), length \($0)" } ?? "start \(start)"
            return ValueError("slice \(range) is outside the value's \(count) byte\(count == 1 ? "" : "s")")
        }
        if let length, length < 0 { throw ValueError("slice length \(length) is negative") }
        guard from >= 0, from <= count else { throw outside() }
        let n = length ?? (count - from)
        let (end, overflow) = from.addingReportingOverflow(n)
        guard !overflow, end <= count else { throw outside() }
        return Array(bytes[from..<end])
    }

    public var description: String {
        switch self {
        case .slice(let start, let length): return length.map { "slice(start: \(start), length: \($0))" } ?? "slice(start: \(start))"
        case .crc(let algorithm): return algorithm.rawValue
        case .concat: return "concat"
        }
    }
}

extension Step.Derive {
    /// Every template the inputs use.
    public var templates: [Template] {
        inputs.flatMap { input -> [Template] in
            switch input {
            case .template(let t): return [t]
            case .encoded(let spec): return spec.templates
            }
        }
    }

    /// The inputs built from typed parts.
    public var encoded: [ValueSpec] {
        inputs.compactMap { if case .encoded(let spec) = $0 { return spec } else { return nil } }
    }

    /// The derived value for one device: `typed` gives a name's typed value (a capture, a declared
    /// variable, else the inventory's text), `text` its text as templates show it; files named by parts
    /// are read inside `baseDirectory`. A lone `${name}` keeps its type, a literal is read as the type of
    /// the others (hex beside bytes), parts are bytes.
    public func value(typed: (String) -> TypedValue?, text: (String) -> String?, baseDirectory: String) throws(ValueError) -> TypedValue {
        var values: [TypedValue?] = []
        for input in inputs {
            switch input {
            case .encoded(let spec):
                values.append(.bytes(try spec.bytes(variables: text, baseDirectory: baseDirectory)))
            case .template(let t) where t.isLiteral:
                values.append(nil)
            case .template(let t):
                if let name = t.loneReference {
                    guard let v = typed(name) else { throw ValueError("`${\(name)}` has no value") }
                    values.append(v)
                } else {
                    do { values.append(.text(try t.render(text))) } catch { throw ValueError(error.message) }
                }
            }
        }
        let literalType = values.compactMap { $0?.type }.first ?? .text
        var resolved: [TypedValue] = []
        for (input, v) in zip(inputs, values) {
            if let v {
                resolved.append(v)
            } else if case .template(let t) = input {
                resolved.append(try TypedValue(text: t.source, as: literalType))
            }
        }
        return try derivation.apply(resolved)
    }
}
