#if canImport(Glibc)
import Glibc
#endif
import CLibPQ
import Foundation

/// The I/O thread of one connection: owns the `PGconn`, drives it non-blocking in pipeline mode, and
/// carries out what `RequestScheduler` decides.
///
/// The thread blocks in poll(2) on the connection's socket and the inbox's eventfd, with a timeout that
/// is the scheduler's next deadline; it never spins. libpq is used only from this thread (a cancel
/// request runs on a short-lived helper thread with its own `PGcancel`, as libpq allows).
final class ConnectionDriver {
    private let inbox: ConnectionInbox
    private let connectionString: ConnectionString
    private var conn: OpaquePointer?
    private var scheduler: RequestScheduler
    private var submissions: [UInt64: ConnectionInbox.Submission] = [:]
    private var inFlight: InFlight?
    /// Results of the request whose Sync just came back, until the scheduler says whether to deliver them.
    private var completed: (id: UInt64, results: [Result<PostgresRows, PostgresError>])?
    private var needsFlush = false
    private var closing = false
    /// Statements prepared on this connection (`PostgresStatement.prepared()`), by name.
    private var prepared = Set<String>()

    /// Results being collected for the request on the wire.
    private struct InFlight {
        var id: UInt64
        var label: String
        /// What each result on the wire answers, in order: a statement, or the preparation of one
        /// (not one of the request's results: it only tells whether the statement is prepared now).
        var answers: [Answer] = []
        var results: [Result<PostgresRows, PostgresError>] = []
        /// The current statement's result, once one has arrived (libpq ends each with a NULL).
        var current: Result<PostgresRows, PostgresError>?
        /// A FATAL error from the server: the connection is about to close.
        var fatal: PostgresError?
        /// A preparation that failed: it is the result of the statement it was for (which the server
        /// skips), so the request keeps one result per statement.
        var failedPreparation: Result<PostgresRows, PostgresError>?

        enum Answer {
            case statement
            case prepare(String)
        }

        /// Files the current statement's result: the request's, or the preparation's.
        mutating func finishCurrent(prepared: inout Set<String>) {
            guard let current else { return }
            self.current = nil
            let answer = answers.isEmpty ? .statement : answers.removeFirst()
            switch answer {
            case .statement:
                results.append(failedPreparation ?? current)
                failedPreparation = nil
            case .prepare(let name):
                // A failed preparation fails the request (the statement after it is not run).
                switch current {
                case .success: prepared.insert(name)
                case .failure: failedPreparation = current
                }
            }
        }
    }

    init(inbox: ConnectionInbox, connectionString: ConnectionString, cancelGrace: Duration) {
        self.inbox = inbox
        self.connectionString = connectionString
        self.scheduler = RequestScheduler(cancelGrace: cancelGrace, connectionName: connectionString.description)
    }

    // MARK: Connecting

    /// Connects with PQconnectStartParams/PQconnectPoll, waiting for the socket with poll(2), until
    /// `deadline`. Returns the backend's process id.
    func connect(deadline: ContinuousClock.Instant, limit: Duration, applicationName: String) -> Result<Int32, PostgresError> {
        let operation = "connect to \(connectionString)"
        func failure(_ kind: PostgresError.Kind, _ message: String) -> Result<Int32, PostgresError> {
            .failure(PostgresError(kind, operation: operation, message: connectionString.scrub(message)))
        }
        let keywords = ["dbname", "fallback_application_name", "client_encoding"]
        let values = [connectionString.text, applicationName, "UTF8"]
        let started: OpaquePointer? = withCStrings(keywords) { k in
            withCStrings(values) { v in PQconnectStartParams(k, v, 1) }
        }
        guard let conn = started else { return failure(.connectFailed, "libpq could not allocate a connection") }
        self.conn = conn
        if PQstatus(conn) == CONNECTION_BAD { return failure(.connectFailed, Self.libpqMessage(conn)) }
        var status = PGRES_POLLING_WRITING
        while true {
            switch status {
            case PGRES_POLLING_OK:
                guard PQsetnonblocking(conn, 1) == 0 else { return failure(.connectFailed, "cannot make the connection non-blocking: \(Self.libpqMessage(conn))") }
                guard PQenterPipelineMode(conn) == 1 else { return failure(.connectFailed, "cannot enter pipeline mode: \(Self.libpqMessage(conn))") }
                // libpq prints notices (e.g. "relation already exists, skipping") to stderr by default.
                PQsetNoticeReceiver(conn, { _, _ in }, nil)
                return .success(PQbackendPID(conn))
            case PGRES_POLLING_FAILED:
                return failure(.connectFailed, Self.libpqMessage(conn))
            default:
                let events = status == PGRES_POLLING_READING ? Int16(POLLIN) : Int16(POLLOUT)
                let now = ContinuousClock.now
                if now >= deadline { return failure(.connectFailed, "no connection within \(limit)") }
                var fds = [pollfd(fd: PQsocket(conn), events: events, revents: 0),
                           pollfd(fd: inbox.wakeFD, events: Int16(POLLIN), revents: 0)]
                let n = poll(&fds, 2, Self.milliseconds(until: deadline, now: now))
                if n < 0 && errno != EINTR { return failure(.connectFailed, "poll failed: errno \(errno)") }
                if fds[1].revents != 0 {
                    inbox.drainWake()
                    for m in inbox.take() {
                        if case .close = m { return failure(.cancelled, "cancelled") }
                    }
                }
                if fds[0].revents != 0 { status = PQconnectPoll(conn) }
            }
        }
    }

    // MARK: Serving requests

    /// Serves requests until the connection closes, then fails whatever arrives later.
    func run() {
        while !closing {
            for message in inbox.take() { receive(message) }
            if closing { break }
            guard let conn else { break }
            let now = ContinuousClock.now
            let timeout = scheduler.nextDeadline.map { Self.milliseconds(until: $0, now: now) } ?? -1
            var events = Int16(POLLIN)
            if needsFlush { events |= Int16(POLLOUT) }
            var fds = [pollfd(fd: PQsocket(conn), events: events, revents: 0),
                       pollfd(fd: inbox.wakeFD, events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, 2, timeout)
            if n < 0 && errno != EINTR {
                fail(PostgresError(.connectionLost, operation: "use connection \(connectionString)", message: "poll failed: errno \(errno)"))
                break
            }
            if fds[1].revents != 0 { inbox.drainWake() }
            if fds[0].revents & Int16(POLLOUT) != 0, needsFlush { flush() }
            if fds[0].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0, !closing {
                readInput()
                // libpq: output blocked on TLS may need input first; try the flush again after reading.
                if needsFlush, !closing { flush() }
            }
            if !closing { perform(scheduler.handle(.timePassed, now: .now)) }
        }
        let error = Self.closedError(scheduler, connectionString)
        if let conn { PQfinish(conn) }
        conn = nil
        for (_, sub) in submissions {
            var e = error
            e.operation = sub.request.label
            inbox.answer(sub, .failure(e))
        }
        submissions = [:]
        inbox.finish(error)
    }

    /// Gives up the connection attempt (after a failed connect).
    func abandonConnect(_ error: PostgresError) {
        if let conn { PQfinish(conn) }
        conn = nil
        inbox.finish(error)
    }

    private func receive(_ message: ConnectionInbox.Message) {
        switch message {
        case .submit(let sub):
            submissions[sub.request.id] = sub
            perform(scheduler.handle(.submitted(sub.request), now: .now))
        case .cancel(let id):
            perform(scheduler.handle(.cancelled(id), now: .now))
        case .serverCancelFinished:
            perform(scheduler.handle(.serverCancelFinished, now: .now))
        case .close:
            perform(scheduler.handle(.closeRequested, now: .now))
        }
    }

    private func perform(_ actions: [RequestScheduler.Action]) {
        var work = actions[...]
        while let action = work.popFirst() {
            switch action {
            case .send(let id):
                if let event = send(id) { work.append(contentsOf: scheduler.handle(event, now: .now)) }
            case .deliver(let id):
                guard let sub = submissions.removeValue(forKey: id) else { break }
                let results = (completed?.id == id ? completed?.results : nil) ?? []
                completed = nil
                var rows: [PostgresRows] = []
                var firstError: PostgresError?
                for r in results {
                    switch r {
                    case .success(let value): rows.append(value)
                    case .failure(let error):
                        // The first real error, not the "not run" of the statements after it.
                        if firstError == nil || (firstError?.sqlState == nil && error.sqlState != nil) { firstError = error }
                    }
                }
                inbox.answer(sub, firstError.map { .failure($0) } ?? .success(rows))
            case .fail(let id, let error):
                if let sub = submissions.removeValue(forKey: id) { inbox.answer(sub, .failure(connectionString.scrubbed(error))) }
            case .requestServerCancel:
                requestServerCancel()
            case .close:
                closing = true
            }
        }
    }

    /// Puts a request's statements and a Sync on the wire. Returns an event when that failed.
    private func send(_ id: UInt64) -> RequestScheduler.Event? {
        guard let conn, let sub = submissions[id] else {
            return .connectionFailed(PostgresError(.protocolViolation, operation: "send", message: "request \(id) is unknown"))
        }
        var answers: [InFlight.Answer] = []
        for statement in sub.statements {
            let sent: Int32
            if let name = statement.preparedName {
                // Parsed and planned once per connection; the preparation travels in the same round trip.
                if !prepared.contains(name) {
                    guard PQsendPrepare(conn, name, statement.sql, Int32(statement.parameters.count), nil) == 1 else {
                        return .connectionFailed(lost(sub.request.label, Self.libpqMessage(conn)))
                    }
                    answers.append(.prepare(name))
                }
                sent = withCStrings(statement.parameters.map(\.text)) { values in
                    PQsendQueryPrepared(conn, name, Int32(statement.parameters.count), values, nil, nil, 0)
                }
            } else {
                sent = withCStrings(statement.parameters.map(\.text)) { values in
                    PQsendQueryParams(conn, statement.sql, Int32(statement.parameters.count), nil, values, nil, nil, 0)
                }
            }
            if sent != 1 { return .connectionFailed(lost(sub.request.label, Self.libpqMessage(conn))) }
            answers.append(.statement)
        }
        guard PQpipelineSync(conn) == 1 else { return .connectionFailed(lost(sub.request.label, Self.libpqMessage(conn))) }
        inbox.requestsSent.add(1, ordering: .relaxed)
        inFlight = InFlight(id: id, label: sub.request.label, answers: answers)
        flush()
        return nil
    }

    private func flush() {
        guard let conn else { return }
        switch PQflush(conn) {
        case 0: needsFlush = false
        case 1: needsFlush = true
        default:
            needsFlush = false
            perform(scheduler.handle(.connectionFailed(lost(inFlight?.label ?? "send", Self.libpqMessage(conn))), now: .now))
        }
    }

    /// Reads what the server sent and collects results for the request on the wire.
    private func readInput() {
        guard let conn else { return }
        if PQconsumeInput(conn) == 0 || PQstatus(conn) == CONNECTION_BAD {
            // Collect what arrived before the end (a FATAL message says why the server closed).
            collectResults(conn)
            connectionBroke(conn)
            return
        }
        collectResults(conn)
        if PQstatus(conn) == CONNECTION_BAD { connectionBroke(conn) }
    }

    private func connectionBroke(_ conn: OpaquePointer) {
        var error = inFlight?.fatal ?? lost(inFlight?.label ?? "use connection \(connectionString)", Self.libpqMessage(conn))
        error.kind = .connectionLost
        perform(scheduler.handle(.connectionFailed(error), now: .now))
    }

    private func collectResults(_ conn: OpaquePointer) {
        while inFlight != nil, PQisBusy(conn) == 0 {
            guard let result = PQgetResult(conn) else {
                // libpq ends each statement's results with a NULL.
                guard inFlight?.current != nil else { break }
                inFlight?.finishCurrent(prepared: &prepared)
                continue
            }
            defer { PQclear(result) }
            guard var flight = inFlight else { break }
            let status = PQresultStatus(result)
            switch status {
            case PGRES_PIPELINE_SYNC:
                flight.finishCurrent(prepared: &prepared)
                inFlight = nil
                completed = (flight.id, flight.results)
                perform(scheduler.handle(.resultsComplete(flight.id), now: .now))
                if completed?.id == flight.id { completed = nil }  // not delivered: a cancelled request drained
                continue
            case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
                flight.current = .success(Self.rows(result, operation: flight.label))
            case PGRES_PIPELINE_ABORTED:
                flight.current = .failure(PostgresError(.server, operation: flight.label,
                                                        message: "not run: an earlier statement of the same request failed"))
            case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR, PGRES_BAD_RESPONSE:
                let error = Self.serverError(result, operation: flight.label, connectionString: connectionString)
                if error.kind == .connectionLost || error.severity == "FATAL" || error.severity == "PANIC" { flight.fatal = error }
                if flight.current == nil || (try? flight.current?.get()) != nil { flight.current = .failure(error) }
            default:
                // COPY and other modes are never started by this client.
                flight.current = .failure(PostgresError(.protocolViolation, operation: flight.label,
                                                        message: "unexpected result status \(status.rawValue)"))
            }
            inFlight = flight
        }
    }

    /// Asks the server to cancel what runs now, on a helper thread (PQcancel blocks until the server has
    /// taken the request), then tells the scheduler.
    private func requestServerCancel() {
        guard let conn, let cancel = PQgetCancel(conn) else {
            perform(scheduler.handle(.serverCancelFinished, now: .now))
            return
        }
        let handle = CancelHandle(pointer: cancel)
        let inbox = self.inbox
        let thread = Thread {
            var buffer = [CChar](repeating: 0, count: 256)
            _ = PQcancel(handle.pointer, &buffer, Int32(buffer.count))
            PQfreeCancel(handle.pointer)
            inbox.post(.serverCancelFinished)
        }
        thread.name = "postgres-cancel"
        thread.start()
    }

    // MARK: libpq results and errors

    private static func rows(_ result: OpaquePointer, operation: String) -> PostgresRows {
        let fields = Int(PQnfields(result))
        let tuples = Int(PQntuples(result))
        var columns: [PostgresColumn] = []
        columns.reserveCapacity(fields)
        for f in 0..<fields {
            let name = PQfname(result, Int32(f)).map { String(cString: $0) } ?? "?column?"
            columns.append(PostgresColumn(name: name, type: PostgresType(rawValue: PQftype(result, Int32(f)))))
        }
        var values: [String?] = []
        values.reserveCapacity(fields * tuples)
        for t in 0..<tuples {
            for f in 0..<fields {
                if PQgetisnull(result, Int32(t), Int32(f)) == 1 {
                    values.append(nil)
                } else if let v = PQgetvalue(result, Int32(t), Int32(f)) {
                    values.append(String(cString: v))
                } else {
                    values.append(nil)
                }
            }
        }
        let affected = PQcmdTuples(result).flatMap { Int(String(cString: $0)) }
        let tag = PQcmdStatus(result).map { String(cString: $0) } ?? ""
        return PostgresRows(columns: columns, values: values, rowsAffected: affected, commandTag: tag, operation: operation)
    }

    private static func serverError(_ result: OpaquePointer, operation: String, connectionString: ConnectionString) -> PostgresError {
        func field(_ code: Int32) -> String? { PQresultErrorField(result, code).map { String(cString: $0) } }
        let sqlState = field(clibpq_diag_sqlstate())
        let severity = field(clibpq_diag_severity())
        let message = field(clibpq_diag_message())
            ?? PQresultErrorMessage(result).map { String(cString: $0).trimmingCharacters(in: .whitespacesAndNewlines) }
            ?? "unknown error"
        let lost = sqlState.map(SQLState.meansConnectionLoss) ?? false
        let error = PostgresError(lost ? .connectionLost : .server, operation: operation, message: message, sqlState: sqlState,
                                  severity: severity, detail: field(clibpq_diag_detail()), hint: field(clibpq_diag_hint()),
                                  constraint: field(clibpq_diag_constraint()))
        return connectionString.scrubbed(error)
    }

    private func lost(_ operation: String, _ message: String) -> PostgresError {
        PostgresError(.connectionLost, operation: operation, message: connectionString.scrub(message))
    }

    /// libpq's last error message for the connection, on one line.
    static func libpqMessage(_ conn: OpaquePointer) -> String {
        guard let m = PQerrorMessage(conn) else { return "unknown libpq error" }
        let text = String(cString: m).split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }.joined(separator: "; ")
        return text.isEmpty ? "unknown libpq error" : text
    }

    private static func closedError(_ scheduler: RequestScheduler, _ cs: ConnectionString) -> PostgresError {
        if case .closed(let e) = scheduler.phase { return e }
        return PostgresError(.closed, operation: "use connection \(cs)", message: "the connection was closed")
    }

    /// Milliseconds for poll(2) until `deadline`, rounded up so the deadline has passed on wake-up.
    static func milliseconds(until deadline: ContinuousClock.Instant, now: ContinuousClock.Instant) -> Int32 {
        guard deadline > now else { return 0 }
        let (s, atto) = (deadline - now).components
        let ms = s * 1000 + (atto + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: ms)
    }

    private func fail(_ error: PostgresError) {
        perform(scheduler.handle(.connectionFailed(error), now: .now))
    }
}

/// A `PGcancel` handed to the helper thread that sends the cancel request.
private struct CancelHandle: @unchecked Sendable {  // used by exactly one thread after the hand-over; libpq allows PQcancel from any thread
    let pointer: OpaquePointer
}

extension ConnectionString {
    func scrubbed(_ error: PostgresError) -> PostgresError {
        var e = error
        e.operation = scrub(e.operation)
        e.message = scrub(e.message)
        e.detail = e.detail.map(scrub)
        e.hint = e.hint.map(scrub)
        return e
    }
}

/// Calls `body` with a C array of C strings (NULL entries for nil) that stays valid for the call.
func withCStrings<R>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    // One buffer holding every string NUL-terminated; pointers into it.
    var buffer: [CChar] = []
    var offsets: [Int?] = []
    offsets.reserveCapacity(strings.count)
    for s in strings {
        guard let s else {
            offsets.append(nil)
            continue
        }
        offsets.append(buffer.count)
        buffer.append(contentsOf: s.utf8.map { CChar(bitPattern: $0) })
        buffer.append(0)
    }
    if buffer.isEmpty { buffer.append(0) }
    return buffer.withUnsafeBufferPointer { raw in
        let pointers = UnsafeMutablePointer<UnsafePointer<CChar>?>.allocate(capacity: offsets.count + 1)
        defer { pointers.deallocate() }
        for (i, o) in offsets.enumerated() {
            pointers[i] = o.flatMap { offset in raw.baseAddress.map { $0 + offset } }
        }
        pointers[offsets.count] = nil
        return body(pointers)
    }
}

func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    withCStrings(strings.map { Optional($0) }, body)
}
