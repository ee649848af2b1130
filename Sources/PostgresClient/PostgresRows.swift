import Foundation

/// A PostgreSQL type OID: an open set with names for the ones this client decodes.
public struct PostgresType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let bool = PostgresType(rawValue: 16)
    public static let bytea = PostgresType(rawValue: 17)
    public static let char = PostgresType(rawValue: 18)
    public static let name = PostgresType(rawValue: 19)
    public static let int8 = PostgresType(rawValue: 20)
    public static let int2 = PostgresType(rawValue: 21)
    public static let int4 = PostgresType(rawValue: 23)
    public static let text = PostgresType(rawValue: 25)
    public static let oid = PostgresType(rawValue: 26)
    public static let json = PostgresType(rawValue: 114)
    public static let float4 = PostgresType(rawValue: 700)
    public static let float8 = PostgresType(rawValue: 701)
    public static let unknown = PostgresType(rawValue: 705)
    public static let int4Array = PostgresType(rawValue: 1007)
    public static let textArray = PostgresType(rawValue: 1009)
    public static let bpchar = PostgresType(rawValue: 1042)
    public static let varchar = PostgresType(rawValue: 1043)
    public static let timestamp = PostgresType(rawValue: 1114)
    public static let timestamptz = PostgresType(rawValue: 1184)
    public static let interval = PostgresType(rawValue: 1186)
    public static let numeric = PostgresType(rawValue: 1700)
    public static let uuid = PostgresType(rawValue: 2950)
    public static let jsonb = PostgresType(rawValue: 3802)

    private static let names: [UInt32: String] = [
        16: "boolean", 17: "bytea", 18: "\"char\"", 19: "name", 20: "bigint", 21: "smallint", 23: "integer",
        25: "text", 26: "oid", 114: "json", 700: "real", 701: "double precision", 705: "unknown",
        1007: "integer[]", 1009: "text[]", 1042: "character", 1043: "character varying", 1114: "timestamp",
        1184: "timestamptz", 1186: "interval", 1700: "numeric", 2950: "uuid", 3802: "jsonb",
    ]

    public var description: String { Self.names[rawValue] ?? "type oid \(rawValue)" }
}

/// A Swift type a column can be decoded into: which PostgreSQL types it accepts and how it reads their
/// text form. `decode` returns nil for text it cannot read (the row turns that into an error naming the
/// column); it never traps.
public protocol PostgresDecodable: Sendable {
    static var postgresTypes: Set<PostgresType> { get }
    static func decode(postgresText text: String) -> Self?
}

extension String: PostgresDecodable {
    public static let postgresTypes: Set<PostgresType> = [.text, .varchar, .bpchar, .name, .char, .json, .jsonb, .uuid, .unknown]
    public static func decode(postgresText text: String) -> String? { text }
}

extension Int: PostgresDecodable {
    public static let postgresTypes: Set<PostgresType> = [.int2, .int4, .int8, .oid]
    public static func decode(postgresText text: String) -> Int? { Int(text) }
}

extension Bool: PostgresDecodable {
    public static let postgresTypes: Set<PostgresType> = [.bool]
    public static func decode(postgresText text: String) -> Bool? {
        switch text {
        case "t": return true
        case "f": return false
        default: return nil
        }
    }
}

extension Double: PostgresDecodable {
    public static let postgresTypes: Set<PostgresType> = [.float4, .float8, .numeric, .int2, .int4, .int8]
    public static func decode(postgresText text: String) -> Double? { Double(text) }
}

extension Date: PostgresDecodable {
    public static let postgresTypes: Set<PostgresType> = [.timestamptz, .timestamp]
    public static func decode(postgresText text: String) -> Date? { PostgresTimestamp.parse(text) }
}

/// A column of a result.
public struct PostgresColumn: Sendable, Equatable {
    public var name: String
    public var type: PostgresType
}

/// The rows a statement returned (empty for a command), in text format, copied out of libpq.
public struct PostgresRows: Sendable, RandomAccessCollection {
    public let columns: [PostgresColumn]
    /// Rows inserted, updated or deleted by a command (`PQcmdTuples`), when the server says.
    public let rowsAffected: Int?
    /// The command tag (`INSERT 0 3`, `UPDATE 2`, `COMMIT`, or `ROLLBACK` for a COMMIT of a failed transaction).
    public let commandTag: String
    /// Row-major values; nil is NULL.
    let values: [String?]
    /// What the statement was (for decoding errors).
    let operation: String
    private let index: [String: Int]

    init(columns: [PostgresColumn], values: [String?], rowsAffected: Int?, commandTag: String, operation: String) {
        self.columns = columns
        self.commandTag = commandTag
        self.values = values
        self.rowsAffected = rowsAffected
        self.operation = operation
        var index: [String: Int] = [:]
        for (i, c) in columns.enumerated() where index[c.name] == nil { index[c.name] = i }
        self.index = index
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { columns.isEmpty ? 0 : values.count / columns.count }
    public subscript(position: Int) -> PostgresRow { PostgresRow(rows: self, row: position) }

    func column(_ name: String) -> Int? { index[name] }
}

/// One row: typed access by column name. Every mismatch (no such column, another type, NULL where a
/// value is required, text the type cannot read) is a `PostgresError` of kind `.decoding` naming the column.
public struct PostgresRow: Sendable {
    let rows: PostgresRows
    let row: Int

    /// The value of `column`, which must not be NULL.
    public func decode<T: PostgresDecodable>(_ column: String, as type: T.Type = T.self) throws(PostgresError) -> T {
        guard let value = try decodeIfPresent(column, as: type) else {
            throw error(column, "is NULL, expected \(T.self)")
        }
        return value
    }

    /// The value of `column`, or nil when it is NULL.
    public func decodeIfPresent<T: PostgresDecodable>(_ column: String, as type: T.Type = T.self) throws(PostgresError) -> T? {
        guard let c = rows.column(column) else {
            let names = rows.columns.map(\.name).joined(separator: ", ")
            throw error(column, "is not in the result (columns: \(names))")
        }
        let declared = rows.columns[c].type
        guard T.postgresTypes.contains(declared) else {
            throw error(column, "has type \(declared), which cannot be read as \(T.self)")
        }
        guard let text = rows.values[row * rows.columns.count + c] else { return nil }
        guard let value = T.decode(postgresText: text) else {
            let shown = text.count > 40 ? String(text.prefix(40)) + "…" : text
            throw error(column, "holds \"\(shown)\", which is not a valid \(T.self)")
        }
        return value
    }

    /// A JSON column decoded with `JSONDecoder`.
    public func decodeJSON<T: Decodable>(_ column: String, as type: T.Type, decoder: JSONDecoder = JSONDecoder()) throws(PostgresError) -> T {
        let text: String = try decode(column)
        do {
            return try decoder.decode(T.self, from: Data(text.utf8))
        } catch {
            throw self.error(column, "does not decode as \(T.self): \(error)")
        }
    }

    /// True when `column` is NULL (the column must exist).
    public func isNull(_ column: String) throws(PostgresError) -> Bool {
        guard let c = rows.column(column) else { throw error(column, "is not in the result") }
        return rows.values[row * rows.columns.count + c] == nil
    }

    private func error(_ column: String, _ what: String) -> PostgresError {
        PostgresError(.decoding, operation: rows.operation, message: "row \(row + 1): column \"\(column)\" \(what)", column: column)
    }
}
