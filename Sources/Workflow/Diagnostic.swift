import Foundation
import Support
import YAML

/// One problem found in a workflow, an inventory or a device selection, with where it is and how to fix it.
public struct Diagnostic: Error, Sendable, Equatable, CustomStringConvertible {
    /// How bad a problem is. Any `error` makes the input invalid.
    public enum Severity: String, Sendable, Equatable, Codable {
        case error, warning
    }

    /// The file the problem is in (as given on the command line), or empty for command-line input.
    public var path: String
    public var mark: SourceMark
    public var severity: Severity
    public var message: String
    public var hint: String?

    public init(path: String, mark: SourceMark, severity: Severity = .error, message: String, hint: String? = nil) {
        self.path = path
        self.mark = mark
        self.severity = severity
        self.message = message
        self.hint = hint
    }

    public var line: Int { mark.line }
    public var column: Int { mark.column }

    /// `path:line:column: error: message`, then `  hint: ...` on its own line when there is a hint.
    public var description: String {
        let location = path.isEmpty ? "" : "\(path):\(mark.line):\(mark.column): "
        var text = "\(location)\(severity.rawValue): \(message)"
        if let hint { text += "\n    hint: \(hint)" }
        return text
    }

    /// The diagnostics as a JSON document: `{"valid": Bool, "errors": N, "warnings": N, "diagnostics": [...]}`.
    public static func json(_ diagnostics: [Diagnostic], extra: [String: String] = [:]) -> String {
        var out = "{\n"
        for (key, value) in extra.sorted(by: { $0.key < $1.key }) {
            out += "  \(JSONString.quoted(key)): \(JSONString.quoted(value)),\n"
        }
        let errors = diagnostics.filter { $0.severity == .error }.count
        out += "  \"valid\": \(errors == 0),\n"
        out += "  \"errors\": \(errors),\n"
        out += "  \"warnings\": \(diagnostics.count - errors),\n"
        out += "  \"diagnostics\": ["
        for (i, d) in diagnostics.enumerated() {
            out += i == 0 ? "\n" : ",\n"
            out += "    {\"file\": \(JSONString.quoted(d.path)), \"line\": \(d.line), \"column\": \(d.column), "
            out += "\"severity\": \(JSONString.quoted(d.severity.rawValue)), \"message\": \(JSONString.quoted(d.message))"
            if let hint = d.hint { out += ", \"hint\": \(JSONString.quoted(hint))" }
            out += "}"
        }
        out += diagnostics.isEmpty ? "]\n}\n" : "\n  ]\n}\n"
        return out
    }
}

/// Collects diagnostics for one file while it is being read.
struct DiagnosticSink {
    let path: String
    var diagnostics: [Diagnostic] = []

    init(path: String) {
        self.path = path
    }

    mutating func error(_ message: String, at mark: SourceMark, hint: String? = nil) {
        diagnostics.append(Diagnostic(path: path, mark: mark, message: Self.bounded(message), hint: hint.map(Self.bounded)))
    }

    mutating func warning(_ message: String, at mark: SourceMark, hint: String? = nil) {
        diagnostics.append(Diagnostic(path: path, mark: mark, severity: .warning, message: Self.bounded(message), hint: hint.map(Self.bounded)))
    }

    /// Messages quote what the user wrote; a hostile file can make that megabytes long.
    static func bounded(_ text: String) -> String {
        guard text.utf8.count > 400 else { return text }
        return String(text.prefix(400)) + "…"
    }

    var hasErrors: Bool { diagnostics.contains { $0.severity == .error } }
}
