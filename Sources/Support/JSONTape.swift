/// One JSON text (RFC 8259) parsed into a flat list of tokens, a *tape*, in one pass over its bytes: the
/// reader beneath the engine's `RecordDecoder` and `provision report`'s streaming report reader.
///
/// Each value is a token holding where its bytes are; a container's token also holds how many members
/// or elements it has and the index of the token after its last descendant, so a reader skips any value
/// in O(1) and materialises only what it asks for (a string is unescaped, a number read, when asked).
///
/// The bytes are hostile (a report from outside, a row of a database): the grammar is checked strictly
/// (no trailing commas, no leading zeros, no control characters in strings, valid escapes, nothing after
/// the value), nesting is bounded, nothing traps, and every error carries the byte offset it is at
/// (`position(of:)` turns it into a line and column).
package struct JSONTape: Sendable {
    package enum Kind: UInt8, Sendable {
        case object, array, string, number, `true`, `false`, null
    }

    /// One value. For a string, `start..<end` are the bytes between its quotes; for a number, its text;
    /// for a container, `start` is the offset of its bracket and `end` the index of the token after it.
    package struct Token: Sendable {
        package var start: Int
        package var end: Int
        /// Members of an object (key and value count as one), elements of an array.
        package var count: Int32
        package var kind: Kind
        /// A string with at least one escape (`\n`, `\u00e9`): it must be unescaped.
        package var escaped: Bool

        package init(start: Int, end: Int, count: Int32, kind: Kind, escaped: Bool) {
            self.start = start
            self.end = end
            self.count = count
            self.kind = kind
            self.escaped = escaped
        }
    }

    /// Why the text is not JSON, and where.
    package struct SyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
        package var offset: Int
        package var message: String
        package init(offset: Int, message: String) {
            self.offset = offset
            self.message = message
        }
        package var description: String { message }
    }

    /// Deeper nesting than this is refused (records nest four or five levels).
    package static let maximumDepth = 256

    package let bytes: [UInt8]
    package private(set) var tokens: [Token] = []

    /// Parses `bytes` as one JSON value (surrounded by whitespace only).
    package init(_ bytes: [UInt8]) throws(SyntaxError) {
        self.bytes = bytes
        var tokens: [Token] = []
        tokens.reserveCapacity(bytes.count / 8 + 4)
        var parser = Parser()
        let failure: SyntaxError? = bytes.withUnsafeBufferPointer { p in
            do throws(SyntaxError) {
                try parser.parse(p, into: &tokens)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
        self.tokens = tokens
    }

    // MARK: - Reading tokens

    /// The token after value `i` and all it contains.
    @inline(__always)
    package func next(after i: Int) -> Int {
        let t = tokens[i]
        return t.kind == .object || t.kind == .array ? t.end : i + 1
    }

    /// The members of object `i`: (key token, value token) pairs in order.
    package func members(of i: Int) -> [(key: Int, value: Int)] {
        var out: [(Int, Int)] = []
        out.reserveCapacity(Int(tokens[i].count))
        var k = i + 1
        for _ in 0..<tokens[i].count {
            out.append((k, k + 1))
            k = next(after: k + 1)
        }
        return out
    }

    /// The elements of array `i`, in order.
    package func elements(of i: Int) -> [Int] {
        var out: [Int] = []
        out.reserveCapacity(Int(tokens[i].count))
        var k = i + 1
        for _ in 0..<tokens[i].count {
            out.append(k)
            k = next(after: k)
        }
        return out
    }

    /// True when string token `i` is exactly `key` (compared as bytes, escapes resolved).
    package func stringEquals(_ i: Int, _ key: [UInt8]) -> Bool {
        let t = tokens[i]
        guard t.kind == .string else { return false }
        if !t.escaped {
            guard t.end - t.start == key.count else { return false }
            return bytes.withUnsafeBufferPointer { p in
                key.withUnsafeBufferPointer { k in
                    for j in 0..<k.count where p[t.start + j] != k[j] { return false }
                    return true
                }
            }
        }
        return (try? string(i)).map { Array($0.utf8) == key } ?? false
    }

    /// String token `i` as text (escapes resolved; invalid UTF-8 or a lone surrogate is an error).
    package func string(_ i: Int) throws(SyntaxError) -> String {
        let t = tokens[i]
        guard t.kind == .string else { throw SyntaxError(offset: t.start, message: "not a string") }
        if !t.escaped {
            let s: String? = bytes.withUnsafeBufferPointer { p in
                String(validating: UnsafeBufferPointer(rebasing: p[t.start..<t.end]), as: UTF8.self)
            }
            guard let s else { throw SyntaxError(offset: t.start - 1, message: "a string that is not valid UTF-8") }
            return s
        }
        return try unescape(t)
    }

    private func unescape(_ t: Token) throws(SyntaxError) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(t.end - t.start)
        var i = t.start
        func hex4(_ at: Int) -> UInt32? {
            guard at + 4 <= t.end else { return nil }
            var v: UInt32 = 0
            for j in at..<(at + 4) {
                let b = bytes[j]
                let d: UInt8
                switch b {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): d = b - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): d = b - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): d = b - UInt8(ascii: "A") + 10
                default: return nil
                }
                v = v << 4 | UInt32(d)
            }
            return v
        }
        while i < t.end {
            let b = bytes[i]
            guard b == 0x5C else {
                out.append(b)
                i += 1
                continue
            }
            // The parser checked the escape's form; only \u's meaning is left to check here.
            let e = bytes[i + 1]
            i += 2
            switch e {
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "u"):
                guard var scalar = hex4(i) else { throw SyntaxError(offset: i - 2, message: "a `\\u` escape needs four hex digits") }
                i += 4
                if (0xD800...0xDBFF).contains(scalar) {
                    guard i + 6 <= t.end, bytes[i] == 0x5C, bytes[i + 1] == UInt8(ascii: "u"), let low = hex4(i + 2),
                          (0xDC00...0xDFFF).contains(low) else {
                        throw SyntaxError(offset: i - 6, message: "a `\\u` escape of a lone surrogate (\\u\(String(scalar, radix: 16)))")
                    }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw SyntaxError(offset: i - 6, message: "a `\\u` escape of a lone surrogate (\\u\(String(scalar, radix: 16)))")
                }
                guard let u = Unicode.Scalar(scalar) else { throw SyntaxError(offset: i - 6, message: "a `\\u` escape that is not a character") }
                out.append(contentsOf: UTF8.encode(u).map { Array($0) } ?? [])
            default: out.append(e)  // \" \\ \/
            }
        }
        guard let s = String(validating: out, as: UTF8.self) else {
            throw SyntaxError(offset: t.start - 1, message: "a string that is not valid UTF-8")
        }
        return s
    }

    /// The text of number token `i` (ASCII, checked against JSON's number grammar).
    package func numberText(_ i: Int) -> String {
        let t = tokens[i]
        return bytes.withUnsafeBufferPointer { p in String(decoding: UnsafeBufferPointer(rebasing: p[t.start..<t.end]), as: UTF8.self) }
    }

    /// A number read as an exact integer: `-12` (or `3.0`, `1e3`, whose value is a whole number, as
    /// Foundation's decoder reads them); nil when it is not one or does not fit in an Int64.
    package func int64(_ i: Int) -> Int64? {
        let t = tokens[i]
        guard t.kind == .number else { return nil }
        switch digits(t) {
        case .value(let v): return v
        case .outOfRange: return nil
        case .notDigits:
            // A fraction or an exponent: a whole number in range is accepted.
            guard let d = double(i), d == d.rounded(), d >= -9.223372036854775808e18, d < 9.223372036854775808e18 else { return nil }
            return Int64(d)
        }
    }

    private enum Digits { case value(Int64), outOfRange, notDigits }

    /// A number token written as digits only, read exactly (no fraction or exponent: `notDigits`).
    private func digits(_ t: Token) -> Digits {
        bytes.withUnsafeBufferPointer { p in
            var j = t.start
            let negative = p[j] == UInt8(ascii: "-")
            if negative { j += 1 }
            var magnitude: UInt64 = 0
            while j < t.end {
                let b = p[j]
                guard b >= 0x30, b <= 0x39 else { return .notDigits }
                let (m, o1) = magnitude.multipliedReportingOverflow(by: 10)
                let (a, o2) = m.addingReportingOverflow(UInt64(b - 0x30))
                if o1 || o2 { return .outOfRange }
                magnitude = a
                j += 1
            }
            if negative {
                guard magnitude <= UInt64(Int64.max) + 1 else { return .outOfRange }
                return .value(magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude))
            }
            guard magnitude <= UInt64(Int64.max) else { return .outOfRange }
            return .value(Int64(magnitude))
        }
    }

    /// True when number token `i` is written as digits only (no fraction, no exponent).
    package func isIntegerSyntax(_ i: Int) -> Bool {
        let t = tokens[i]
        guard t.kind == .number else { return false }
        return bytes.withUnsafeBufferPointer { p in
            for j in t.start..<t.end where p[j] == UInt8(ascii: ".") || p[j] == UInt8(ascii: "e") || p[j] == UInt8(ascii: "E") { return false }
            return true
        }
    }

    /// A number read as a Double; nil when it is out of range: beyond ±1.8e308, or so small that it
    /// reads as 0 while its digits are not all zero (`1e-400`).
    package func double(_ i: Int) -> Double? {
        let t = tokens[i]
        guard t.kind == .number else { return nil }
        // Short integers (most numbers in a record) without going through text: exact in a Double.
        if t.end - t.start <= 15, case .value(let n) = digits(t) { return Double(n) }
        guard let d = Double(numberText(i)), d.isFinite else { return nil }
        if d == 0 {
            // Zero written as zero (`0`, `-0.0`, `0e5`) is zero; anything else underflowed.
            let nonZero: Bool = bytes.withUnsafeBufferPointer { p in
                for j in t.start..<t.end {
                    let b = p[j]
                    if b == UInt8(ascii: "e") || b == UInt8(ascii: "E") { break }
                    if b >= UInt8(ascii: "1"), b <= UInt8(ascii: "9") { return true }
                }
                return false
            }
            if nonZero { return nil }
        }
        return d
    }

    // MARK: - Positions

    /// One step of a path into the document: an object's member by name, or an array's element.
    package enum PathComponent: Sendable, Equatable {
        case key(String)
        case index(Int)
    }

    /// The token a path leads to from token `start` (the root by default; member names compared as
    /// they are written, the last of a name written twice), or nil when it leads nowhere.
    package func locate(_ path: [PathComponent], from start: Int = 0) -> Int? {
        guard start >= 0, start < tokens.count else { return nil }
        var i = start
        for component in path {
            let t = tokens[i]
            switch (component, t.kind) {
            case (.key(let name), .object):
                let key = Array(name.utf8)
                guard let m = members(of: i).last(where: { stringEquals($0.key, key) }) else { return nil }
                i = m.value
            case (.index(let n), .array):
                guard n >= 0, n < Int(t.count) else { return nil }
                i = elements(of: i)[n]
            default:
                return nil
            }
        }
        return i
    }

    /// The byte offset where token `i` is written (a string's opening quote).
    package func offset(of i: Int) -> Int {
        let t = tokens[i]
        return t.kind == .string ? t.start - 1 : t.start
    }

    /// Line and column (1-based; columns count characters) of a byte offset in `bytes`.
    package static func position(of offset: Int, in bytes: some Collection<UInt8>) -> (line: Int, column: Int) {
        var line = 1, column = 1
        for b in bytes.prefix(max(0, offset)) where b & 0xC0 != 0x80 {
            if b == 0x0A { line += 1; column = 1 } else { column += 1 }
        }
        return (line, column)
    }

    // MARK: - The parser

    private struct Parser {
        /// Open containers: their token indices.
        var stack: [Int] = []

        mutating func parse(_ p: UnsafeBufferPointer<UInt8>, into tokens: inout [Token]) throws(SyntaxError) {
            var i = skipSpace(p, 0)
            guard i < p.count else { throw SyntaxError(offset: i, message: "no JSON value (the text is empty)") }
            i = try value(p, i, &tokens)
            // Values inside containers.
            while let top = stack.last {
                let isObject = tokens[top].kind == .object
                i = skipSpace(p, i)
                guard i < p.count else {
                    throw SyntaxError(offset: i, message: "the text ends inside \(isObject ? "an object" : "a list") (a `\(isObject ? "}" : "]")` is missing)")
                }
                let c = p[i]
                if c == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                    tokens[top].end = tokens.count
                    stack.removeLast()
                    i += 1
                    continue
                }
                guard c == UInt8(ascii: ",") else {
                    throw SyntaxError(offset: i, message: "expected `,` or `\(isObject ? "}" : "]")`, found \(Self.shown(p, i))")
                }
                i = skipSpace(p, i + 1)
                if i < p.count, p[i] == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                    throw SyntaxError(offset: i, message: "a comma before `\(isObject ? "}" : "]")` (JSON has no trailing commas)")
                }
                tokens[top].count += 1
                i = isObject ? try member(p, i, &tokens) : try value(p, i, &tokens)
            }
            i = skipSpace(p, i)
            guard i == p.count else { throw SyntaxError(offset: i, message: "more after the JSON value: \(Self.shown(p, i))") }
        }

        /// A key, `:` and the start of its value.
        mutating func member(_ p: UnsafeBufferPointer<UInt8>, _ start: Int, _ tokens: inout [Token]) throws(SyntaxError) -> Int {
            var i = start
            guard i < p.count, p[i] == UInt8(ascii: "\"") else {
                throw SyntaxError(offset: i, message: i < p.count ? "expected a member name in quotes, found \(Self.shown(p, i))" : "the text ends where a member name was expected")
            }
            i = try string(p, i, &tokens)
            i = skipSpace(p, i)
            guard i < p.count, p[i] == UInt8(ascii: ":") else {
                throw SyntaxError(offset: i, message: i < p.count ? "expected `:` after a member name, found \(Self.shown(p, i))" : "the text ends after a member name")
            }
            i = skipSpace(p, i + 1)
            return try value(p, i, &tokens)
        }

        /// One value, or the opening of a container (pushed on the stack; its first member or element
        /// read here too).
        mutating func value(_ p: UnsafeBufferPointer<UInt8>, _ start: Int, _ tokens: inout [Token]) throws(SyntaxError) -> Int {
            var i = start
            guard i < p.count else { throw SyntaxError(offset: i, message: "the text ends where a value was expected") }
            switch p[i] {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                let isObject = p[i] == UInt8(ascii: "{")
                guard stack.count < JSONTape.maximumDepth else {
                    throw SyntaxError(offset: i, message: "nested deeper than \(JSONTape.maximumDepth) levels")
                }
                let index = tokens.count
                tokens.append(Token(start: i, end: index + 1, count: 0, kind: isObject ? .object : .array, escaped: false))
                i = skipSpace(p, i + 1)
                if i < p.count, p[i] == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                    return i + 1  // empty: end already points after it
                }
                stack.append(index)
                tokens[index].count = 1
                return isObject ? try member(p, i, &tokens) : try value(p, i, &tokens)
            case UInt8(ascii: "\""):
                return try string(p, i, &tokens)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return try number(p, i, &tokens)
            case UInt8(ascii: "t"): return try literal(p, i, "true", .true, &tokens)
            case UInt8(ascii: "f"): return try literal(p, i, "false", .false, &tokens)
            case UInt8(ascii: "n"): return try literal(p, i, "null", .null, &tokens)
            default:
                i = start
                throw SyntaxError(offset: i, message: "expected a value, found \(Self.shown(p, i))")
            }
        }

        func literal(_ p: UnsafeBufferPointer<UInt8>, _ i: Int, _ word: StaticString, _ kind: Kind, _ tokens: inout [Token]) throws(SyntaxError) -> Int {
            let n = word.utf8CodeUnitCount
            guard i + n <= p.count else { throw SyntaxError(offset: i, message: "expected a value, found \(Self.shown(p, i))") }
            let w = word.utf8Start
            for j in 0..<n where p[i + j] != w[j] {
                throw SyntaxError(offset: i, message: "expected a value, found \(Self.shown(p, i))")
            }
            tokens.append(Token(start: i, end: i + n, count: 0, kind: kind, escaped: false))
            return i + n
        }

        func string(_ p: UnsafeBufferPointer<UInt8>, _ open: Int, _ tokens: inout [Token]) throws(SyntaxError) -> Int {
            var i = open + 1
            var escaped = false
            while i < p.count {
                let b = p[i]
                if b == UInt8(ascii: "\"") {
                    tokens.append(Token(start: open + 1, end: i, count: 0, kind: .string, escaped: escaped))
                    return i + 1
                }
                if b == 0x5C {
                    escaped = true
                    guard i + 1 < p.count else { break }
                    switch p[i + 1] {
                    case UInt8(ascii: "\""), 0x5C, UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"),
                         UInt8(ascii: "r"), UInt8(ascii: "t"):
                        i += 2
                    case UInt8(ascii: "u"):
                        guard i + 6 <= p.count, (2..<6).allSatisfy({ Self.isHex(p[i + $0]) }) else {
                            throw SyntaxError(offset: i, message: "a `\\u` escape needs four hex digits")
                        }
                        i += 6
                    default:
                        throw SyntaxError(offset: i, message: "`\\\(Self.printable(p[i + 1]))` is not a JSON escape")
                    }
                    continue
                }
                if b < 0x20 {
                    throw SyntaxError(offset: i, message: "a control character (0x\(String(b, radix: 16))) inside a string (it must be escaped)")
                }
                i += 1
            }
            throw SyntaxError(offset: open, message: "a string that never ends (its closing `\"` is missing)")
        }

        /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
        func number(_ p: UnsafeBufferPointer<UInt8>, _ start: Int, _ tokens: inout [Token]) throws(SyntaxError) -> Int {
            var i = start
            func digits() -> Int {
                let from = i
                while i < p.count, p[i] >= 0x30, p[i] <= 0x39 { i += 1 }
                return i - from
            }
            func bad() -> SyntaxError {
                var end = i
                while end < p.count, end - start < 40, !Self.isDelimiter(p[end]) { end += 1 }
                let text = String(decoding: UnsafeBufferPointer(rebasing: p[start..<end]), as: UTF8.self)
                return SyntaxError(offset: start, message: "`\(text)` is not a JSON number")
            }
            if p[i] == UInt8(ascii: "-") { i += 1 }
            let first = i
            let n = digits()
            guard n > 0 else { throw bad() }
            if n > 1, p[first] == UInt8(ascii: "0") { throw bad() }  // leading zero
            if i < p.count, p[i] == UInt8(ascii: ".") {
                i += 1
                guard digits() > 0 else { throw bad() }
            }
            if i < p.count, p[i] == UInt8(ascii: "e") || p[i] == UInt8(ascii: "E") {
                i += 1
                if i < p.count, p[i] == UInt8(ascii: "+") || p[i] == UInt8(ascii: "-") { i += 1 }
                guard digits() > 0 else { throw bad() }
            }
            if i < p.count, !Self.isDelimiter(p[i]) { throw bad() }
            tokens.append(Token(start: start, end: i, count: 0, kind: .number, escaped: false))
            return i
        }

        @inline(__always)
        func skipSpace(_ p: UnsafeBufferPointer<UInt8>, _ start: Int) -> Int {
            var i = start
            while i < p.count {
                let b = p[i]
                guard b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 else { break }
                i += 1
            }
            return i
        }

        static func isHex(_ b: UInt8) -> Bool {
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66)
        }

        static func isDelimiter(_ b: UInt8) -> Bool {
            b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 || b == UInt8(ascii: ",") || b == UInt8(ascii: "]") || b == UInt8(ascii: "}")
        }

        static func printable(_ b: UInt8) -> String {
            b >= 0x20 && b < 0x7F ? String(UnicodeScalar(b)) : "\\u{\(String(b, radix: 16))}"
        }

        /// What was found, for a message: a character in backticks, or the end of the text.
        static func shown(_ p: UnsafeBufferPointer<UInt8>, _ i: Int) -> String {
            i < p.count ? "`\(printable(p[i]))`" : "the end of the text"
        }
    }
}
