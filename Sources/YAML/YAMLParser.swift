import CYAML

/// Reads a YAML file into a `YAMLNode` tree, keeping line and column for every node.
///
/// Hostile input is expected: the size and nesting are bounded, invalid UTF-8, tabs in indentation,
/// aliases, duplicate keys and several documents are refused with a position, and libyaml's own errors
/// become `YAMLError`s. Nothing here traps.
public struct YAMLParser: Sendable {
    /// Limits that keep a hostile file from exhausting memory or the stack.
    public struct Limits: Sendable {
        public var maxBytes: Int
        public var maxDepth: Int
        public var maxNodes: Int
        public init(maxBytes: Int = 10 * 1024 * 1024, maxDepth: Int = 64, maxNodes: Int = 2_000_000) {
            self.maxBytes = maxBytes
            self.maxDepth = maxDepth
            self.maxNodes = maxNodes
        }
    }

    public var limits: Limits

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Parses one document. An empty file (or one with only comments) gives nil.
    public func parse(_ bytes: [UInt8]) throws(YAMLError) -> YAMLNode? {
        if bytes.count > limits.maxBytes {
            throw YAMLError(
                "file is \(bytes.count) bytes; the limit is \(limits.maxBytes) bytes",
                at: SourceMark(line: 1, column: 1),
                hint: "a workflow or inventory this large is almost certainly not what you meant")
        }
        try Self.checkEncoding(bytes)
        try Self.checkTabs(bytes)
        return try bytes.withUnsafeBufferPointer { (buffer) throws(YAMLError) -> YAMLNode? in
            var builder = Builder(limits: limits)
            return try builder.run(buffer)
        }
    }

    /// Parses text (convenience for tests and inline documents).
    public func parse(_ text: String) throws(YAMLError) -> YAMLNode? {
        try parse(Array(text.utf8))
    }

    // MARK: - Pre-checks libyaml reports poorly

    /// Checks that `bytes` are UTF-8 text without NUL bytes (for other text formats, such as CSV).
    public static func validateEncoding(_ bytes: [UInt8]) throws(YAMLError) {
        try checkEncoding(bytes)
    }

    /// Finds the first invalid UTF-8 sequence (or a NUL byte) and reports its line and column.
    static func checkEncoding(_ bytes: [UInt8]) throws(YAMLError) {
        var line = 1
        var column = 1
        var i = 0
        let n = bytes.count
        if n >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { i = 3 }  // UTF-8 BOM
        while i < n {
            let b = bytes[i]
            var length = 0
            if b == 0 {
                throw YAMLError("NUL byte in text (is this a binary file?)", at: SourceMark(line: line, column: column))
            } else if b < 0x80 {
                length = 1
            } else if b & 0xE0 == 0xC0, b >= 0xC2 {
                length = 2
            } else if b & 0xF0 == 0xE0 {
                length = 3
            } else if b & 0xF8 == 0xF0, b <= 0xF4 {
                length = 4
            }
            var valid = length > 0 && i + length <= n
            if valid && length > 1 {
                for k in 1..<length where bytes[i + k] & 0xC0 != 0x80 { valid = false }
                if valid && length == 3 {
                    let b1 = bytes[i + 1]
                    if (b == 0xE0 && b1 < 0xA0) || (b == 0xED && b1 >= 0xA0) { valid = false }
                }
                if valid && length == 4 {
                    let b1 = bytes[i + 1]
                    if (b == 0xF0 && b1 < 0x90) || (b == 0xF4 && b1 >= 0x90) { valid = false }
                }
            }
            if !valid {
                throw YAMLError(
                    "invalid UTF-8 (byte 0x\(String(b, radix: 16, uppercase: true)))",
                    at: SourceMark(line: line, column: column),
                    hint: "save the file as UTF-8 text")
            }
            if b == 0x0A {
                line += 1
                column = 1
            } else {
                column += 1
            }
            i += length
        }
    }

    /// Tabs are not allowed in YAML indentation; libyaml's message for them is cryptic.
    static func checkTabs(_ bytes: [UInt8]) throws(YAMLError) {
        var line = 1
        var column = 1
        var atLineStart = true
        for b in bytes {
            if b == 0x0A {
                line += 1
                column = 1
                atLineStart = true
                continue
            }
            if atLineStart {
                if b == 0x09 {
                    throw YAMLError(
                        "tab character in indentation", at: SourceMark(line: line, column: column),
                        hint: "indent with spaces; YAML does not allow tabs for indentation")
                }
                if b != 0x20 { atLineStart = false }
            }
            column += 1
        }
    }
}

/// Drives libyaml's event parser and assembles nodes. Owns the C parser for one parse.
private struct Builder {
    let limits: YAMLParser.Limits
    var nodeCount = 0

    init(limits: YAMLParser.Limits) {
        self.limits = limits
    }

    /// A collection being built. A struct mutated in place on the stack, so appending never copies
    /// the items gathered so far (an enum payload would be copied on every append: quadratic).
    struct Frame {
        var isMapping: Bool
        var mark: SourceMark
        var items: [YAMLNode] = []
        var pairs: [YAMLNode.Pair] = []
        var pendingKey: YAMLNode?
        var keys: [String: SourceMark] = [:]
    }

    mutating func run(_ buffer: UnsafeBufferPointer<UInt8>) throws(YAMLError) -> YAMLNode? {
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        defer { parser.deallocate() }
        guard yaml_parser_initialize(parser) != 0 else {
            throw YAMLError("could not initialise the YAML parser (out of memory)", at: SourceMark(line: 1, column: 1))
        }
        defer { yaml_parser_delete(parser) }
        if let base = buffer.baseAddress {
            yaml_parser_set_input_string(parser, base, buffer.count)
        } else {
            var empty: UInt8 = 0
            yaml_parser_set_input_string(parser, &empty, 0)
        }
        yaml_parser_set_encoding(parser, YAML_UTF8_ENCODING)

        var stack: [Frame] = []
        var root: YAMLNode?
        var documents = 0
        let event = UnsafeMutablePointer<yaml_event_t>.allocate(capacity: 1)
        defer { event.deallocate() }

        while true {
            guard yaml_parser_parse(parser, event) != 0 else {
                throw Self.parserError(parser.pointee)
            }
            defer { yaml_event_delete(event) }
            let e = event.pointee
            let mark = SourceMark(line: Int(e.start_mark.line) + 1, column: Int(e.start_mark.column) + 1)
            switch e.type {
            case YAML_STREAM_END_EVENT:
                return root
            case YAML_DOCUMENT_START_EVENT:
                documents += 1
                if documents > 1 {
                    throw YAMLError(
                        "a second YAML document starts here", at: mark,
                        hint: "a workflow or inventory file holds exactly one document; remove the `---`")
                }
            case YAML_ALIAS_EVENT:
                throw YAMLError(
                    "aliases (*name) are not supported", at: mark,
                    hint: "write the value out, or use `defaults` for shared settings")
            case YAML_SCALAR_EVENT:
                let s = e.data.scalar
                if s.anchor != nil {
                    throw YAMLError("anchors (&name) are not supported", at: mark, hint: "remove the anchor")
                }
                let text = Self.string(s.value, count: s.length)
                let style: YAMLNode.ScalarStyle
                switch s.style {
                case YAML_SINGLE_QUOTED_SCALAR_STYLE: style = .singleQuoted
                case YAML_DOUBLE_QUOTED_SCALAR_STYLE: style = .doubleQuoted
                case YAML_LITERAL_SCALAR_STYLE: style = .literal
                case YAML_FOLDED_SCALAR_STYLE: style = .folded
                default: style = .plain
                }
                try Self.refuseTag(s.tag, at: mark)
                try add(YAMLNode(.scalar(text, style), mark: mark), to: &stack, root: &root)
            case YAML_SEQUENCE_START_EVENT:
                let s = e.data.sequence_start
                if s.anchor != nil {
                    throw YAMLError("anchors (&name) are not supported", at: mark, hint: "remove the anchor")
                }
                try Self.refuseTag(s.tag, at: mark)
                try push(Frame(isMapping: false, mark: mark), on: &stack, at: mark)
            case YAML_MAPPING_START_EVENT:
                let m = e.data.mapping_start
                if m.anchor != nil {
                    throw YAMLError("anchors (&name) are not supported", at: mark, hint: "remove the anchor")
                }
                try Self.refuseTag(m.tag, at: mark)
                try push(Frame(isMapping: true, mark: mark), on: &stack, at: mark)
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                guard let frame = stack.popLast() else {
                    throw YAMLError("unbalanced collection end", at: mark)
                }
                let node: YAMLNode
                if frame.isMapping {
                    node = YAMLNode(.mapping(frame.pairs), mark: frame.mark)
                } else {
                    node = YAMLNode(.sequence(frame.items), mark: frame.mark)
                }
                try add(node, to: &stack, root: &root)
            default:
                break
            }
        }
    }

    mutating func push(_ frame: Frame, on stack: inout [Frame], at mark: SourceMark) throws(YAMLError) {
        if stack.count >= limits.maxDepth {
            throw YAMLError("nesting deeper than \(limits.maxDepth) levels", at: mark, hint: "flatten the structure")
        }
        stack.append(frame)
    }

    mutating func add(_ node: YAMLNode, to stack: inout [Frame], root: inout YAMLNode?) throws(YAMLError) {
        nodeCount += 1
        if nodeCount > limits.maxNodes {
            throw YAMLError("more than \(limits.maxNodes) YAML nodes", at: node.mark)
        }
        let top = stack.count - 1
        guard top >= 0 else {
            root = node
            return
        }
        if !stack[top].isMapping {
            stack[top].items.append(node)
            return
        }
        if let key = stack[top].pendingKey {
            stack[top].pairs.append(YAMLNode.Pair(key: key, value: node))
            stack[top].pendingKey = nil
            return
        }
        guard let text = node.scalar else {
            throw YAMLError(
                "a mapping key must be a plain value, not \(node.kindDescription)", at: node.mark)
        }
        if let first = stack[top].keys[text] {
            throw YAMLError(
                "duplicate key `\(text)` (first defined at \(first))", at: node.mark,
                hint: "remove one of the two")
        }
        stack[top].keys[text] = node.mark
        stack[top].pendingKey = node
    }

    /// Explicit tags (`!!binary`, `!x`, `!<tag:...>`) are refused: every value is read as text and typed
    /// by where it stands, so a tag would be dropped silently or, worse, mean something to one reader only.
    static func refuseTag(_ tag: UnsafeMutablePointer<yaml_char_t>?, at mark: SourceMark) throws(YAMLError) {
        guard let tag else { return }
        let text = String(cString: tag)
        let shown = text.hasPrefix("tag:yaml.org,2002:") ? "!!" + text.dropFirst("tag:yaml.org,2002:".count) : text
        throw YAMLError(
            "YAML tags such as `\(shown)` are not supported", at: mark,
            hint: "remove the tag: values are read as text (write bytes as `{ hex: … }` or `{ base64: … }`)")
    }

    static func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?, count: Int) -> String {
        guard let pointer, count > 0 else { return "" }
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    static func parserError(_ p: yaml_parser_t) -> YAMLError {
        let problem = p.problem.map { String(cString: $0) } ?? "malformed YAML"
        let mark = SourceMark(line: Int(p.problem_mark.line) + 1, column: Int(p.problem_mark.column) + 1)
        var message = problem
        if let context = p.context.map({ String(cString: $0) }) {
            let start = SourceMark(line: Int(p.context_mark.line) + 1, column: Int(p.context_mark.column) + 1)
            message = start == mark ? "\(problem) \(context)" : "\(problem) \(context) (started at \(start))"
        }
        var hint: String?
        if problem.contains("mapping values are not allowed") {
            hint = "a value containing `: ` must be quoted, or a key is missing its indentation"
        } else if problem.contains("did not find expected key") {
            hint = "check the indentation of this line against the lines above"
        } else if problem.contains("did not find expected ',' or ']'") || problem.contains("did not find expected node content") {
            hint = "a `[` list or `{` mapping is not closed, or a `,` is missing"
        } else if problem.contains("did not find expected ',' or '}'") {
            hint = "a `{` mapping is not closed, or a `,` is missing"
        } else if problem.contains("found unexpected end of stream") || problem.contains("found unknown escape character") {
            hint = "check the quotes on this value (inside double quotes, write `\\\\` for a backslash or use single quotes)"
        } else if problem.contains("could not find expected ':'") {
            hint = "a key needs `: ` after it (or the line above is missing a quote)"
        } else if problem.contains("found character that cannot start any token") {
            hint = "quote the value (characters such as `@` and `` ` `` cannot start a plain value)"
        }
        return YAMLError(message, at: mark, hint: hint)
    }
}
