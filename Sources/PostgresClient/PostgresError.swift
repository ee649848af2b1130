import Foundation
/// Everything this client throws: what went wrong, during which operation, and the server's own words.
///
/// Server errors keep the SQLSTATE, severity, primary message, detail, hint and constraint as PostgreSQL
/// sent them. Connection strings never appear here with their password (see `ConnectionString`).
/// `isConnectionLoss` says whether the caller may keep its work locally and retry on a new connection.
public struct PostgresError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The class of failure.
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        /// The connection could not be made (refused, authentication, TLS, unknown database, ...).
        case connectFailed = "connect_failed"
        /// The connection broke: the server closed it, was restarted, or terminated the backend. A
        /// statement in flight may or may not have been committed if it was a COMMIT (or ran outside a
        /// transaction); anything not committed was rolled back by the server.
        case connectionLost = "connection_lost"
        /// The server refused a statement (`sqlState` says why); the connection is still usable.
        case server
        /// The operation's deadline passed; it was cancelled on the server.
        case timeout
        /// The calling task was cancelled; the operation was cancelled on the server.
        case cancelled
        /// A row did not have the expected column, type or value (`column` names it).
        case decoding
        /// A parameter cannot be sent (a NUL character in text, for example).
        case invalidParameter = "invalid_parameter"
        /// The connection string cannot be parsed.
        case invalidConnectionString = "invalid_connection_string"
        /// The connection was closed by this side before or during the operation.
        case closed
        /// libpq or the server did something this client does not expect.
        case protocolViolation = "protocol_violation"
    }

    public var kind: Kind
    /// What was being done, e.g. `connect to host=db port=5432 dbname=line user=station` or `claim devices`.
    public var operation: String
    /// The message: the server's primary message for server errors, else this client's or libpq's.
    public var message: String
    /// The five-character SQLSTATE, when the server sent one (`40001`, `23505`, `57014`, ...).
    public var sqlState: String?
    /// The server's severity, never translated (`ERROR`, `FATAL`, `PANIC`).
    public var severity: String?
    public var detail: String?
    public var hint: String?
    /// The violated constraint, when there is one.
    public var constraint: String?
    /// The column a decoding error is about.
    public var column: String?
    /// The deadline that passed, for `.timeout`.
    public var limit: Duration?

    public init(_ kind: Kind, operation: String, message: String, sqlState: String? = nil, severity: String? = nil,
                detail: String? = nil, hint: String? = nil, constraint: String? = nil, column: String? = nil,
                limit: Duration? = nil) {
        self.kind = kind
        self.operation = operation
        self.message = message
        self.sqlState = sqlState
        self.severity = severity
        self.detail = detail
        self.hint = hint
        self.constraint = constraint
        self.column = column
        self.limit = limit
    }

    /// True when the database could not be reached or the connection broke: the work can be kept and
    /// written later on a new connection.
    public var isConnectionLoss: Bool {
        kind == .connectFailed || kind == .connectionLost || kind == .closed
    }

    public var description: String {
        var text = "\(operation): \(message)"
        if let sqlState { text += " (SQLSTATE \(sqlState))" }
        if let detail, !detail.isEmpty { text += "; detail: \(detail)" }
        if let hint, !hint.isEmpty { text += "; hint: \(hint)" }
        return text
    }
}

/// Well-known SQLSTATE codes this client and its users act on.
public enum SQLState {
    public static let queryCanceled = "57014"
    public static let adminShutdown = "57P01"
    public static let crashShutdown = "57P02"
    public static let cannotConnectNow = "57P03"
    public static let uniqueViolation = "23505"
    public static let foreignKeyViolation = "23503"
    public static let checkViolation = "23514"
    public static let serializationFailure = "40001"
    public static let deadlockDetected = "40P01"
    public static let insufficientPrivilege = "42501"
    public static let undefinedTable = "42P01"
    public static let inFailedTransaction = "25P02"

    /// Class 08 (connection exception) and the shutdown codes of class 57: the connection is gone.
    public static func meansConnectionLoss(_ code: String) -> Bool {
        code.hasPrefix("08") || code == adminShutdown || code == crashShutdown || code == cannotConnectNow
    }
}
