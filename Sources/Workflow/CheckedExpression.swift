import Support

/// The declared type of a name an expression may use: a workflow variable, a captured value, a report
/// field.
public struct FieldType: Sendable, Equatable {
    public var type: ValueType
    /// For text fields with a fixed set of values (a report's `outcome`): the values, which an
    /// expression may write bare (`outcome == failed`). Empty for free text.
    public var symbols: [String]

    public init(_ type: ValueType, symbols: [String] = []) {
        self.type = type
        self.symbols = symbols
    }

    /// A text field whose values are one of `symbols`.
    public static func enumeration(_ symbols: [String]) -> FieldType { FieldType(.text, symbols: symbols) }
}

extension Expression {
    /// Type-checks the expression against the declared `fields` and resolves its literals (a version
    /// written `2.0` beside a version field, a bare field value such as `failed`).
    ///
    /// Rules: comparisons follow `ValueType.comparisonError` (numbers with numbers, text with text,
    /// versions with versions, bytes and booleans with `==`/`!=` only; a number against text is an
    /// error, never silently false); `x == null` and `x != null` test whether a value is present;
    /// `and`, `or`, `not` take conditions (comparisons, `in`, boolean fields, `true`/`false`).
    /// Every problem is reported, each with its column and, for an unknown name, a "did you mean" hint.
    public func check(fields: [String: FieldType]) throws(ExpressionErrors) -> CheckedExpression {
        var checker = ExpressionChecker(fields: fields)
        let condition = checker.condition(root)
        guard checker.errors.isEmpty, let condition else {
            throw ExpressionErrors(errors: checker.errors.sorted { $0.column < $1.column })
        }
        return CheckedExpression(source: source, condition: condition, names: Set(names.map(\.name)).filter { fields[$0] != nil })
    }
}

/// A type-checked expression, ready to evaluate.
///
/// **Missing values.** A field with no value (a capture that did not happen: its step was skipped,
/// optional and failed, or the field is absent from an older report) makes any comparison or `in` on
/// it *unknown*, and `and`/`or`/`not` follow three-valued logic (`false and unknown` is false, `true or
/// unknown` is true, `not unknown` is unknown). `evaluate` returns nil for unknown. `x == null` is
/// true exactly when `x` has no value, so a condition can ask for it. Callers decide what unknown
/// means: a `when:` runs its step only on `true`; `report --where` selects only devices where the
/// condition is `true`. An absent field is never an error.
public struct CheckedExpression: Sendable, Equatable, CustomStringConvertible {
    /// An operand after checking: a literal with its type fixed, or a field.
    enum Operand: Sendable, Equatable {
        case value(TypedValue)
        case field(String)
    }

    /// A condition after checking.
    indirect enum Condition: Sendable, Equatable {
        case constant(Bool)
        case comparison(Operand, ComparisonOperator, Operand, column: Int)
        case isNull(Operand, negated: Bool)
        case membership(Operand, [TypedValue], negated: Bool, column: Int)
        case flag(Operand, column: Int)
        case not(Condition)
        case and(Condition, Condition)
        case or(Condition, Condition)
    }

    /// The expression as written.
    public let source: String
    let condition: Condition
    /// The declared fields the expression reads.
    public let names: Set<String>

    /// Evaluates over `lookup` (nil: the field has no value). Returns true, false, or nil for unknown
    /// (see above). Throws only when a value's type differs from the declared one, naming the column.
    public func evaluate(_ lookup: (String) -> TypedValue?) throws(ExpressionError) -> Bool? {
        try Self.evaluate(condition, lookup)
    }

    private static func evaluate(_ c: Condition, _ lookup: (String) -> TypedValue?) throws(ExpressionError) -> Bool? {
        switch c {
        case .constant(let b):
            return b
        case .comparison(let l, let op, let r, let column):
            guard let a = resolve(l, lookup), let b = resolve(r, lookup) else { return nil }
            do {
                return try TypedValue.compare(a, op, b)
            } catch {
                throw ExpressionError(error.message, column: column)
            }
        case .isNull(let x, let negated):
            return (resolve(x, lookup) == nil) != negated
        case .membership(let x, let items, let negated, let column):
            guard let a = resolve(x, lookup) else { return nil }
            do {
                for item in items where try TypedValue.compare(a, .equal, item) { return !negated }
            } catch {
                throw ExpressionError(error.message, column: column)
            }
            return negated
        case .flag(let x, let column):
            guard let a = resolve(x, lookup) else { return nil }
            guard case .boolean(let b) = a else {
                throw ExpressionError("\(a.quotedForMessage) is \(a.type.phrase), not a boolean", column: column)
            }
            return b
        case .not(let x):
            return try evaluate(x, lookup).map { !$0 }
        case .and(let l, let r):
            let a = try evaluate(l, lookup)
            if a == false { return false }
            let b = try evaluate(r, lookup)
            if b == false { return false }
            return a == nil || b == nil ? nil : true
        case .or(let l, let r):
            let a = try evaluate(l, lookup)
            if a == true { return true }
            let b = try evaluate(r, lookup)
            if b == true { return true }
            return a == nil || b == nil ? nil : false
        }
    }

    private static func resolve(_ o: Operand, _ lookup: (String) -> TypedValue?) -> TypedValue? {
        switch o {
        case .value(let v): return v
        case .field(let name): return lookup(name)
        }
    }

    public var description: String { source }
}

/// Walks a syntax tree, checking types and building the checked condition; collects every error.
private struct ExpressionChecker {
    let fields: [String: FieldType]
    var errors: [ExpressionError] = []

    init(fields: [String: FieldType]) {
        self.fields = fields
    }

    /// An operand as the checker sees it before the two sides of a comparison meet.
    private enum Side {
        case field(String, FieldType, column: Int)
        case literal(Expression.Literal, column: Int)
        case word(String, column: Int)
        case condition

        var column: Int? {
            switch self {
            case .field(_, _, let c), .literal(_, let c), .word(_, let c): return c
            case .condition: return nil
            }
        }
    }

    private func side(_ node: Expression.Node) -> Side {
        switch node {
        case .name(let n, let column):
            if let f = fields[n] { return .field(n, f, column: column) }
            return .word(n, column: column)
        case .literal(let l, let column):
            return .literal(l, column: column)
        default:
            return .condition
        }
    }

    // MARK: Conditions

    mutating func condition(_ node: Expression.Node) -> CheckedExpression.Condition? {
        switch node {
        case .and(let l, let r):
            let a = condition(l), b = condition(r)
            guard let a, let b else { return nil }
            return .and(a, b)
        case .or(let l, let r):
            let a = condition(l), b = condition(r)
            guard let a, let b else { return nil }
            return .or(a, b)
        case .not(let x, _):
            return condition(x).map { .not($0) }
        case .comparison(let l, let op, let r, let column):
            return comparison(l, op, r, column: column)
        case .membership(let x, let items, let negated, let column):
            return membership(x, items, negated: negated, column: column)
        case .name(let n, let column):
            guard let f = fields[n] else {
                unknown(n, column: column, symbols: [])
                return nil
            }
            guard f.type == .boolean else {
                error("`\(n)` is \(f.type.phrase), not a condition", column, hint: "compare it, for example `\(n) == …`")
                return nil
            }
            return .flag(.field(n), column: column)
        case .literal(.boolean(let b), _):
            return .constant(b)
        case .literal(let l, let column):
            error("\(Self.shown(l)) is not a condition", column, hint: "compare it with a field, for example `battery < 20`")
            return nil
        }
    }

    private mutating func comparison(_ l: Expression.Node, _ op: ComparisonOperator, _ r: Expression.Node, column: Int) -> CheckedExpression.Condition? {
        let a = side(l), b = side(r)
        if case .condition = a { return nested(l) }
        if case .condition = b { return nested(r) }

        // `x == null`, `x != null`.
        let aNull = if case .literal(.null, _) = a { true } else { false }
        let bNull = if case .literal(.null, _) = b { true } else { false }
        if aNull || bNull {
            guard op == .equal || op == .notEqual else {
                error("null can only be compared with == or !=", column, hint: "`x == null` is true when x has no value")
                return nil
            }
            if aNull && bNull { return .constant(op == .equal) }
            let other = aNull ? b : a
            guard let operand = nullOperand(other) else { return nil }
            if case .value = operand { return .constant(op == .notEqual) }
            return .isNull(operand, negated: op == .notEqual)
        }

        // An enumeration (outcome, error kind, a step's outcome) has no order: its symbols would compare
        // as text, alphabetically (`outcome < succeeded` would select the failed devices).
        if op.isOrdering {
            var ok = true
            for s in [a, b] {
                guard case .field(let n, let f, let at) = s, !f.symbols.isEmpty else { continue }
                error("`\(n)` is one of \(f.symbols.joined(separator: ", ")): it has no order, so it compares with == and != (or `in`), not \(op.rawValue)",
                      at, hint: "for example `\(n) in [\(f.symbols.prefix(2).joined(separator: ", "))]`")
                ok = false
            }
            guard ok else { return nil }
        }

        switch (a, b) {
        case (.field(let x, let fx, _), .field(let y, let fy, _)):
            if let message = ValueType.comparisonError(fx.type, op, fy.type) {
                error("\(message): `\(x)` is \(fx.type.phrase), `\(y)` is \(fy.type.phrase)", column)
                return nil
            }
            return .comparison(.field(x), op, .field(y), column: column)
        case (.field(let x, let f, _), _):
            guard let v = coerce(b, to: f, field: x) else { return nil }
            return typed(.field(x), f.type, op, .value(v), v.type, column: column)
        case (_, .field(let y, let f, _)):
            guard let v = coerce(a, to: f, field: y) else { return nil }
            return typed(.value(v), v.type, op, .field(y), f.type, column: column)
        default:
            // Two literals (or unknown words): each on its own terms; a version on one side makes the other a version.
            var ok = true
            if case .word(let w, let c) = a { unknown(w, column: c, symbols: []); ok = false }
            if case .word(let w, let c) = b { unknown(w, column: c, symbols: []); ok = false }
            guard ok, case .literal(let la, _) = a, case .literal(let lb, _) = b else { return nil }
            let va: TypedValue?, vb: TypedValue?
            if Self.isVersion(la) || Self.isVersion(lb) {
                va = coerce(a, to: FieldType(.version), field: nil)
                vb = coerce(b, to: FieldType(.version), field: nil)
            } else {
                va = Self.natural(la)
                vb = Self.natural(lb)
            }
            guard let va, let vb else { return nil }
            return typed(.value(va), va.type, op, .value(vb), vb.type, column: column)
        }
    }

    /// A condition where a value was expected (`(a < b) == c`): checked for its own errors, then refused.
    private mutating func nested(_ node: Expression.Node) -> CheckedExpression.Condition? {
        _ = condition(node)
        error("a condition cannot be compared", node.column, hint: "join conditions with `and` or `or`")
        return nil
    }

    private mutating func typed(_ a: CheckedExpression.Operand, _ ta: ValueType, _ op: ComparisonOperator,
                                _ b: CheckedExpression.Operand, _ tb: ValueType, column: Int) -> CheckedExpression.Condition? {
        if let message = ValueType.comparisonError(ta, op, tb) {
            error(message, column)
            return nil
        }
        return .comparison(a, op, b, column: column)
    }

    private mutating func nullOperand(_ side: Side) -> CheckedExpression.Operand? {
        switch side {
        case .field(let n, _, _): return .field(n)
        case .word(let w, let c):
            unknown(w, column: c, symbols: [])
            return nil
        case .literal(let l, _): return Self.natural(l).map { .value($0) }
        case .condition: return nil
        }
    }

    private mutating func membership(_ x: Expression.Node, _ items: [Expression.Node], negated: Bool, column: Int) -> CheckedExpression.Condition? {
        let s = side(x)
        let target: FieldType
        let operand: CheckedExpression.Operand
        switch s {
        case .field(let n, let f, _):
            target = f
            operand = .field(n)
        case .literal(let l, let c):
            guard let v = Self.natural(l) else {
                error("null cannot be tested with `in`", c, hint: "`x == null` is true when x has no value")
                return nil
            }
            target = FieldType(v.type)
            operand = .value(v)
        case .word(let w, let c):
            unknown(w, column: c, symbols: [])
            return nil
        case .condition:
            return nested(x)
        }
        let name: String? = if case .field(let n, _, _) = s { n } else { nil }
        var values: [TypedValue] = []
        var ok = true
        for item in items {
            let itemSide = side(item)
            switch itemSide {
            case .field(let n, _, let c):
                error("list items must be values, and `\(n)` is a field", c, hint: "compare fields with ==")
                ok = false
            case .condition:
                error("list items must be values", item.column)
                ok = false
            case .literal(.null, let c):
                error("null cannot be in a list", c, hint: "`x == null` is true when x has no value")
                ok = false
            default:
                if let v = coerce(itemSide, to: target, field: name) {
                    if let message = ValueType.comparisonError(target.type, .equal, v.type) {
                        error(message, item.column)
                        ok = false
                    } else {
                        values.append(v)
                    }
                } else {
                    ok = false
                }
            }
        }
        return ok ? .membership(operand, values, negated: negated, column: column) : nil
    }

    // MARK: Literals

    /// The literal (or bare word) `side` as a value of the field's type, or an error at its column.
    private mutating func coerce(_ side: Side, to field: FieldType, field name: String?) -> TypedValue? {
        let what = name.map { "`\($0)` (\(field.type.phrase))" } ?? field.type.phrase
        switch side {
        case .word(let w, let c):
            if field.symbols.contains(w) { return .text(w) }
            unknown(w, column: c, symbols: field.symbols, comparedWith: name, textField: field.type == .text)
            return nil
        case .literal(let l, let c):
            switch (field.type, l) {
            case (.version, .integer(_, let text)), (.version, .real(_, let text)), (.version, .string(let text)):
                do {
                    return .version(try SemanticVersion(parsing: text))
                } catch {
                    self.error(error.message, c)
                    return nil
                }
            case (.bytes, .string(let text)):
                do {
                    return try TypedValue(text: text, as: .bytes)
                } catch {
                    self.error("\(error.message), but \(what) holds bytes", c)
                    return nil
                }
            case (.text, .string(let s)):
                if !field.symbols.isEmpty, !field.symbols.contains(s), let name {
                    self.error("\"\(TypedValue.quoted(s))\" is not a value of `\(name)`", c,
                               hint: Suggestions.hint(for: s, in: field.symbols) ?? "its values: \(field.symbols.joined(separator: ", "))")
                    return nil
                }
                return .text(s)
            case (.text, .integer(_, let text)), (.text, .real(_, let text)):
                error("cannot compare \(what) with the number \(text)", c, hint: "write text in quotes: \"\(text)\"")
                return nil
            case (.integer, .string(let s)), (.real, .string(let s)):
                error("cannot compare \(what) with the text \"\(TypedValue.quoted(s))\"", c,
                      hint: "write a number without quotes" + (name.map { ", or read `\($0)` as a number" } ?? ""))
                return nil
            case (.version, .version(let v)):
                return .version(v)
            default:
                guard let v = Self.natural(l) else { return nil }
                if let message = ValueType.comparisonError(field.type, .equal, v.type) {
                    error("\(message): \(what) and \(Self.shown(l))", c)
                    return nil
                }
                return v
            }
        case .field, .condition:
            return nil
        }
    }

    /// A literal on its own terms: integers signed, reals, text, versions, booleans; nil for null.
    private static func natural(_ l: Expression.Literal) -> TypedValue? {
        switch l {
        case .integer(let n, _): return .integer(n, signed: true)
        case .real(let d, _): return .real(d)
        case .string(let s): return .text(s)
        case .version(let v): return .version(v)
        case .boolean(let b): return .boolean(b)
        case .null: return nil
        }
    }

    private static func isVersion(_ l: Expression.Literal) -> Bool {
        if case .version = l { return true }
        return false
    }

    private static func shown(_ l: Expression.Literal) -> String {
        switch l {
        case .integer(_, let t), .real(_, let t): return t
        case .string(let s): return "\"\(TypedValue.quoted(s))\""
        case .version(let v): return v.text
        case .boolean(let b): return b ? "true" : "false"
        case .null: return "null"
        }
    }

    // MARK: Errors

    private mutating func unknown(_ word: String, column: Int, symbols: [String], comparedWith field: String? = nil, textField: Bool = false) {
        let hint = Suggestions.hint(for: word, in: Array(fields.keys) + symbols)
        if let field, !symbols.isEmpty {
            error("`\(TypedValue.quoted(word))` is neither a known name nor a value of `\(field)`", column,
                  hint: hint ?? "its values: \(symbols.joined(separator: ", "))")
        } else if textField {
            error("unknown name `\(TypedValue.quoted(word))`", column, hint: hint ?? "to compare with the text, write it in quotes: \"\(TypedValue.quoted(word))\"")
        } else {
            error("unknown name `\(TypedValue.quoted(word))`", column, hint: hint)
        }
    }

    private mutating func error(_ message: String, _ column: Int, hint: String? = nil) {
        errors.append(ExpressionError(message, column: column, hint: hint))
    }
}
