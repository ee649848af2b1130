import Foundation
import Synchronization

/// One parameter of a statement (`$1`, `$2`, ...), in PostgreSQL's text format, or NULL.
///
/// Values are only ever sent as parameters, never spliced into SQL. The SQL names each parameter's type
/// with a cast where the server cannot infer it (`$3::text[]`, `$5::timestamptz`).
public struct PostgresValue: Sendable, Hashable, CustomStringConvertible {
    /// The text format of the value; nil is NULL.
    public let text: String?

    private init(text: String?) { self.text = text }

    public static let null = PostgresValue(text: nil)

    public static func text(_ value: String) -> PostgresValue { PostgresValue(text: value) }
    public static func text(_ value: String?) -> PostgresValue { PostgresValue(text: value) }
    public static func int(_ value: Int) -> PostgresValue { PostgresValue(text: String(value)) }
    public static func int(_ value: Int?) -> PostgresValue { PostgresValue(text: value.map { String($0) }) }
    public static func bool(_ value: Bool) -> PostgresValue { PostgresValue(text: value ? "true" : "false") }

    /// A float8 (`NaN`, `Infinity` and `-Infinity` as PostgreSQL spells them).
    public static func double(_ value: Double) -> PostgresValue {
        if value.isNaN { return PostgresValue(text: "NaN") }
        if value.isInfinite { return PostgresValue(text: value > 0 ? "Infinity" : "-Infinity") }
        return PostgresValue(text: "\(value)")
    }
    public static func double(_ value: Double?) -> PostgresValue { value.map { double($0) } ?? .null }

    /// A timestamptz, in UTC with microseconds (`2026-11-30T21:29:54.123456Z`).
    public static func timestamp(_ value: Date) -> PostgresValue { PostgresValue(text: PostgresTimestamp.format(value)) }
    public static func timestamp(_ value: Date?) -> PostgresValue { value.map { timestamp($0) } ?? .null }

    /// A duration as whole milliseconds (an integer; the SQL turns it into an interval).
    public static func milliseconds(_ value: Duration) -> PostgresValue {
        let (seconds, attoseconds) = value.components
        return .int(Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000))
    }

    /// JSON text for a `json`/`jsonb` parameter (already encoded; not checked here, the server checks it).
    public static func json(_ text: String) -> PostgresValue { PostgresValue(text: text) }
    public static func json(_ data: Data) -> PostgresValue { PostgresValue(text: String(decoding: data, as: UTF8.self)) }

    /// An array literal (`{"a","b",NULL}`) of the elements' text forms: cast it in SQL to the element
    /// type's array (`$3::text[]`, `$4::integer[]`, `$9::jsonb[]`). Every element is quoted, so commas,
    /// braces, quotes and backslashes in values arrive intact.
    public static func array(_ elements: [PostgresValue]) -> PostgresValue {
        var out = "{"
        out.reserveCapacity(elements.count * 16)
        for (i, e) in elements.enumerated() {
            if i > 0 { out += "," }
            guard let t = e.text else {
                out += "NULL"
                continue
            }
            out += "\""
            for ch in t.unicodeScalars {
                if ch == "\"" || ch == "\\" { out += "\\" }
                out.unicodeScalars.append(ch)
            }
            out += "\""
        }
        out += "}"
        return PostgresValue(text: out)
    }

    /// A text[] of `values`.
    public static func textArray(_ values: [String]) -> PostgresValue { array(values.map { .text($0) }) }

    /// The reason this value cannot be sent, if any: PostgreSQL text cannot hold a NUL character.
    var problem: String? {
        guard let text, text.utf8.contains(0) else { return nil }
        return "contains a NUL character, which PostgreSQL text cannot hold"
    }

    public var description: String { text.map { "'\($0)'" } ?? "NULL" }
}

/// One statement to run: constant SQL with `$n` placeholders and its parameters.
///
/// The SQL is a `StaticString`: statements are written in the source, never assembled from values.
public struct PostgresStatement: Sendable {
    public let sql: String
    public let parameters: [PostgresValue]
    /// Set by `prepared()`: the name the statement is prepared under on each connection.
    public private(set) var preparedName: String?

    public init(_ sql: StaticString, _ parameters: [PostgresValue] = []) {
        self.sql = sql.description
        self.parameters = parameters
    }

    /// The statement prepared once per connection (parsed and planned once), then run by name: for
    /// statements a connection runs many times. One SQL text is one name in a process, whatever its
    /// parameters.
    public func prepared() -> PostgresStatement {
        var copy = self
        copy.preparedName = Self.names.withLock { names in
            if let name = names[sql] { return name }
            let name = "provision_\(names.count + 1)"
            names[sql] = name
            return name
        }
        return copy
    }

    /// The name of each prepared SQL text (numbered in order of first use: never two texts under one name).
    private static let names = Mutex<[String: String]>([:])

    /// Checks every parameter before anything is sent.
    func validate(operation: String) throws(PostgresError) {
        for (i, p) in parameters.enumerated() {
            if let problem = p.problem {
                throw PostgresError(.invalidParameter, operation: operation, message: "parameter $\(i + 1) \(problem)")
            }
        }
    }
}
