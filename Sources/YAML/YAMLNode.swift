/// A position in a source file: 1-based line and column. Columns count characters (Unicode scalars), as
/// libyaml does, so a mark stays right after a non-ASCII character.
public struct SourceMark: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var line: Int
    public var column: Int

    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    public static func < (a: SourceMark, b: SourceMark) -> Bool {
        (a.line, a.column) < (b.line, b.column)
    }

    public var description: String { "\(line):\(column)" }
}

/// One node of a YAML document, with the position where it starts.
///
/// Scalars keep their text and whether they were quoted, so the layer above decides what `yes`, `1` or
/// `~` mean for each field (a YAML 1.1 "yes" is never silently a boolean here).
public struct YAMLNode: Sendable, Equatable {
    /// How a scalar was written.
    public enum ScalarStyle: Sendable, Equatable {
        case plain, singleQuoted, doubleQuoted, literal, folded
    }

    /// One key and its value in a mapping, in document order.
    public struct Pair: Sendable, Equatable {
        public var key: YAMLNode
        public var value: YAMLNode
        public init(key: YAMLNode, value: YAMLNode) {
            self.key = key
            self.value = value
        }
    }

    /// What a node holds: a scalar with its style, a sequence, or a mapping.
    public enum Kind: Sendable, Equatable {
        case scalar(String, ScalarStyle)
        case sequence([YAMLNode])
        case mapping([Pair])
    }

    public var kind: Kind
    public var mark: SourceMark

    public init(_ kind: Kind, mark: SourceMark) {
        self.kind = kind
        self.mark = mark
    }

    /// The scalar's text, or nil for a sequence or mapping.
    public var scalar: String? {
        if case .scalar(let text, _) = kind { return text }
        return nil
    }

    /// True for an empty plain scalar, `~` or `null`.
    public var isNull: Bool {
        if case .scalar(let text, .plain) = kind {
            return text.isEmpty || text == "~" || text == "null" || text == "Null" || text == "NULL"
        }
        return false
    }

    public var sequence: [YAMLNode]? {
        if case .sequence(let items) = kind { return items }
        return nil
    }

    public var mapping: [Pair]? {
        if case .mapping(let pairs) = kind { return pairs }
        return nil
    }

    /// The value for a scalar key in a mapping (first match), or nil.
    public subscript(key: String) -> YAMLNode? {
        guard case .mapping(let pairs) = kind else { return nil }
        return pairs.first(where: { $0.key.scalar == key })?.value
    }

    /// A short name of the node's kind for diagnostics: "a string", "a list", "a mapping".
    public var kindDescription: String {
        switch kind {
        case .scalar: return isNull ? "nothing (null)" : "a scalar"
        case .sequence: return "a list"
        case .mapping: return "a mapping"
        }
    }
}
