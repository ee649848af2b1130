/// Decides what one connection does next: which queued request goes out, what a deadline or a
/// cancellation does to a request, when a cancelled statement has been drained, and when the connection
/// must be given up. Decisions only; the connection's I/O thread performs the actions over libpq.
///
/// Rules:
/// - One request on the wire at a time (a request is one or more statements ending in one Sync).
/// - A transaction reserves the connection: once a request that begins transaction T is sent, only
///   requests of T go out until the request that ends T has finished.
/// - A queued request whose deadline passes, or whose task is cancelled, is answered at once and never sent.
/// - A request on the wire whose deadline passes (or task is cancelled) is answered at once; the server is
///   asked to cancel it, and nothing else is sent until both its results and the cancel request are done
///   (so a late cancel cannot hit the next statement). If that takes longer than `cancelGrace`, the
///   connection is closed.
/// - A request that ends a transaction (COMMIT, ROLLBACK) is never cancelled half-way: if its deadline
///   passes or its task is cancelled, the caller is answered and the connection is closed (the server
///   rolls back whatever was not committed), because its outcome cannot be known.
/// - A broken connection fails every request, running or queued, and every later one.
struct RequestScheduler {
    /// How a request relates to a transaction.
    enum TransactionStep: Equatable, Sendable {
        case none
        /// Starts transaction `token` (its first statement is BEGIN).
        case begin(UInt64)
        case within(UInt64)
        /// Ends transaction `token` (COMMIT or ROLLBACK).
        case end(UInt64)

        var token: UInt64? {
            switch self {
            case .none: return nil
            case .begin(let t), .within(let t), .end(let t): return t
            }
        }
    }

    struct Request: Equatable, Sendable {
        var id: UInt64
        var label: String
        var deadline: ContinuousClock.Instant
        var limit: Duration
        var transaction: TransactionStep = .none
    }

    enum Event: Sendable {
        case submitted(Request)
        /// The caller's task was cancelled.
        case cancelled(UInt64)
        /// The Sync of the request on the wire came back: its results are complete.
        case resultsComplete(UInt64)
        /// The out-of-band cancel request (PQcancel) has been delivered or has failed.
        case serverCancelFinished
        /// Time passed (deadlines are compared with the `now` given to `handle`).
        case timePassed
        /// The connection broke (or could not be used); everything fails with this error.
        case connectionFailed(PostgresError)
        /// The owner closes the connection.
        case closeRequested
    }

    enum Action: Equatable, Sendable {
        /// Put the request's statements and a Sync on the wire.
        case send(UInt64)
        /// Answer the caller with the results collected for the request.
        case deliver(UInt64)
        /// Answer the caller with an error.
        case fail(UInt64, PostgresError)
        /// Ask the server to cancel the statement in progress (out of band: PQcancel).
        case requestServerCancel
        /// Close the connection; everything outstanding has been failed already.
        case close
    }

    enum Phase: Equatable {
        case idle
        case running(Request)
        /// `request`'s caller has been answered; waiting for its results and the cancel request.
        case draining(Request, resultsDone: Bool, cancelDone: Bool, giveUpAt: ContinuousClock.Instant)
        case closed(PostgresError)
    }

    private(set) var phase: Phase = .idle
    private(set) var queue: [Request] = []
    /// The transaction holding the connection, from the moment its first request is sent.
    private(set) var openTransaction: UInt64?
    /// Cancellations that arrived before their request (the caller's task was already cancelled).
    private var earlyCancels: Set<UInt64> = []
    let cancelGrace: Duration
    /// The connection's description, for the errors this machine makes.
    let connectionName: String

    init(cancelGrace: Duration = .seconds(5), connectionName: String) {
        self.cancelGrace = cancelGrace
        self.connectionName = connectionName
    }

    /// The earliest instant at which `timePassed` has something to do.
    var nextDeadline: ContinuousClock.Instant? {
        var best = queue.map(\.deadline).min()
        switch phase {
        case .running(let r): best = best.map { min($0, r.deadline) } ?? r.deadline
        case .draining(_, _, _, let giveUp): best = best.map { min($0, giveUp) } ?? giveUp
        case .idle, .closed: break
        }
        return best
    }

    var isClosed: Bool {
        if case .closed = phase { return true }
        return false
    }

    mutating func handle(_ event: Event, now: ContinuousClock.Instant) -> [Action] {
        switch event {
        case .submitted(let request):
            if case .closed(let error) = phase {
                return [.fail(request.id, Self.after(error, request))]
            }
            if earlyCancels.remove(request.id) != nil {
                return [.fail(request.id, cancelledError(request))]
            }
            queue.append(request)
            return next()

        case .cancelled(let id):
            if let i = queue.firstIndex(where: { $0.id == id }) {
                let r = queue.remove(at: i)
                return [.fail(id, cancelledError(r))]
            }
            if case .running(let r) = phase, r.id == id {
                return abandon(r, error: cancelledError(r), now: now)
            }
            if case .draining(let r, _, _, _) = phase, r.id == id { return [] }
            if case .closed = phase { return [] }
            earlyCancels.insert(id)
            return []

        case .resultsComplete(let id):
            switch phase {
            case .running(let r) where r.id == id:
                if case .end = r.transaction { openTransaction = nil }
                phase = .idle
                return [.deliver(id)] + next()
            case .draining(let r, _, let cancelDone, let giveUp) where r.id == id:
                if case .end = r.transaction { openTransaction = nil }
                if cancelDone {
                    phase = .idle
                    return next()
                }
                phase = .draining(r, resultsDone: true, cancelDone: false, giveUpAt: giveUp)
                return []
            default:
                return []
            }

        case .serverCancelFinished:
            guard case .draining(let r, let resultsDone, _, let giveUp) = phase else { return [] }
            if resultsDone {
                phase = .idle
                return next()
            }
            phase = .draining(r, resultsDone: false, cancelDone: true, giveUpAt: giveUp)
            return []

        case .timePassed:
            var actions: [Action] = []
            var kept: [Request] = []
            for r in queue {
                if r.deadline <= now { actions.append(.fail(r.id, timeoutError(r))) } else { kept.append(r) }
            }
            queue = kept
            switch phase {
            case .running(let r) where r.deadline <= now:
                actions += abandon(r, error: timeoutError(r), now: now)
            case .draining(let r, _, _, let giveUp) where giveUp <= now:
                let error = PostgresError(.connectionLost, operation: r.label,
                                          message: "the server did not finish a cancelled statement within \(cancelGrace); the connection \(connectionName) was closed")
                actions += shutDown(error)
            default:
                break
            }
            return actions

        case .connectionFailed(let error):
            if case .closed = phase { return [] }
            return shutDown(error)

        case .closeRequested:
            if case .closed = phase { return [] }
            return shutDown(PostgresError(.closed, operation: "use connection \(connectionName)", message: "the connection was closed"))
        }
    }

    // MARK: Helpers

    /// Sends the next eligible request, if the wire is free.
    private mutating func next() -> [Action] {
        guard case .idle = phase else { return [] }
        let eligible: Int?
        if let open = openTransaction {
            eligible = queue.firstIndex { $0.transaction.token == open }
        } else {
            eligible = queue.indices.first
        }
        guard let i = eligible else { return [] }
        let r = queue.remove(at: i)
        if case .begin(let t) = r.transaction { openTransaction = t }
        phase = .running(r)
        return [.send(r.id)]
    }

    /// The request on the wire stops mattering to its caller.
    private mutating func abandon(_ r: Request, error: PostgresError, now: ContinuousClock.Instant) -> [Action] {
        if case .end = r.transaction {
            let lost = PostgresError(.connectionLost, operation: "use connection \(connectionName)",
                                     message: "closed because \(r.label) was cut short (\(error.message)); whether it committed is unknown")
            phase = .idle  // answered here, not again by shutDown
            return [.fail(r.id, error)] + shutDown(lost)
        }
        phase = .draining(r, resultsDone: false, cancelDone: false, giveUpAt: now + cancelGrace)
        return [.fail(r.id, error), .requestServerCancel]
    }

    private mutating func shutDown(_ error: PostgresError) -> [Action] {
        var actions: [Action] = []
        switch phase {
        case .running(let r): actions.append(.fail(r.id, Self.after(error, r)))
        case .draining, .idle, .closed: break
        }
        for r in queue { actions.append(.fail(r.id, Self.after(error, r))) }
        queue = []
        openTransaction = nil
        earlyCancels = []
        phase = .closed(error)
        actions.append(.close)
        return actions
    }

    /// `error` as seen by request `r` (its own operation name).
    private static func after(_ error: PostgresError, _ r: Request) -> PostgresError {
        var e = error
        e.operation = r.label
        return e
    }

    private func timeoutError(_ r: Request) -> PostgresError {
        PostgresError(.timeout, operation: r.label, message: "no answer within \(r.limit) from \(connectionName)", limit: r.limit)
    }

    private func cancelledError(_ r: Request) -> PostgresError {
        PostgresError(.cancelled, operation: r.label, message: "cancelled")
    }
}
