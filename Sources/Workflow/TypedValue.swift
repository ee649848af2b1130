import BLE
import Foundation
import Support
import YAML

/// The type of a captured value or a variable: what a `read … as:` produces, what `vars:` declares,
/// and what an expression or a measurement limit is checked against.
public enum ValueType: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// A whole number in the `Int64` range; `signed` is false for values read as `uint…`.
    case integer(signed: Bool)
    /// A real number (IEEE 754 double); never NaN, possibly ±infinity (IEEE 11073 ±INFINITY).
    case real
    /// UTF-8 text.
    case text
    /// Raw bytes, shown and written to JSON as lower-case hex.
    case bytes
    /// A semantic version (see `SemanticVersion` for its order).
    case version
    /// `true` or `false`.
    case boolean

    public static let allCases: [ValueType] = [.integer(signed: false), .integer(signed: true), .real, .text, .bytes, .version, .boolean]

    /// The name used in reports and type maps: `uint`, `int`, `real`, `text`, `bytes`, `version`, `boolean`.
    public var name: String {
        switch self {
        case .integer(let signed): return signed ? "int" : "uint"
        case .real: return "real"
        case .text: return "text"
        case .bytes: return "bytes"
        case .version: return "version"
        case .boolean: return "boolean"
        }
    }

    /// The type with this `name`, or nil.
    public init?(name: String) {
        guard let t = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = t
    }

    /// The type in a sentence: "an unsigned integer", "text", "a version".
    public var phrase: String {
        switch self {
        case .integer(let signed): return signed ? "an integer" : "an unsigned integer"
        case .real: return "a real number"
        case .text: return "text"
        case .bytes: return "bytes"
        case .version: return "a version"
        case .boolean: return "a boolean"
        }
    }

    /// Integers and reals.
    public var isNumeric: Bool {
        switch self {
        case .integer, .real: return true
        default: return false
        }
    }

    /// Whether values of this type have an order (`<`, `min:`): numbers, text, versions. Bytes and
    /// booleans only compare for equality.
    public var isOrdered: Bool {
        switch self {
        case .integer, .real, .text, .version: return true
        case .bytes, .boolean: return false
        }
    }

    /// Why `a op b` is not allowed, or nil when it is. The one rule for expressions, measurement limits
    /// and the evaluator: numbers compare with numbers (integers and reals mix), text with text,
    /// versions with versions, bytes with bytes, booleans with booleans; ordering operators need an
    /// ordered type.
    public static func comparisonError(_ a: ValueType, _ op: ComparisonOperator, _ b: ValueType) -> String? {
        let sameKind = (a.isNumeric && b.isNumeric) || a.kind == b.kind
        guard sameKind else { return "cannot compare \(a.phrase) with \(b.phrase)" }
        if op.isOrdering, !a.isOrdered {
            return "\(a.phrase) can only be compared with == and !=, not \(op.rawValue)"
        }
        return nil
    }

    /// The type without signedness, for "same kind" checks.
    private var kind: String { isNumeric ? "number" : name }

    public var description: String { name }
}

/// A comparison operator of the expression language and of measurement limits.
public enum ComparisonOperator: String, Sendable, Hashable, CaseIterable {
    case equal = "=="
    case notEqual = "!="
    case less = "<"
    case lessOrEqual = "<="
    case greater = ">"
    case greaterOrEqual = ">="

    /// `<`, `<=`, `>`, `>=`.
    public var isOrdering: Bool { self != .equal && self != .notEqual }
}

/// A value a step captured or a variable holds, with its type.
///
/// `==` and `hash` are structural (`.integer(2, signed: false)` differs from `.real(2)`); compare values
/// as the workflow language does with `TypedValue.compare(_:_:_:)`.
public enum TypedValue: Sendable, Hashable, CustomStringConvertible {
    case integer(Int64, signed: Bool)
    case real(Double)
    case text(String)
    case bytes([UInt8])
    case version(SemanticVersion)
    case boolean(Bool)

    public var type: ValueType {
        switch self {
        case .integer(_, let signed): return .integer(signed: signed)
        case .real: return .real
        case .text: return .text
        case .bytes: return .bytes
        case .version: return .version
        case .boolean: return .boolean
        }
    }

    /// The value as a report or a message shows it: `19`, `2.5`, `-Infinity`, the text itself, hex for
    /// bytes, the version as written, `true`/`false`.
    public var description: String {
        switch self {
        case .integer(let n, _): return String(n)
        case .real(let d): return Self.numberText(d)
        case .text(let s): return s
        case .bytes(let b): return b.hexString
        case .version(let v): return v.text
        case .boolean(let b): return b ? "true" : "false"
        }
    }

    // MARK: Text

    /// Reads a value of `type` from text as written in a workflow, an inventory or after `${}` rendering:
    /// integers in decimal or `0x` hex, reals in decimal (`Infinity`/`-Infinity` allowed), text as is,
    /// bytes as hex, versions as `SemanticVersion` reads them, booleans as `true`/`false`.
    public init(text: String, as type: ValueType) throws(ValueError) {
        switch type {
        case .integer(let signed):
            guard let n = YAMLReader.integer(text) else {
                throw ValueError("\"\(Self.quoted(text))\" is not an integer")
            }
            guard signed || n >= 0 else { throw ValueError("\(n) is negative, but the value is an unsigned integer") }
            self = .integer(n, signed: signed)
        case .real:
            self = .real(try Self.parseReal(text))
        case .text:
            self = .text(text)
        case .bytes:
            guard let b = [UInt8](hex: text) else {
                throw ValueError("\"\(Self.quoted(text))\" is not valid hex (pairs of 0-9, a-f)")
            }
            self = .bytes(b)
        case .version:
            self = .version(try SemanticVersion(parsing: text))
        case .boolean:
            switch text {
            case "true": self = .boolean(true)
            case "false": self = .boolean(false)
            default: throw ValueError("\"\(Self.quoted(text))\" is not a boolean (true or false)")
            }
        }
    }

    private static func parseReal(_ text: String) throws(ValueError) -> Double {
        switch text {
        case "Infinity", "+Infinity": return .infinity
        case "-Infinity": return -.infinity
        default: break
        }
        // Swift's Double(String) also reads "nan", "inf" and hex floats; a workflow writes decimals.
        let allowed = text.utf8.allSatisfy { b in
            (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || b == UInt8(ascii: ".") || b == UInt8(ascii: "-")
                || b == UInt8(ascii: "+") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E")
        }
        guard allowed, let d = Double(text), d.isFinite else {
            throw ValueError("\"\(quoted(text))\" is not a number")
        }
        return d
    }

    // MARK: JSON

    /// The value as a JSON scalar: integers and reals as numbers (±infinity, which JSON has no number
    /// for, as the strings `"Infinity"` and `"-Infinity"`), text as a string, bytes as a lower-case hex
    /// string, versions as the string written, booleans as booleans.
    public var jsonScalar: JSONScalar {
        switch self {
        case .integer(let n, _): return .integer(n)
        case .real(let d): return d.isFinite ? .real(d) : .string(Self.numberText(d))
        case .text(let s): return .string(s)
        case .bytes(let b): return .string(b.hexString)
        case .version(let v): return .string(v.text)
        case .boolean(let b): return .boolean(b)
        }
    }

    /// The exact JSON text of the value (see `jsonScalar`).
    public var json: String { jsonScalar.json }

    /// Reads back a value written as `jsonScalar`, given its declared type. An integral JSON number is
    /// accepted for a real and a real with no fraction for an integer; anything else of the wrong
    /// shape is an error naming the type.
    public init(json: JSONScalar, as type: ValueType) throws(ValueError) {
        switch (type, json) {
        case (.integer(let signed), .integer(let n)):
            guard signed || n >= 0 else { throw ValueError("\(n) is negative, but the value is an unsigned integer") }
            self = .integer(n, signed: signed)
        case (.integer(let signed), .real(let d)):
            guard d == d.rounded(), d >= -9.223372036854775808e18, d < 9.223372036854775808e18 else {
                throw ValueError("\(Self.numberText(d)) is not an integer")
            }
            self = try TypedValue(json: .integer(Int64(d)), as: .integer(signed: signed))
        case (.real, .integer(let n)):
            self = .real(Double(n))
        case (.real, .real(let d)):
            self = .real(d)
        case (.real, .string(let s)) where s == "Infinity" || s == "-Infinity":
            self = .real(s == "Infinity" ? .infinity : -.infinity)
        case (.text, .string(let s)):
            self = .text(s)
        case (.bytes, .string(let s)), (.version, .string(let s)):
            self = try TypedValue(text: s, as: type)
        case (.boolean, .boolean(let b)):
            self = .boolean(b)
        default:
            throw ValueError("JSON \(Self.quoted(json.json)) is not \(type.phrase)")
        }
    }

    /// Reads back a value from its JSON text (see `init(json:as:)`).
    public init(jsonText: String, as type: ValueType) throws(ValueError) {
        let scalar: JSONScalar
        do {
            scalar = try JSONDecoder().decode(JSONScalar.self, from: Data(jsonText.utf8))
        } catch {
            throw ValueError("\"\(Self.quoted(jsonText))\" is not a JSON scalar")
        }
        try self.init(json: scalar, as: type)
    }

    // MARK: Comparison

    /// `a op b` as the workflow language defines it: numbers numerically (integers and reals exactly,
    /// without rounding), text by its UTF-8 bytes (exact, no normalisation), versions in semantic order,
    /// bytes and booleans for equality only. Throws when the types cannot be compared.
    public static func compare(_ a: TypedValue, _ op: ComparisonOperator, _ b: TypedValue) throws(ValueError) -> Bool {
        if let message = ValueType.comparisonError(a.type, op, b.type) {
            throw ValueError("\(message) (\(a.quotedForMessage) \(op.rawValue) \(b.quotedForMessage))")
        }
        let order: Order
        switch (a, b) {
        case (.text(let x), .text(let y)):
            order = x.utf8.elementsEqual(y.utf8) ? .equal : (x.utf8.lexicographicallyPrecedes(y.utf8) ? .less : .greater)
        case (.bytes(let x), .bytes(let y)):
            order = x == y ? .equal : .unordered
        case (.boolean(let x), .boolean(let y)):
            order = x == y ? .equal : .unordered
        case (.version(let x), .version(let y)):
            order = x == y ? .equal : (x < y ? .less : .greater)
        default:
            guard let x = a.number, let y = b.number else {
                throw ValueError("cannot compare \(a.quotedForMessage) with \(b.quotedForMessage)")
            }
            order = Self.compareNumbers(x, y)
        }
        switch op {
        case .equal: return order == .equal
        case .notEqual: return order != .equal
        case .less: return order == .less
        case .lessOrEqual: return order == .less || order == .equal
        case .greater: return order == .greater
        case .greaterOrEqual: return order == .greater || order == .equal
        }
    }

    private enum Order { case less, equal, greater, unordered }

    private enum Number {
        case integer(Int64)
        case real(Double)
    }

    private var number: Number? {
        switch self {
        case .integer(let n, _): return .integer(n)
        case .real(let d): return .real(d)
        default: return nil
        }
    }

    private static func compareNumbers(_ a: Number, _ b: Number) -> Order {
        switch (a, b) {
        case (.integer(let x), .integer(let y)):
            return x == y ? .equal : (x < y ? .less : .greater)
        case (.real(let x), .real(let y)):
            if x.isNaN || y.isNaN { return .unordered }
            return x == y ? .equal : (x < y ? .less : .greater)
        case (.integer(let x), .real(let y)):
            return compare(integer: x, real: y)
        case (.real(let x), .integer(let y)):
            switch compare(integer: y, real: x) {
            case .less: return .greater
            case .greater: return .less
            case let other: return other
            }
        }
    }

    /// An Int64 against a Double without converting the integer to a Double (which rounds above 2^53).
    private static func compare(integer x: Int64, real y: Double) -> Order {
        if y.isNaN { return .unordered }
        if y >= 9.223372036854775808e18 { return .less }
        if y < -9.223372036854775808e18 { return .greater }
        let whole = y.rounded(.towardZero)
        let w = Int64(whole)
        if x != w { return x < w ? .less : .greater }
        let fraction = y - whole
        return fraction == 0 ? .equal : (fraction > 0 ? .less : .greater)
    }

    // MARK: Text helpers

    /// A real as JSON and messages show it: the shortest text that reads back as the same Double,
    /// without a trailing `.0` (as `JSONEncoder` writes it); `Infinity`, `-Infinity`, `NaN`.
    public static func numberText(_ d: Double) -> String {
        if d.isNaN { return "NaN" }
        if d.isInfinite { return d > 0 ? "Infinity" : "-Infinity" }
        var text = d.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return text
    }

    /// The value in a message: text and versions quoted, others as shown.
    public var quotedForMessage: String {
        switch self {
        case .text(let s): return "\"\(Self.quoted(s))\""
        default: return Self.quoted(description)
        }
    }

    /// Text quoted in a message, bounded so that hostile input cannot make the message huge.
    static func quoted(_ text: String) -> String {
        text.unicodeScalars.count > 64 ? String(String.UnicodeScalarView(text.unicodeScalars.prefix(64))) + "…" : text
    }
}

extension TypedValue: Encodable {
    /// Encodes `jsonScalar`; decode with `init(json:as:)`, which needs the declared type.
    public func encode(to encoder: any Encoder) throws {
        try jsonScalar.encode(to: encoder)
    }
}

/// A JSON scalar as read from or written to a document, before a declared type gives it meaning.
public enum JSONScalar: Sendable, Hashable, Codable, CustomStringConvertible {
    case null
    case boolean(Bool)
    case integer(Int64)
    case real(Double)
    case string(String)

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .boolean(b)
        } else if let n = try? c.decode(Int64.self) {
            self = .integer(n)
        } else if let d = try? c.decode(Double.self) {
            self = .real(d)
        } else {
            self = .string(try c.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .boolean(let b): try c.encode(b)
        case .integer(let n): try c.encode(n)
        case .real(let d): try c.encode(d)
        case .string(let s): try c.encode(s)
        }
    }

    /// The exact JSON text (strings escaped as `JSONString.quoted` does; non-finite reals, which
    /// JSON cannot hold, as `null`).
    public var json: String {
        switch self {
        case .null: return "null"
        case .boolean(let b): return b ? "true" : "false"
        case .integer(let n): return String(n)
        case .real(let d): return d.isFinite ? TypedValue.numberText(d) : "null"
        case .string(let s): return JSONString.quoted(s)
        }
    }

    public var description: String { json }

    /// The value as a cell or a message shows it: a string as itself (unquoted), numbers and booleans
    /// as JSON writes them, null as the empty string.
    public var text: String {
        switch self {
        case .null: return ""
        case .string(let s): return s
        default: return json
        }
    }
}

extension JSONScalar: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .real(value) }
    public init(booleanLiteral value: Bool) { self = .boolean(value) }
}

extension ValueType: Codable {
    /// Written as its `name` (`uint`, `version`, …), as reports and type maps show it.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(name)
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        let name = try c.decode(String.self)
        guard let t = ValueType(name: name) else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "unknown value type \"\(name)\"")
        }
        self = t
    }
}
