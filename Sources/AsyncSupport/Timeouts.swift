import Synchronization

/// Timeouts without a sleeping task per wait.
///
/// A `Task { try await Task.sleep(for: limit) }` per wait that is cancelled when the wait ends early
/// costs a task, and on Linux the cancelled sleep's timer stays queued in Dispatch, holding about 600
/// bytes, until its deadline: at thousands of waits per second with 5–30 s limits that was a large part
/// of the engine's CPU and memory growth (`withDeadline` per session operation, the engine's awaits).
/// Here one driver task sleeps until the earliest live deadline; scheduling a timeout is an append and
/// cancelling it clears one slot, under a lock.
///
/// Deadlines are kept in one FIFO per limit (waits of one limit end in the order they started), so
/// finding the earliest live deadline looks at the heads only; cancelled entries are dropped from the
/// heads as they are met. A token names its entry's queue and position (no lookup table to hash into:
/// this runs for every operation of every device). A handler runs at most once, on the driver task, at
/// or after its deadline; one that was already due may still run just after `cancel` returns, so
/// handlers must tolerate a wait that already ended (every handler here only wakes a waiter, if any).
public final class Timeouts: Sendable {
    /// The process-wide instance.
    public static let shared = Timeouts()

    public init() {}

    public struct Token: Sendable, Hashable {
        /// The queue (one per limit) and the entry's position in it since the queue was made.
        fileprivate let queue: UInt64
        fileprivate let position: UInt64
    }

    private struct Entry {
        var deadline: ContinuousClock.Instant
        /// nil once cancelled (or taken to run).
        var handler: (@Sendable () -> Void)?
    }

    /// The waits of one limit, in the order they started (so in deadline order). A token finds its
    /// entry by position, without a lookup table: cancelling is clearing one slot.
    private struct Queue {
        let id: UInt64
        let limit: Duration
        var items = FIFOBuffer<Entry>()

        init(id: UInt64, limit: Duration) {
            self.id = id
            self.limit = limit
        }

        var first: Entry? { items.first }
        var isEmpty: Bool { items.isEmpty }

        mutating func append(_ e: Entry) -> UInt64 { items.append(e) }

        mutating func dropFirst() { items.removeFirst() }

        /// Drops cancelled entries at the head.
        mutating func trim() {
            while let f = items.first, f.handler == nil { items.removeFirst() }
        }

        /// Clears the entry at `position`, if it is still queued; returns its handler.
        mutating func cancel(at position: UInt64) -> (@Sendable () -> Void)? {
            guard let i = items.offset(of: position) else { return nil }
            let handler = items[offset: i].handler
            items[offset: i].handler = nil
            trim()
            return handler
        }
    }

    private struct State {
        var nextQueue: UInt64 = 0
        /// One queue per limit in use (a handful: the limits a run's workflow and options name).
        var queues: [Queue] = []
        /// What the current driver sleeps until (nil: no driver).
        var target: ContinuousClock.Instant?
        var generation: UInt64 = 0
        var driver: Task<Void, Never>?

        mutating func queueIndex(for limit: Duration) -> Int {
            if let i = queues.firstIndex(where: { $0.limit == limit }) { return i }
            nextQueue &+= 1
            queues.append(Queue(id: nextQueue, limit: limit))
            return queues.count - 1
        }

        /// Drops cancelled heads and empty queues; the earliest live deadline.
        mutating func earliest() -> ContinuousClock.Instant? {
            var best: ContinuousClock.Instant?
            for i in queues.indices {
                queues[i].trim()
                if let d = queues[i].first?.deadline, best.map({ d < $0 }) ?? true { best = d }
            }
            queues.removeAll { $0.isEmpty }
            return best
        }
    }

    private let state = Mutex(State())

    /// Runs `handler` once `limit` has passed, unless cancelled first.
    public func schedule(after limit: Duration, _ handler: @escaping @Sendable () -> Void) -> Token {
        let deadline = ContinuousClock.now + limit
        let (token, start) = state.withLock { s -> (Token, UInt64?) in
            let i = s.queueIndex(for: limit)
            s.queues[i].trim()
            let token = Token(queue: s.queues[i].id, position: s.queues[i].append(Entry(deadline: deadline, handler: handler)))
            if let t = s.target, t <= deadline { return (token, nil) }
            s.target = deadline
            s.generation &+= 1
            return (token, s.generation)
        }
        if let generation = start { startDriver(generation) }
        return token
    }

    /// Cancels a timeout; after this returns its handler does not run.
    public func cancel(_ token: Token) {
        // The handler (and what it holds) is released outside the lock.
        let released: (@Sendable () -> Void)? = state.withLock { s in
            guard let i = s.queues.firstIndex(where: { $0.id == token.queue }) else { return nil }
            let handler = s.queues[i].cancel(at: token.position)
            // An empty queue is kept for the next wait of its limit (the driver drops the empty ones),
            // unless unusual limits pile up (e.g. the rest of a step's time, a different limit each).
            if s.queues.count > 16, s.queues[i].isEmpty { s.queues.remove(at: i) }
            return handler
        }
        _ = released
    }

    private func startDriver(_ generation: UInt64) {
        // High priority: a timeout must fire on time even when the pool is busy with lower-priority work.
        let task = Task(priority: .high) { await self.drive(generation) }
        let old = state.withLock { s -> Task<Void, Never>? in
            guard s.generation == generation else { return task }  // already replaced: stop this one
            defer { s.driver = task }
            return s.driver
        }
        old?.cancel()
    }

    private func drive(_ generation: UInt64) async {
        while true {
            let now = ContinuousClock.now
            var due: [(deadline: ContinuousClock.Instant, handler: @Sendable () -> Void)] = []
            let next = state.withLock { s -> ContinuousClock.Instant? in
                guard s.generation == generation else { return nil }
                for i in s.queues.indices {
                    while let f = s.queues[i].first, f.deadline <= now {
                        s.queues[i].dropFirst()
                        if let h = f.handler { due.append((f.deadline, h)) }
                    }
                }
                s.target = s.earliest()
                if s.target == nil { s.driver = nil }
                return s.target
            }
            // In deadline order across limits too (a late wake-up finds several due).
            if due.count > 1 { due.sort { $0.deadline < $1.deadline } }
            for d in due { d.handler() }
            guard let next else { return }
            do { try await Task.sleep(until: next, tolerance: .milliseconds(5), clock: .continuous) } catch { return }
        }
    }
}
