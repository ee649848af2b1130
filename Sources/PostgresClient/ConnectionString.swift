import CLibPQ
import Foundation

/// A libpq connection string (`host=db port=5432 dbname=line user=station sslmode=verify-full` or
/// `postgresql://station@db/line?sslmode=verify-full`), checked by libpq's own parser and printed with
/// every secret replaced by `***`.
///
/// Everything libpq supports works as libpq documents it: TLS (`sslmode`, `sslrootcert`, `sslcert`,
/// `sslkey`), `passfile` / `PGPASSFILE`, the `PG*` environment variables, several hosts. The text is
/// kept only to hand it to libpq; `description` (what messages and logs show) is rebuilt from the parsed
/// options, so a password in it — or in a URI's user information — never appears.
public struct ConnectionString: Sendable, Equatable, CustomStringConvertible {
    /// The text as given (never printed).
    let text: String
    /// Options set explicitly, in libpq's order, with secrets (libpq's "*" display class) redacted.
    public let redactedOptions: [(key: String, value: String)]
    /// The secret values (to scrub from libpq's messages, which sometimes echo their input).
    let secrets: [String]

    /// Parses `text` with libpq (`PQconninfoParse`). A parse error never quotes the text back.
    public init(_ text: String) throws(PostgresError) {
        guard !text.utf8.contains(0) else {
            throw PostgresError(.invalidConnectionString, operation: "parse connection string",
                                message: "the connection string contains a NUL character")
        }
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(text, &errorMessage) else {
            var reason = "libpq cannot parse it"
            if let errorMessage {
                // libpq's message can quote part of the string (where a password may be): keep only its
                // first clause, and scrub anything that looks like a value.
                let full = String(cString: errorMessage)
                PQfreemem(errorMessage)
                if full.contains("out of memory") { reason = "libpq is out of memory" }
                else if full.contains("invalid connection option") { reason = "it names an option libpq does not know" }
                else if full.contains("URI") || full.contains("uri") { reason = "it is not a valid postgresql:// URI" }
                else if full.contains("missing \"=\"") { reason = "a keyword has no \"=\" after it" }
                else if full.contains("unterminated quoted string") { reason = "a quoted value is not terminated" }
            }
            throw PostgresError(.invalidConnectionString, operation: "parse connection string", message: reason)
        }
        defer { PQconninfoFree(options) }
        var parsed: [(key: String, value: String)] = []
        var secrets: [String] = []
        var cursor = options
        while let keyword = cursor.pointee.keyword {
            if let value = cursor.pointee.val {
                let key = String(cString: keyword)
                let secret = cursor.pointee.dispchar.map { String(cString: $0) == "*" } ?? false
                let v = String(cString: value)
                if secret {
                    if !v.isEmpty { secrets.append(v) }
                    parsed.append((key, "***"))
                } else {
                    parsed.append((key, v))
                }
            }
            cursor += 1
        }
        self.text = text
        self.redactedOptions = parsed
        self.secrets = secrets
    }

    /// The options as `key=value` pairs (values quoted when needed), secrets as `***`; `(libpq defaults)`
    /// when nothing is set explicitly.
    public var description: String {
        if redactedOptions.isEmpty { return "(libpq defaults)" }
        return redactedOptions.map { "\($0.key)=\(Self.quoted($0.value))" }.joined(separator: " ")
    }

    /// The value of an option given explicitly (secrets read as `***`).
    public func option(_ key: String) -> String? {
        redactedOptions.first { $0.key == key }?.value
    }

    public static func == (a: ConnectionString, b: ConnectionString) -> Bool { a.text == b.text }

    /// Replaces every secret of this string in `message` by `***`.
    func scrub(_ message: String) -> String {
        var m = message
        for s in secrets { m = m.replacingOccurrences(of: s, with: "***") }
        return m
    }

    private static func quoted(_ value: String) -> String {
        if !value.isEmpty, !value.contains(where: { $0 == " " || $0 == "'" || $0 == "\\" || $0 == "\t" }) { return value }
        return "'" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }
}
