/// A condition in the workflow language: `when:` on a step, `provision report --where`.
///
/// ```
/// battery < 20
/// firmware >= 2.0.0 and not (outcome in [failed, interrupted])
/// captured.model == "SL-2" or serial == null
/// ```
///
/// Grammar (keywords are lower case; `not in` is one operator):
/// ```
/// expression := or
/// or         := and ("or" and)*
/// and        := not ("and" not)*
/// not        := "not" not | comparison
/// comparison := operand [ ("==" | "!=" | "<" | "<=" | ">" | ">=") operand
///                       | ["not"] "in" "[" [operand ("," operand)*] "]" ]
/// operand    := literal | name | "(" expression ")"
/// literal    := integer | real | version | string | "true" | "false" | "null"
/// ```
/// - integers: `20`, `-3`, `0x1F`; reals: `36.6`, `-0.5`, `1e-3`;
/// - versions are written bare: `2.0.0`, `1.9.0-rc1`, `v2.1` (two or more dots, a pre-release, or a
///   leading `v`); a number such as `2` or `2.0` compared with a version is read as a version;
/// - strings in double or single quotes with `\"`, `\'`, `\\`, `\n`, `\t` escapes; a string compared
///   with a version or bytes is read as one (`firmware >= "2.0"`, `config == "0102"`);
/// - names are letters, digits, `_`, `-` and `.`, starting with a letter or `_` (`captured.battery`);
///   a bare word that is not a name but one of a field's values (`outcome == failed`) is that value.
///
/// Parsing never traps: every problem is an `ExpressionError` with the 1-based column (in Unicode
/// scalars) where it is, so a workflow error can give file:line:column. Nesting deeper than
/// `maximumDepth` is an error rather than a stack overflow.
///
/// `check(fields:)` type-checks against declared fields and gives a `CheckedExpression`, which
/// evaluates over typed values (see there for missing values).
public struct Expression: Sendable, Equatable, CustomStringConvertible {
    /// A literal as written.
    public enum Literal: Sendable, Equatable {
        /// An integer; `text` as written (it may yet be read as a version).
        case integer(Int64, text: String)
        /// A real; `text` as written (`2.0` may yet be read as a version).
        case real(Double, text: String)
        case string(String)
        case version(SemanticVersion)
        case boolean(Bool)
        case null
    }

    /// The syntax tree. Columns are 1-based, in Unicode scalars of `source`.
    public indirect enum Node: Sendable, Equatable {
        case literal(Literal, column: Int)
        case name(String, column: Int)
        /// `column` is the operator's.
        case comparison(Node, ComparisonOperator, Node, column: Int)
        /// `x in [a, b]`; `column` is the `in`'s (or the `not` of `not in`).
        case membership(Node, [Node], negated: Bool, column: Int)
        case not(Node, column: Int)
        case and(Node, Node)
        case or(Node, Node)

        /// Where the node starts.
        public var column: Int {
            switch self {
            case .literal(_, let c), .name(_, let c), .not(_, let c): return c
            case .comparison(let l, _, _, _), .membership(let l, _, _, _), .and(let l, _), .or(let l, _): return l.column
            }
        }
    }

    /// Deeper nesting (parentheses, `not`) than this is refused.
    public static let maximumDepth = 64
    /// Longer expressions are refused: a condition is a line, not a document.
    public static let maximumLength = 4096

    /// The text as written.
    public let source: String
    public let root: Node

    /// Parses `source`.
    public init(parsing source: String) throws(ExpressionError) {
        self.source = source
        var parser = try ExpressionParser(source)
        root = try parser.parse()
    }

    /// Every name referenced, with its column, in order (bare words that may be field values included).
    public var names: [(name: String, column: Int)] {
        var out: [(String, Int)] = []
        func walk(_ n: Node) {
            switch n {
            case .literal: break
            case .name(let s, let c): out.append((s, c))
            case .comparison(let l, _, let r, _): walk(l); walk(r)
            case .membership(let l, let items, _, _): walk(l); items.forEach(walk)
            case .not(let x, _): walk(x)
            case .and(let l, let r), .or(let l, let r): walk(l); walk(r)
            }
        }
        walk(root)
        return out
    }

    public var description: String { source }
}

/// A problem in an expression: what, where (1-based column in the expression), and perhaps a hint.
public struct ExpressionError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public var column: Int
    public var hint: String?

    public init(_ message: String, column: Int, hint: String? = nil) {
        self.message = message
        self.column = column
        self.hint = hint
    }

    /// `column N: message` and the hint on its own line.
    public var description: String {
        var text = "column \(column): \(message)"
        if let hint { text += "\n    hint: \(hint)" }
        return text
    }
}

/// All the problems a type check found, in column order.
public struct ExpressionErrors: Error, Sendable, Equatable, CustomStringConvertible {
    public var errors: [ExpressionError]
    public var description: String { errors.map(\.description).joined(separator: "\n") }
}
