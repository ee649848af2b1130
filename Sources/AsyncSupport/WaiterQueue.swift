import Synchronization

/// How a wait in a `WaiterQueue` ended. Every waiter ends exactly once, in exactly one of these ways.
public enum WaitOutcome<Value: Sendable>: Sendable {
    /// The owner resumed the waiter with a value (a permit, a PDU, a result).
    case granted(Value)
    /// The waiting task was cancelled before the waiter was granted anything; it has left the queue.
    case cancelled
    /// The wait's time limit passed before the waiter was granted anything; it has left the queue.
    case timedOut
}

extension WaitOutcome: Equatable where Value: Equatable {}

/// One place in a `WaiterQueue`, handed out by `enqueue`. Tickets are unique within their queue and
/// increase in the order waiters joined it.
public struct WaitTicket: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Unique within the process (a token an owner may hand to a state machine as the waiter's name).
    public let id: UInt64

    /// The ticket with this id (the one a state machine's token names). A made-up id matches no waiter.
    public init(id: UInt64) { self.id = id }

    public static func < (a: WaitTicket, b: WaitTicket) -> Bool { a.id < b.id }
    public var description: String { "ticket \(id)" }
}

/// What the waiting task's cancellation does to its wait.
public enum WaitCancellation: Sendable, Equatable {
    /// The waiter leaves the queue at once and its wait ends `.cancelled` (unless it was granted first).
    case endsTheWait
    /// The wait goes on until it is granted or its time limit passes: for waits whose outcome the caller
    /// must learn (a durable write that is already under way).
    case isIgnored
}

/// Source of ticket ids: unique in the process, so that an owner may use them as tokens for a state
/// machine that also sees the tickets of its other queues.
private let ticketIDs = Atomic<UInt64>(0)

/// The waiting tasks of a `WaiterQueue`, oldest first, as the holder of the queue's lock sees them.
///
/// Resuming here only records the resumption: the queue performs it once its lock is released, so a
/// resumed task never runs (or is enqueued to run) while the lock is held.
public struct Waiters<Value: Sendable>: Sendable {
    fileprivate typealias Continuation = UnsafeContinuation<WaitOutcome<Value>, Never>

    fileprivate enum Place: Sendable {
        /// In the queue; its task has not suspended yet.
        case queued
        /// In the queue, its task suspended; the token of its time limit, if it has one.
        case waiting(Continuation, Timeouts.Token?)
        /// Out of the queue (its outcome delivered or stored in `early`).
        case gone
    }

    fileprivate struct Entry: Sendable {
        let id: UInt64
        var place: Place
    }

    /// Tickets in the order they joined (so in increasing id); the first is never gone.
    fileprivate var entries = FIFOBuffer<Entry>()
    fileprivate var live = 0
    /// Outcomes of tickets that ended before their task suspended, kept until it asks.
    fileprivate var early: [UInt64: WaitOutcome<Value>] = [:]
    /// Resumptions and time limits to cancel, performed after the lock is released.
    fileprivate var resumptions: [(Continuation, WaitOutcome<Value>)] = []
    fileprivate var timersToCancel: [Timeouts.Token] = []

    fileprivate init() {}

    /// How many wait (joined and not yet ended).
    public var count: Int { live }
    public var isEmpty: Bool { live == 0 }

    /// The oldest waiter, if any.
    public var first: WaitTicket? { entries.first.map { WaitTicket(id: $0.id) } }

    /// Every waiter, oldest first.
    public var tickets: [WaitTicket] {
        entries.elements.compactMap { e in
            if case .gone = e.place { return nil }
            return WaitTicket(id: e.id)
        }
    }

    /// Whether `ticket` still waits.
    public func contains(_ ticket: WaitTicket) -> Bool { index(of: ticket.id) != nil }

    /// Grants `value` to the oldest waiter; returns its ticket, or nil when nobody waits.
    @discardableResult
    public mutating func resumeFirst(_ value: Value) -> WaitTicket? {
        guard let ticket = first else { return nil }
        end(ticket.id, .granted(value))
        return ticket
    }

    /// Grants `value` to `ticket`; false when it no longer waits (it was granted, cancelled or timed out).
    @discardableResult
    public mutating func resume(_ ticket: WaitTicket, _ value: Value) -> Bool {
        end(ticket.id, .granted(value))
    }

    /// Grants `value` to every waiter, oldest first; returns how many there were.
    @discardableResult
    public mutating func resumeAll(_ value: Value) -> Int {
        var n = 0
        while resumeFirst(value) != nil { n += 1 }
        return n
    }

    fileprivate mutating func join() -> WaitTicket {
        let id = ticketIDs.add(1, ordering: .relaxed).newValue
        entries.append(Entry(id: id, place: .queued))
        live += 1
        return WaitTicket(id: id)
    }

    /// Ends the wait of `id` with `outcome` if it still waits: delivered now (after the lock) to a
    /// suspended task, or kept for a task that has not suspended yet.
    @discardableResult
    fileprivate mutating func end(_ id: UInt64, _ outcome: WaitOutcome<Value>) -> Bool {
        guard let i = index(of: id) else { return false }
        switch entries[offset: i].place {
        case .queued:
            early[id] = outcome
        case .waiting(let c, let timer):
            resumptions.append((c, outcome))
            if let timer { timersToCancel.append(timer) }
        case .gone:
            return false
        }
        entries[offset: i].place = .gone
        live -= 1
        while case .gone? = entries.first?.place { entries.removeFirst() }
        return true
    }

    /// The offset of a waiting entry (binary search: ids increase along the buffer).
    fileprivate func index(of id: UInt64) -> Int? {
        var lo = 0, hi = entries.count
        while lo < hi {
            let mid = lo + (hi - lo) / 2
            if entries[offset: mid].id < id { lo = mid + 1 } else { hi = mid }
        }
        guard lo < entries.count, entries[offset: lo].id == id else { return nil }
        if case .gone = entries[offset: lo].place { return nil }
        return lo
    }
}

/// One FIFO queue of waiting tasks, with cancellation and time limits, and the owner's state beside it
/// under the same lock: the one waiter queue of the code base (semaphores, one-shots, channels, the
/// callers an adapter or a journal answers later).
///
/// - Every waiter ends exactly once: `.granted` by its owner, `.cancelled` when its task is cancelled
///   (by default; see `WaitCancellation`), `.timedOut` when its limit passes. A waiter granted before its
///   task was cancelled or its limit passed gets what it was granted — a grant is never lost.
/// - Order: `resumeFirst` grants the oldest waiter. Which task *runs* first after several grants is the
///   scheduler's business; what each waiter was granted is the queue's.
/// - `enqueue` and `wait(_:)` may be apart: the owner takes a ticket, hands it on (to a state machine,
///   an I/O thread), then waits; a grant that comes in between is kept for the wait.
/// - Time limits use the shared `Timeouts` driver (no sleeping task per wait).
/// - Resumptions happen after the lock is released, in the order the owner made them.
public final class WaiterQueue<State: Sendable, Value: Sendable>: Sendable {
    private struct Storage: Sendable {
        var state: State
        var waiters = Waiters<Value>()
    }

    // Every continuation in the storage is resumed exactly once: an entry leaves the queue only
    // through `Waiters.end`, which hands its continuation to `resumptions` (or its outcome to `early`).
    private let storage: Mutex<Storage>

    public init(_ state: State) {
        storage = Mutex(Storage(state: state))
    }

    /// Runs `body` on the owner's state and the waiters under the lock; resumptions recorded by `body`
    /// happen when it has returned and the lock is released.
    public func withLock<R>(_ body: (inout State, inout Waiters<Value>) throws -> R) rethrows -> R {
        var resumptions: [(Waiters<Value>.Continuation, WaitOutcome<Value>)] = []
        var timers: [Timeouts.Token] = []
        defer { Self.perform(resumptions, timers) }
        return try storage.withLock { s in
            defer {
                if !s.waiters.resumptions.isEmpty { swap(&resumptions, &s.waiters.resumptions) }
                if !s.waiters.timersToCancel.isEmpty { swap(&timers, &s.waiters.timersToCancel) }
            }
            return try body(&s.state, &s.waiters)
        }
    }

    /// How many wait.
    public var count: Int { storage.withLock { $0.waiters.count } }

    /// Joins the tail of the queue unless `now` (run under the lock first) returns a value, in which case
    /// the ticket is already granted that value. Wait for the ticket with `wait(_:timeout:cancellation:)`.
    public func enqueue(_ now: (inout State, inout Waiters<Value>) -> Value? = { _, _ in nil }) -> WaitTicket {
        withLock { state, waiters in
            // Decided before joining: `now` sees the waiters that came before this one.
            let granted = now(&state, &waiters)
            let ticket = waiters.join()
            if let granted { waiters.end(ticket.id, .granted(granted)) }
            return ticket
        }
    }

    /// Waits for `ticket` (from `enqueue`) to end: granted, cancelled or timed out. Call it once per ticket.
    public func wait(_ ticket: WaitTicket, timeout: Duration? = nil,
                     cancellation: WaitCancellation = .endsTheWait) async -> WaitOutcome<Value> {
        if let outcome = takeEarly(ticket) { return outcome }
        let timer = timeout.map { limit in
            Timeouts.shared.schedule(after: limit) { [weak self] in self?.end(ticket, .timedOut) }
        }
        let wait = {
            await withUnsafeContinuation { (c: Waiters<Value>.Continuation) in
                let ready: WaitOutcome<Value>? = self.storage.withLock { s in
                    if let outcome = s.waiters.early.removeValue(forKey: ticket.id) { return outcome }
                    guard let i = s.waiters.index(of: ticket.id) else {
                        // Not in the queue and no outcome kept: waited on twice. Ends as cancelled.
                        assertionFailure("\(ticket) was waited on twice")
                        return .cancelled
                    }
                    s.waiters.entries[offset: i].place = .waiting(c, timer)
                    return nil
                }
                if let ready {
                    if let timer { Timeouts.shared.cancel(timer) }
                    c.resume(returning: ready)
                }
            }
        }
        switch cancellation {
        case .isIgnored:
            return await wait()
        case .endsTheWait:
            return await withTaskCancellationHandler(operation: wait) { self.end(ticket, .cancelled) }
        }
    }

    /// Joins the queue and waits: `enqueue(now)` then `wait(_:timeout:cancellation:)`.
    public func wait(timeout: Duration? = nil, cancellation: WaitCancellation = .endsTheWait,
                     _ now: (inout State, inout Waiters<Value>) -> Value? = { _, _ in nil }) async -> WaitOutcome<Value> {
        await wait(enqueue(now), timeout: timeout, cancellation: cancellation)
    }

    /// Ends `ticket`'s wait with `outcome` if it still waits.
    private func end(_ ticket: WaitTicket, _ outcome: WaitOutcome<Value>) {
        withLock { _, waiters in _ = waiters.end(ticket.id, outcome) }
    }

    private func takeEarly(_ ticket: WaitTicket) -> WaitOutcome<Value>? {
        storage.withLock { s in s.waiters.early.isEmpty ? nil : s.waiters.early.removeValue(forKey: ticket.id) }
    }

    private static func perform(_ resumptions: [(Waiters<Value>.Continuation, WaitOutcome<Value>)], _ timers: [Timeouts.Token]) {
        for t in timers { Timeouts.shared.cancel(t) }
        for (c, outcome) in resumptions { c.resume(returning: outcome) }
    }
}

extension WaiterQueue where State == Void {
    /// A queue with no state of its owner beside it.
    public convenience init() { self.init(()) }
}
