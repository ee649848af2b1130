import Support

/// Typed reads of YAML nodes: the one reader behind every YAML file `provision` reads (workflows,
/// inventories, simulator models and their overrides). Each read returns the value or throws a
/// `YAMLError` at the node — what was expected, and a hint where one helps (a misspelt key gets "did you
/// mean"). The layers above decide what to do with an error: the workflow parser records it and reads
/// on (every problem of a file in one pass), the simulator stops at the first.
///
/// Scalars are read as written: `true`/`false` (any case of the first letter, or all caps) for booleans,
/// decimal or `0x` hex for integers, durations always with a unit (`DurationText`).
public struct YAMLReader: Sendable {
    public init() {}

    /// A short name of what a node holds, for messages: "a list", "a mapping", "the value `x`", "nothing".
    public func describe(_ node: YAMLNode) -> String {
        switch node.kind {
        case .scalar(let text, _):
            if node.isNull { return "nothing" }
            return "the value `\(text.count > 40 ? String(text.prefix(40)) + "…" : text)`"
        case .sequence: return "a list"
        case .mapping: return "a mapping"
        }
    }

    /// The pairs of a mapping.
    public func mapping(_ node: YAMLNode, _ what: String) throws(YAMLError) -> [YAMLNode.Pair] {
        if let pairs = node.mapping { return pairs }
        throw YAMLError("\(what) must be a mapping (`key: value`), not \(describe(node))", at: node.mark)
    }

    /// The pairs of a mapping whose keys are all in `allowed` (the first unknown key is the error).
    public func mapping(_ node: YAMLNode, _ what: String, allowed: [String]) throws(YAMLError) -> [(key: String, value: YAMLNode)] {
        let pairs = try mapping(node, what)
        if let first = unknownKeys(pairs, allowed: allowed, in: what).first { throw first }
        return pairs.map { (key: $0.key.scalar ?? "", value: $0.value) }
    }

    /// Every key of `pairs` that is not in `allowed`, each with a "did you mean" hint (or the keys
    /// `context` accepts).
    public func unknownKeys(_ pairs: [YAMLNode.Pair], allowed: [String], in context: String) -> [YAMLError] {
        pairs.compactMap { pair in
            let key = pair.key.scalar ?? ""
            guard !allowed.contains(key) else { return nil }
            let hint = Suggestions.hint(for: key, in: allowed)
                ?? "\(context) accepts: \(allowed.map { "`\($0)`" }.joined(separator: ", "))"
            return YAMLError("unknown key `\(key)` in \(context)", at: pair.key.mark, hint: hint)
        }
    }

    /// The items of a list.
    public func sequence(_ node: YAMLNode, _ what: String) throws(YAMLError) -> [YAMLNode] {
        if let items = node.sequence { return items }
        throw YAMLError("\(what) must be a list, not \(describe(node))", at: node.mark,
                        hint: node.scalar != nil ? "write a list as `[a, b]` or as lines starting with `- `" : nil)
    }

    /// A scalar's text (numbers and booleans are accepted as their text); not empty.
    public func string(_ node: YAMLNode, _ what: String) throws(YAMLError) -> String {
        if node.isNull { throw YAMLError("\(what) is empty", at: node.mark) }
        if let text = node.scalar { return text }
        throw YAMLError("\(what) must be a single value, not \(describe(node))", at: node.mark)
    }

    public func bool(_ node: YAMLNode, _ what: String) throws(YAMLError) -> Bool {
        let text = try string(node, what)
        switch text {
        case "true", "True", "TRUE": return true
        case "false", "False", "FALSE": return false
        default: throw YAMLError("\(what) must be `true` or `false`, not `\(text)`", at: node.mark)
        }
    }

    /// An integer written in decimal or as `0x` hex.
    public static func integer(_ text: String) -> Int64? {
        let t = text.trimmingSpaces
        if t.hasPrefix("0x") || t.hasPrefix("0X") { return Int64(t.dropFirst(2), radix: 16) }
        return Int64(t)
    }

    public func integer(_ node: YAMLNode, _ what: String, in range: ClosedRange<Int>) throws(YAMLError) -> Int {
        let text = try string(node, what)
        guard let value = Self.integer(text), let int = Int(exactly: value) else {
            throw YAMLError("\(what) must be a whole number, not `\(text)`", at: node.mark)
        }
        guard range.contains(int) else {
            throw YAMLError("\(what) must be between \(range.lowerBound) and \(range.upperBound), not \(int)", at: node.mark)
        }
        return int
    }

    /// A finite number (an integer, or a decimal fraction).
    public func number(_ node: YAMLNode, _ what: String) throws(YAMLError) -> Double {
        let text = try string(node, what)
        if let i = Self.integer(text) { return Double(i) }
        guard let d = Double(text), d.isFinite else { throw YAMLError("\(what) must be a number, not `\(text)`", at: node.mark) }
        return d
    }

    /// A duration with its unit (`250ms`, `10s`, `2m`), at most `max`.
    public func duration(_ node: YAMLNode, _ what: String, max: Duration) throws(YAMLError) -> Duration {
        let text = try string(node, what)
        switch DurationText.parse(text) {
        case .success(let d):
            if d > max { throw YAMLError("\(what) \(text) is longer than the limit of \(DurationText.format(max))", at: node.mark) }
            return d
        case .failure(.missingUnit):
            throw YAMLError("duration `\(text)` has no unit", at: node.mark, hint: "write a unit: `\(text)ms`, `\(text)s` or `\(text)m`")
        case .failure(.unknownUnit(let unit)):
            throw YAMLError("unknown duration unit `\(unit)` in `\(text)`", at: node.mark, hint: "use ms, s, m or h")
        case .failure(.negative):
            throw YAMLError("duration `\(text)` is negative", at: node.mark)
        case .failure(.malformed):
            throw YAMLError("`\(text)` is not a duration", at: node.mark, hint: "write a number and a unit, like `250ms`, `10s` or `2m`")
        }
    }

    /// A scalar parsed as a `Template`; its references' marks point into the file (past an opening quote).
    public func template(_ node: YAMLNode, _ what: String) throws(YAMLError) -> Template {
        guard let text = node.scalar, !(node.isNull && text.isEmpty) else {
            _ = try string(node, what)
            throw YAMLError("\(what) is empty", at: node.mark)
        }
        var start = node.mark
        if case .scalar(_, let style) = node.kind, style == .singleQuoted || style == .doubleQuoted {
            start.column += 1
        }
        do {
            return try Template(parsing: text, at: start)
        } catch {
            throw YAMLError(error.message, at: error.mark, hint: "write `$${` for a literal `${`")
        }
    }
}
