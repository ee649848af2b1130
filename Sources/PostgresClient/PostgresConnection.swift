import AsyncSupport
import Foundation
import Synchronization

/// One connection to PostgreSQL, driven non-blocking by its own I/O thread.
///
/// - Every operation has a deadline (`timeout`, else `defaultTimeout`) and honours task cancellation:
///   the caller is answered at once, the statement is cancelled on the server (PQcancel), and the
///   connection stays usable. A COMMIT cut short closes the connection instead (its outcome is unknown).
/// - Statements are constant SQL (`StaticString`) with parameters; values are never spliced into SQL.
/// - Several tasks may share a connection: requests are queued and sent one at a time. A transaction
///   (`transaction`) reserves the connection for its statements until it ends.
/// - `pipeline` sends several statements in one round trip; they run as one implicit transaction
///   (all or nothing).
/// - A broken connection fails every operation with `.connectionLost` (or `.closed`): make a new one.
///
/// Everything thrown is a `PostgresError`. The connection string's password never appears in errors.
public final class PostgresConnection: Sendable, CustomStringConvertible {
    /// The connection string, printable (secrets redacted).
    public let connectionString: ConnectionString
    /// The server process serving this connection (for `pg_cancel_backend`, `pg_stat_activity`).
    public let backendPID: Int32
    /// The deadline of operations that do not name one.
    public let defaultTimeout: Duration
    private let inbox: ConnectionInbox

    private init(connectionString: ConnectionString, backendPID: Int32, defaultTimeout: Duration, inbox: ConnectionInbox) {
        self.connectionString = connectionString
        self.backendPID = backendPID
        self.defaultTimeout = defaultTimeout
        self.inbox = inbox
    }

    deinit { inbox.post(.close) }

    public var description: String { "PostgreSQL connection \(connectionString) (backend \(backendPID))" }

    /// Connects within `timeout` and prepares the session (UTC, ISO dates, UTF-8).
    ///
    /// - Parameters:
    ///   - cancelGrace: how long a cancelled statement may take to end before the connection is closed.
    ///   - applicationName: shown in `pg_stat_activity` unless the connection string sets one.
    public static func connect(_ connectionString: ConnectionString, timeout: Duration = .seconds(10),
                               defaultTimeout: Duration = .seconds(10), cancelGrace: Duration = .seconds(5),
                               applicationName: String = "provision") async throws -> PostgresConnection {
        let inbox = try ConnectionInbox()
        let deadline = ContinuousClock.now + timeout
        // The connection's thread connects (within `timeout`), answers, then serves the connection.
        let started = WaiterQueue<Void, Result<Int32, PostgresError>>()
        let ticket = started.enqueue()
        let thread = Thread {
            let driver = ConnectionDriver(inbox: inbox, connectionString: connectionString, cancelGrace: cancelGrace)
            switch driver.connect(deadline: deadline, limit: timeout, applicationName: applicationName) {
            case .success(let pid):
                started.withLock { _, w in _ = w.resume(ticket, .success(pid)) }
                driver.run()
            case .failure(let error):
                driver.abandonConnect(error)
                started.withLock { _, w in _ = w.resume(ticket, .failure(error)) }
            }
        }
        thread.name = "postgres \(connectionString.option("host") ?? "local")"
        thread.start()
        // The thread always answers (a cancellation closes the attempt, which then fails).
        let outcome = await withTaskCancellationHandler {
            await started.wait(ticket, cancellation: .isIgnored)
        } onCancel: {
            inbox.post(.close)
        }
        guard case .granted(let result) = outcome else { throw CancellationError() }
        let pid = try result.get()
        let connection = PostgresConnection(connectionString: connectionString, backendPID: pid, defaultTimeout: defaultTimeout, inbox: inbox)
        // Text results this client can read whatever the server's or role's defaults are.
        _ = try await connection.query("SELECT set_config('TimeZone', 'UTC', false), set_config('DateStyle', 'ISO, MDY', false)",
                                       label: "prepare session")
        return connection
    }

    /// Connects with a connection string given as text (parsed, then redacted in every message).
    public static func connect(_ connectionString: String, timeout: Duration = .seconds(10),
                               defaultTimeout: Duration = .seconds(10)) async throws -> PostgresConnection {
        try await connect(ConnectionString(connectionString), timeout: timeout, defaultTimeout: defaultTimeout)
    }

    /// Runs one statement and returns its rows.
    @discardableResult
    public func query(_ sql: StaticString, _ parameters: [PostgresValue] = [], timeout: Duration? = nil,
                      label: String? = nil) async throws -> PostgresRows {
        let statement = PostgresStatement(sql, parameters)
        let rows = try await perform([statement], step: .none, timeout: timeout, label: label ?? Self.label(statement))
        guard let first = rows.first else { throw missingResult(label ?? Self.label(statement)) }
        return first
    }

    /// Runs statements in one round trip, as one implicit transaction: if one fails, none takes effect
    /// and the first error is thrown. Returns one result per statement.
    @discardableResult
    public func pipeline(_ statements: [PostgresStatement], timeout: Duration? = nil, label: String) async throws -> [PostgresRows] {
        guard !statements.isEmpty else { return [] }
        let rows = try await perform(statements, step: .none, timeout: timeout, label: label)
        guard rows.count == statements.count else { throw missingResult(label) }
        return rows
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws (or its task
    /// is cancelled). BEGIN travels with the first statement, COMMIT is one more round trip. Other tasks'
    /// requests on this connection wait until the transaction ends. Use the transaction from one task.
    ///
    /// A COMMIT of a transaction in which a statement failed is a ROLLBACK on the server; it is thrown
    /// as an error here, never reported as success.
    public func transaction<T: Sendable>(label: String = "transaction", timeout: Duration? = nil,
                                         _ body: (PostgresTransaction) async throws -> T) async throws -> T {
        let tx = PostgresTransaction(connection: self, token: inbox.nextID(), label: label, timeout: timeout)
        let value: T
        do {
            value = try await body(tx)
        } catch {
            if tx.hasBegun { await tx.rollback() }
            throw error
        }
        if tx.hasBegun { try await tx.commit() }
        return value
    }

    /// Closes the connection; operations in flight or queued fail with `.closed`. Idempotent.
    public func close() { inbox.post(.close) }

    /// True once the connection is closed or broken (every operation would fail).
    public var isClosed: Bool { inbox.finishedError != nil }

    /// Requests put on the wire so far: one request is one round trip (a pipeline is one).
    public var requestsSent: Int { inbox.requestsSent.load(ordering: .relaxed) }

    // MARK: Requests

    func perform(_ statements: [PostgresStatement], step: RequestScheduler.TransactionStep, timeout: Duration?,
                 label: String, cancellable: Bool = true) async throws -> [PostgresRows] {
        for s in statements { try s.validate(operation: label) }
        let limit = timeout ?? defaultTimeout
        let id = inbox.nextID()
        let request = RequestScheduler.Request(id: id, label: label, deadline: .now + limit, limit: limit, transaction: step)
        let inbox = self.inbox
        let ticket = inbox.replies.enqueue()
        inbox.post(.submit(.init(request: request, statements: statements, reply: ticket)))
        // The I/O thread answers every request, a cancelled one too (once the server has given it up):
        // the wait itself ignores cancellation, which goes to the thread instead.
        let outcome: WaitOutcome<Result<[PostgresRows], any Error>>
        if cancellable {
            outcome = await withTaskCancellationHandler {
                await inbox.replies.wait(ticket, cancellation: .isIgnored)
            } onCancel: {
                inbox.post(.cancel(id))
            }
        } else {
            outcome = await inbox.replies.wait(ticket, cancellation: .isIgnored)
        }
        guard case .granted(let result) = outcome else { throw CancellationError() }
        return try result.get()
    }

    private func missingResult(_ label: String) -> PostgresError {
        PostgresError(.protocolViolation, operation: label, message: "the server sent fewer results than statements")
    }

    /// A statement's default label: its first words.
    static func label(_ statement: PostgresStatement) -> String {
        let words = statement.sql.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }).prefix(4)
        return "statement \"\(words.joined(separator: " "))…\""
    }
}

/// The statements of one transaction (see `PostgresConnection.transaction`).
public final class PostgresTransaction: Sendable {
    private let connection: PostgresConnection
    private let token: UInt64
    private let label: String
    private let timeout: Duration?
    private struct State {
        var begun = false
        /// The first failure of a statement: the transaction is over (the server aborted it, or it
        /// never began); later statements are refused instead of running outside it.
        var failure: PostgresError?
    }
    private let state = Mutex(State())

    init(connection: PostgresConnection, token: UInt64, label: String, timeout: Duration?) {
        self.connection = connection
        self.token = token
        self.label = label
        self.timeout = timeout
    }

    var hasBegun: Bool { state.withLock { $0.begun } }

    /// Runs one statement in the transaction.
    @discardableResult
    public func query(_ sql: StaticString, _ parameters: [PostgresValue] = [], timeout: Duration? = nil,
                      label: String? = nil) async throws -> PostgresRows {
        let statement = PostgresStatement(sql, parameters)
        let rows = try await pipeline([statement], timeout: timeout, label: label ?? PostgresConnection.label(statement))
        guard let first = rows.first else {
            throw PostgresError(.protocolViolation, operation: self.label, message: "no result")
        }
        return first
    }

    /// Runs statements in the transaction in one round trip.
    @discardableResult
    public func pipeline(_ statements: [PostgresStatement], timeout: Duration? = nil, label: String) async throws -> [PostgresRows] {
        let (first, failure) = state.withLock { s -> (Bool, PostgresError?) in
            defer { s.begun = true }
            return (!s.begun, s.failure)
        }
        if let failure {
            throw PostgresError(failure.kind, operation: "\(self.label): \(label)",
                                message: "not run: the transaction failed earlier (\(failure.message))", sqlState: SQLState.inFailedTransaction)
        }
        let limit = timeout ?? self.timeout
        do {
            if first {
                let rows = try await connection.perform([PostgresStatement("BEGIN")] + statements, step: .begin(token),
                                                        timeout: limit, label: "\(self.label): \(label)")
                return Array(rows.dropFirst())
            }
            return try await connection.perform(statements, step: .within(token), timeout: limit, label: "\(self.label): \(label)")
        } catch let error as PostgresError {
            state.withLock { if $0.failure == nil { $0.failure = error } }
            throw error
        }
    }

    func commit() async throws {
        if let failure = state.withLock({ $0.failure }) {
            await rollback()
            throw PostgresError(.server, operation: "\(label): commit",
                                message: "rolled back: a statement of the transaction failed (\(failure.message))", sqlState: SQLState.inFailedTransaction)
        }
        let rows = try await connection.perform([PostgresStatement("COMMIT")], step: .end(token), timeout: timeout,
                                                label: "\(label): commit", cancellable: false)
        if rows.first?.commandTag == "ROLLBACK" {
            throw PostgresError(.server, operation: "\(label): commit",
                                message: "the transaction was rolled back because one of its statements failed", sqlState: SQLState.inFailedTransaction)
        }
    }

    /// Rolls back; never cancelled by the caller's task (the server must hear it). If it cannot be
    /// sent or answered, the connection is closed, which rolls back on the server.
    func rollback() async {
        _ = try? await connection.perform([PostgresStatement("ROLLBACK")], step: .end(token), timeout: timeout,
                                          label: "\(label): rollback", cancellable: false)
    }
}
