import YAML

extension ValueSpec {
    /// A value given on the command line (`provision write … VALUE`), in the workflow's value syntax:
    ///
    /// - as a workflow writes it, in YAML flow style: `{ hex: "0102" }`, `{ utf8: hello }`,
    ///   `[{ hex: "03" }, { uint32le: 1500 }]`, `{ file: cert.bin }`;
    /// - or, for one part, `ENCODING:TEXT`: `hex:0102`, `utf8:hello world`, `uint16le:300`,
    ///   `file:cert.bin` (everything after the first colon is the text, as is).
    ///
    /// The same reader as a workflow's checks it (encodings, hex digits, integer ranges), so the errors
    /// are the workflow's, with the column in `text` (`path` names the argument in them).
    public static func parse(commandLine text: String, path: String = "VALUE") -> (spec: ValueSpec?, diagnostics: [Diagnostic]) {
        var reader = NodeReader(path: path)
        let node: YAMLNode
        let first = text.first { $0 != " " }
        if first == "{" || first == "[" {
            do {
                guard let parsed = try YAMLParser().parse(text) else {
                    return (nil, [Diagnostic(path: path, mark: SourceMark(line: 1, column: 1), message: "the value is empty")])
                }
                node = parsed
            } catch {
                return (nil, [Diagnostic(path: path, mark: error.mark, message: error.message, hint: error.hint)])
            }
        } else if let colon = text.firstIndex(of: ":"), !text[..<colon].isEmpty,
                  text[..<colon].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) {
            let key = String(text[..<colon])
            let value = String(text[text.index(after: colon)...])
            let start = SourceMark(line: 1, column: 1)
            node = YAMLNode(.mapping([YAMLNode.Pair(
                key: YAMLNode(.scalar(key, .plain), mark: start),
                value: YAMLNode(.scalar(value, .doubleQuoted), mark: SourceMark(line: 1, column: key.count + 2)))]), mark: start)
        } else {
            let looksHex = [UInt8](hex: text) != nil
            return (nil, [Diagnostic(
                path: path, mark: SourceMark(line: 1, column: 1), message: "the value must say how it is encoded",
                hint: looksHex ? "write `hex:\(text)` (or `utf8:\(text)` for text)" : "write `utf8:\(text)`, `hex:…`, `uint8:…` or `{ hex: \"…\" }`")])
        }
        guard let spec = reader.valueSpec(node, "the value"), !reader.sink.hasErrors else {
            return (nil, reader.sink.diagnostics)
        }
        return (spec, reader.sink.diagnostics)
    }
}
