import Support

/// One CBOR data item (RFC 8949, section 3): the value model that SMP messages are built from and
/// read into.
///
/// Maps keep their pairs in the order they were written (an SMP peer reads keys in any order, but golden
/// bytes need one), and a decoded map never holds the same key twice. Text is valid UTF-8. Integers keep
/// CBOR's two major types: `unsigned(n)` is n, `negative(n)` is -1 - n, so every CBOR integer survives.
public enum CBOR: Sendable, Hashable {
    /// Major type 0: an unsigned integer.
    case unsigned(UInt64)
    /// Major type 1: the integer -1 - n.
    case negative(UInt64)
    /// Major type 2: a byte string.
    case bytes([UInt8])
    /// Major type 3: a UTF-8 text string.
    case text(String)
    /// Major type 4: an array.
    case array([CBOR])
    /// Major type 5: a map, pairs in order.
    case map([Pair])
    /// Major type 6: a tagged item.
    indirect case tagged(UInt64, CBOR)
    /// Major type 7: `false` or `true`.
    case bool(Bool)
    /// Major type 7: `null`.
    case null
    /// Major type 7: `undefined`.
    case undefined
    /// Major type 7: a half, single or double precision float (decoded as a double).
    case float(Double)

    /// One key/value pair of a map.
    public struct Pair: Sendable, Hashable {
        public var key: CBOR
        public var value: CBOR
        public init(_ key: CBOR, _ value: CBOR) {
            self.key = key
            self.value = value
        }
    }

    /// A map with text keys, in the order given: `.textMap(["off": 0, "data": .bytes(chunk)])`.
    public static func textMap(_ pairs: KeyValuePairs<String, CBOR>) -> CBOR {
        .map(pairs.map { Pair(.text($0.key), $0.value) })
    }

    /// A signed integer as CBOR (major type 0 or 1).
    public static func int(_ value: Int64) -> CBOR {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-(value + 1)))
    }
}

// MARK: - Reading values

extension CBOR {
    /// The value under a text key of a map (nil when this is not a map or the key is absent).
    public subscript(_ key: String) -> CBOR? {
        guard case .map(let pairs) = self else { return nil }
        for p in pairs where p.key == .text(key) { return p.value }
        return nil
    }

    /// The pairs of a map.
    public var mapPairs: [Pair]? {
        if case .map(let p) = self { return p }
        return nil
    }

    /// The items of an array.
    public var arrayItems: [CBOR]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// An unsigned integer.
    public var unsignedValue: UInt64? {
        if case .unsigned(let v) = self { return v }
        return nil
    }

    /// An integer of either sign that fits in an `Int64`.
    public var intValue: Int64? {
        switch self {
        case .unsigned(let v): return v <= UInt64(Int64.max) ? Int64(v) : nil
        case .negative(let n): return n <= UInt64(Int64.max) ? -1 - Int64(n) : nil
        default: return nil
        }
    }

    public var bytesValue: [UInt8]? {
        if case .bytes(let b) = self { return b }
        return nil
    }

    public var textValue: String? {
        if case .text(let t) = self { return t }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The major type's name, for messages ("a byte string", "a map").
    public var kindName: String {
        switch self {
        case .unsigned: return "an unsigned integer"
        case .negative: return "a negative integer"
        case .bytes: return "a byte string"
        case .text: return "a text string"
        case .array: return "an array"
        case .map: return "a map"
        case .tagged: return "a tagged item"
        case .bool: return "a boolean"
        case .null: return "null"
        case .undefined: return "undefined"
        case .float: return "a float"
        }
    }
}

// MARK: - Literals (for building messages and tests)

// No `ExpressibleByNilLiteral`: `cond ? .bool(true) : nil` must stay an optional, never become `null`.
extension CBOR: ExpressibleByIntegerLiteral, ExpressibleByStringLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(stringLiteral value: String) { self = .text(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: CBOR...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (CBOR, CBOR)...) { self = .map(elements.map { Pair($0.0, $0.1) }) }
}

// MARK: - Diagnostic notation

extension CBOR: CustomStringConvertible {
    /// RFC 8949 diagnostic notation (section 8): `{"off": 0, "data": h'0102'}`.
    public var description: String {
        var out = ""
        Self.describe(self, into: &out)
        return out
    }

    private static func describe(_ value: CBOR, into out: inout String) {
        switch value {
        case .unsigned(let v): out += String(v)
        case .negative(let n): out += n == UInt64.max ? "-18446744073709551616" : "-" + String(n + 1)
        case .bytes(let b):
            out += "h'"
            for byte in b {
                let digits = String(byte, radix: 16)
                out += digits.count == 1 ? "0" + digits : digits
            }
            out += "'"
        case .text(let t): out += JSONString.quoted(t)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += ", " }
                describe(item, into: &out)
            }
            out += "]"
        case .map(let pairs):
            out += "{"
            for (i, p) in pairs.enumerated() {
                if i > 0 { out += ", " }
                describe(p.key, into: &out)
                out += ": "
                describe(p.value, into: &out)
            }
            out += "}"
        case .tagged(let tag, let item):
            out += String(tag) + "("
            describe(item, into: &out)
            out += ")"
        case .bool(let b): out += b ? "true" : "false"
        case .null: out += "null"
        case .undefined: out += "undefined"
        case .float(let d):
            if d.isNaN { out += "NaN" } else if d.isInfinite { out += d > 0 ? "Infinity" : "-Infinity" } else { out += String(d) }
        }
    }
}
