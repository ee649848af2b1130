import Synchronization

/// Timeouts without a sleeping task per wait.
///
/// A `Task { try await Task.sleep(for: limit) }` per wait that is cancelled when the wait ends early
/// costs a task, and on Linux the cancelled sleep's timer stays queued in Dispatch, holding about 600
/// bytes, until its deadline: at thousands of waits per second with 5–30 s limits that was a large part
/// of the engine's CPU and memory growth (`withDeadline` per session operation, the engine's awaits). Here one driver task sleeps until the earliest live deadline; scheduling and
/// cancelling a timeout are a dictionary insert and remove under a lock.
///
/// Deadlines are kept in one FIFO per limit (waits of one limit end in the order they started), so
/// finding the earliest live deadline looks at the heads only; cancelled entries are dropped from the
/// heads as they are met. A handler runs at most once, on the driver task, at or after its deadline; one
/// that was already due may still run just after `cancel` returns, so handlers must tolerate a wait that
/// already ended (every handler here only wakes a waiter, if any).
package final class Timeouts: Sendable {
    /// The process-wide instance.
    package static let shared = Timeouts()

    package init() {}

    package struct Token: Sendable, Hashable {
        fileprivate let id: UInt64
    }

    private struct Queue {
        var items: [(deadline: ContinuousClock.Instant, id: UInt64)] = []
        var head = 0

        var first: (deadline: ContinuousClock.Instant, id: UInt64)? { head < items.count ? items[head] : nil }

        mutating func removeFirst() {
            head += 1
            if head == items.count {
                items.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1024 && head * 2 >= items.count {
                items.removeFirst(head)
                head = 0
            }
        }
    }

    private struct State {
        var nextID: UInt64 = 0
        var handlers: [UInt64: @Sendable () -> Void] = [:]
        var queues: [Duration: Queue] = [:]
        /// What the current driver sleeps until (nil: no driver).
        var target: ContinuousClock.Instant?
        var generation: UInt64 = 0
        var driver: Task<Void, Never>?

        /// Drops cancelled entries at the head of the queue for `limit`.
        mutating func trim(_ limit: Duration) {
            while let f = queues[limit]?.first, handlers[f.id] == nil { queues[limit]?.removeFirst() }
            if queues[limit]?.first == nil { queues[limit] = nil }
        }

        mutating func earliest() -> ContinuousClock.Instant? {
            var best: ContinuousClock.Instant?
            for limit in Array(queues.keys) {
                trim(limit)
                if let d = queues[limit]?.first?.deadline, best.map({ d < $0 }) ?? true { best = d }
            }
            return best
        }
    }

    private let state = Mutex(State())

    /// Runs `handler` once `limit` has passed, unless cancelled first.
    package func schedule(after limit: Duration, _ handler: @escaping @Sendable () -> Void) -> Token {
        let deadline = ContinuousClock.now + limit
        let (token, start) = state.withLock { s -> (Token, UInt64?) in
            s.nextID &+= 1
            let id = s.nextID
            s.handlers[id] = handler
            s.trim(limit)
            s.queues[limit, default: Queue()].items.append((deadline, id))
            if let t = s.target, t <= deadline { return (Token(id: id), nil) }
            s.target = deadline
            s.generation &+= 1
            return (Token(id: id), s.generation)
        }
        if let generation = start { startDriver(generation) }
        return token
    }

    /// Cancels a timeout; after this returns its handler does not run.
    package func cancel(_ token: Token) {
        _ = state.withLock { $0.handlers.removeValue(forKey: token.id) }
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
                for limit in Array(s.queues.keys) {
                    while let f = s.queues[limit]?.first, f.deadline <= now {
                        s.queues[limit]?.removeFirst()
                        if let h = s.handlers.removeValue(forKey: f.id) { due.append((f.deadline, h)) }
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
