/// One token of an expression, with the column (1-based, Unicode scalars) where it starts.
struct ExpressionToken: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        case word(String)
        case literal(Expression.Literal)
        case comparison(ComparisonOperator)
        case openParen, closeParen, openBracket, closeBracket, comma
        case end
    }

    var kind: Kind
    var column: Int
    /// The source text of the token, for messages.
    var text: String
}

/// Splits an expression into tokens. Never traps: anything it cannot read is an `ExpressionError`.
struct ExpressionLexer {
    private let scalars: [Unicode.Scalar]
    private var i = 0

    init(_ source: String) {
        scalars = Array(source.unicodeScalars)
    }

    mutating func tokens() throws(ExpressionError) -> [ExpressionToken] {
        var out: [ExpressionToken] = []
        while true {
            let t = try next()
            out.append(t)
            if t.kind == .end { return out }
        }
    }

    private func peek(_ offset: Int = 0) -> Unicode.Scalar? {
        i + offset < scalars.count ? scalars[i + offset] : nil
    }

    private func text(_ from: Int, _ to: Int) -> String {
        String(String.UnicodeScalarView(scalars[from..<to]))
    }

    private mutating func next() throws(ExpressionError) -> ExpressionToken {
        while let c = peek(), c == " " || c == "\t" || c == "\n" || c == "\r" { i += 1 }
        let start = i
        let column = i + 1
        guard let c = peek() else { return ExpressionToken(kind: .end, column: column, text: "end of the expression") }
        func token(_ kind: ExpressionToken.Kind, length: Int) -> ExpressionToken {
            i += length
            return ExpressionToken(kind: kind, column: column, text: text(start, i))
        }
        switch c {
        case "(": return token(.openParen, length: 1)
        case ")": return token(.closeParen, length: 1)
        case "[": return token(.openBracket, length: 1)
        case "]": return token(.closeBracket, length: 1)
        case ",": return token(.comma, length: 1)
        case "=":
            if peek(1) == "=" { return token(.comparison(.equal), length: 2) }
            throw ExpressionError("`=` is not an operator", column: column, hint: "compare with `==`")
        case "!":
            if peek(1) == "=" { return token(.comparison(.notEqual), length: 2) }
            throw ExpressionError("`!` is not an operator", column: column, hint: "negate with `not`, compare with `!=`")
        case "<":
            if peek(1) == "=" { return token(.comparison(.lessOrEqual), length: 2) }
            return token(.comparison(.less), length: 1)
        case ">":
            if peek(1) == "=" { return token(.comparison(.greaterOrEqual), length: 2) }
            return token(.comparison(.greater), length: 1)
        case "&":
            throw ExpressionError("`&` is not an operator", column: column, hint: "join conditions with `and`")
        case "|":
            throw ExpressionError("`|` is not an operator", column: column, hint: "join conditions with `or`")
        case "\"", "'":
            return try string(quote: c)
        case "-":
            guard let d = peek(1), d.isDigit else {
                throw ExpressionError("unexpected `-`", column: column, hint: "a negative number is written `-3`; there is no arithmetic")
            }
            i += 1
            return try number(start: start)
        default:
            if c.isDigit { return try number(start: start) }
            if c.isWordStart { return word(start: start) }
            throw ExpressionError("unexpected character `\(c.escaped(asASCII: false))`", column: column)
        }
    }

    /// A word: a name, a keyword, or a version written with a leading `v` (`v2.1.0`).
    private mutating func word(start: Int) -> ExpressionToken {
        while let c = peek(), c.isWordContinuation { i += 1 }
        let w = text(start, i)
        if let first = w.unicodeScalars.first, first == "v" || first == "V",
           w.unicodeScalars.dropFirst().first?.isDigit == true, w.contains("."),
           let v = SemanticVersion(w) {
            return ExpressionToken(kind: .literal(.version(v)), column: start + 1, text: w)
        }
        return ExpressionToken(kind: .word(w), column: start + 1, text: w)
    }

    /// A number or a bare version. Everything up to the next operator, bracket, comma or space is one
    /// token, read as an integer, a real or a version (in that order).
    private mutating func number(start: Int) throws(ExpressionError) -> ExpressionToken {
        while let c = peek(), c.isWordContinuation || c == "+" { i += 1 }
        let t = text(start, i)
        let column = start + 1
        func token(_ literal: Expression.Literal) -> ExpressionToken {
            ExpressionToken(kind: .literal(literal), column: column, text: t)
        }
        let negative = t.hasPrefix("-")
        let digits = negative ? String(t.dropFirst()) : t
        if digits.hasPrefix("0x") || digits.hasPrefix("0X") {
            let hex = digits.dropFirst(2)
            guard !hex.isEmpty, hex.unicodeScalars.allSatisfy(\.isHexDigit), let n = UInt64(hex, radix: 16),
                  negative ? n <= UInt64(Int64.max) + 1 : n <= UInt64(Int64.max)
            else { throw ExpressionError("`\(Self.bounded(t))` is not an integer", column: column) }
            return token(.integer(negative ? Int64(truncatingIfNeeded: 0 &- n) : Int64(n), text: t))
        }
        if digits.unicodeScalars.allSatisfy(\.isDigit) {
            guard let n = Int64(t) else {
                throw ExpressionError("`\(Self.bounded(t))` is too large for an integer (\(Int64.min)...\(Int64.max))", column: column)
            }
            return token(.integer(n, text: t))
        }
        if Self.isDecimal(digits) {
            guard let d = Double(t), d.isFinite else {
                throw ExpressionError("`\(Self.bounded(t))` is too large for a number (at most about 1.8e308)", column: column)
            }
            // A number too small for a double reads as 0 (or loses its digits): `battery < 1e-400` would
            // silently be `battery < 0`. Zero is written as zero.
            if d == 0 ? Self.hasNonZeroMantissa(digits) : !d.isNormal {
                throw ExpressionError("`\(Self.bounded(t))` is too small for a number (at least about 2.2e-308, or 0)", column: column)
            }
            return token(.real(d, text: t))
        }
        if !negative, let v = SemanticVersion(t) { return token(.version(v)) }
        throw ExpressionError("`\(Self.bounded(t))` is not a number or a version", column: column,
                              hint: negative ? nil : "a version is written like 2.4.1 or 1.9.0-rc1")
    }

    /// True when the digits before the exponent are not all zero (`0.0e5` is zero; `1e-400` is not).
    private static func hasNonZeroMantissa(_ text: String) -> Bool {
        for c in text.unicodeScalars {
            if c == "e" || c == "E" { return false }
            if c >= "1" && c <= "9" { return true }
        }
        return false
    }

    /// `12`, `1.5`, `1e3`, `1.5e-3`: digits, an optional fraction, an optional exponent.
    private static func isDecimal(_ text: String) -> Bool {
        var s = Substring(text).unicodeScalars
        func digits() -> Int {
            var n = 0
            while let c = s.first, c.isDigit { s = s.dropFirst(); n += 1 }
            return n
        }
        guard digits() > 0 else { return false }
        if s.first == "." {
            s = s.dropFirst()
            guard digits() > 0 else { return false }
        }
        if s.first == "e" || s.first == "E" {
            s = s.dropFirst()
            if s.first == "-" || s.first == "+" { s = s.dropFirst() }
            guard digits() > 0 else { return false }
        }
        return s.isEmpty
    }

    private mutating func string(quote: Unicode.Scalar) throws(ExpressionError) -> ExpressionToken {
        let start = i
        i += 1
        var value = String.UnicodeScalarView()
        while let c = peek() {
            if c == quote {
                i += 1
                return ExpressionToken(kind: .literal(.string(String(value))), column: start + 1, text: text(start, i))
            }
            if c == "\\" {
                guard let e = peek(1) else { break }
                switch e {
                case "\"", "'", "\\": value.append(e)
                case "n": value.append("\n")
                case "t": value.append("\t")
                default:
                    throw ExpressionError("unknown escape `\\\(e.escaped(asASCII: false))` in a string", column: i + 1,
                                          hint: "known escapes: \\\" \\' \\\\ \\n \\t")
                }
                i += 2
                continue
            }
            value.append(c)
            i += 1
        }
        throw ExpressionError("string not closed: the \(quote) here has no partner", column: start + 1)
    }

    static func bounded(_ text: String) -> String {
        TypedValue.quoted(text)
    }
}

extension Unicode.Scalar {
    fileprivate var isDigit: Bool { ("0"..."9").contains(self) }
    fileprivate var isHexDigit: Bool { isDigit || ("a"..."f").contains(self) || ("A"..."F").contains(self) }
    fileprivate var isWordStart: Bool { isASCIILetter || self == "_" }
    /// Name characters, as `Template.isValidName` allows them.
    fileprivate var isWordContinuation: Bool { isASCIILetter || isDigit || self == "_" || self == "-" || self == "." }
}

/// A recursive-descent parser over `ExpressionLexer`'s tokens (see `Expression` for the grammar).
struct ExpressionParser {
    private let tokens: [ExpressionToken]
    private var position = 0
    private var depth = 0

    init(_ source: String) throws(ExpressionError) {
        guard source.unicodeScalars.count <= Expression.maximumLength else {
            throw ExpressionError("the expression is longer than \(Expression.maximumLength) characters", column: 1)
        }
        var lexer = ExpressionLexer(source)
        tokens = try lexer.tokens()
    }

    mutating func parse() throws(ExpressionError) -> Expression.Node {
        if current.kind == .end { throw ExpressionError("the expression is empty", column: current.column) }
        let node = try parseOr()
        guard current.kind == .end else {
            let hint: String? = if case .comparison = current.kind { "comparisons cannot be chained: join them with `and`" } else { nil }
            throw ExpressionError("unexpected `\(ExpressionLexer.bounded(current.text))` after a complete condition", column: current.column,
                                  hint: hint ?? "join conditions with `and` or `or`")
        }
        return node
    }

    private var current: ExpressionToken { tokens[min(position, tokens.count - 1)] }

    private func isKeyword(_ word: String, at offset: Int = 0) -> Bool {
        let index = min(position + offset, tokens.count - 1)
        return tokens[index].kind == .word(word)
    }

    private mutating func advance() { position = min(position + 1, tokens.count - 1) }

    private mutating func deeper(at column: Int) throws(ExpressionError) {
        depth += 1
        if depth > Expression.maximumDepth {
            throw ExpressionError("the expression nests more than \(Expression.maximumDepth) levels deep", column: column)
        }
    }

    private mutating func parseOr() throws(ExpressionError) -> Expression.Node {
        var node = try parseAnd()
        while isKeyword("or") {
            advance()
            node = .or(node, try parseAnd())
        }
        return node
    }

    private mutating func parseAnd() throws(ExpressionError) -> Expression.Node {
        var node = try parseNot()
        while isKeyword("and") {
            advance()
            node = .and(node, try parseNot())
        }
        return node
    }

    private mutating func parseNot() throws(ExpressionError) -> Expression.Node {
        guard isKeyword("not") else { return try parseComparison() }
        let column = current.column
        advance()
        try deeper(at: column)
        defer { depth -= 1 }
        return .not(try parseNot(), column: column)
    }

    private mutating func parseComparison() throws(ExpressionError) -> Expression.Node {
        let left = try parseOperand()
        if case .comparison(let op) = current.kind {
            let column = current.column
            advance()
            let right = try parseOperand()
            return .comparison(left, op, right, column: column)
        }
        if isKeyword("in") || (isKeyword("not") && isKeyword("in", at: 1)) {
            let column = current.column
            let negated = isKeyword("not")
            advance()
            if negated { advance() }
            return .membership(left, try parseList(), negated: negated, column: column)
        }
        return left
    }

    private mutating func parseList() throws(ExpressionError) -> [Expression.Node] {
        guard current.kind == .openBracket else {
            throw ExpressionError("expected `[` after `in`, found `\(ExpressionLexer.bounded(current.text))`", column: current.column,
                                  hint: "a list is written [a, b, c]")
        }
        let open = current.column
        advance()
        var items: [Expression.Node] = []
        if current.kind == .closeBracket {
            advance()
            return items
        }
        while true {
            items.append(try parseOperand())
            switch current.kind {
            case .comma: advance()
            case .closeBracket:
                advance()
                return items
            case .end:
                throw ExpressionError("missing `]` to close the `[` at column \(open)", column: current.column)
            default:
                throw ExpressionError("expected `,` or `]` in the list, found `\(ExpressionLexer.bounded(current.text))`", column: current.column)
            }
        }
    }

    private static let keywords: Set<String> = ["and", "or", "not", "in"]

    private mutating func parseOperand() throws(ExpressionError) -> Expression.Node {
        let t = current
        switch t.kind {
        case .literal(let literal):
            advance()
            return .literal(literal, column: t.column)
        case .word("true"):
            advance()
            return .literal(.boolean(true), column: t.column)
        case .word("false"):
            advance()
            return .literal(.boolean(false), column: t.column)
        case .word("null"):
            advance()
            return .literal(.null, column: t.column)
        case .word(let w) where !Self.keywords.contains(w):
            advance()
            return .name(w, column: t.column)
        case .openParen:
            advance()
            try deeper(at: t.column)
            defer { depth -= 1 }
            let inner = try parseOr()
            guard current.kind == .closeParen else {
                if current.kind == .end {
                    throw ExpressionError("missing `)` to close the `(` at column \(t.column)", column: current.column)
                }
                throw ExpressionError("expected `)` to close the `(` at column \(t.column), found `\(ExpressionLexer.bounded(current.text))`",
                                      column: current.column)
            }
            advance()
            return inner
        case .end:
            throw ExpressionError("the expression ends where a value or a name was expected", column: t.column)
        default:
            throw ExpressionError("expected a value, a name or `(`, found `\(ExpressionLexer.bounded(t.text))`", column: t.column)
        }
    }
}

extension Unicode.Scalar {
    var isASCIILetter: Bool { ("a"..."z").contains(self) || ("A"..."Z").contains(self) }
}
