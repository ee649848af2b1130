/// A counting semaphore for tasks: `acquire` suspends (FIFO, a `WaiterQueue`) while no permits are free,
/// honours task cancellation and ends with an error once the semaphore is closed.
///
/// It counts transmit credits (buffers free at the receiver: the backpressure behind
/// write-without-response, the simulator's one-at-a-time connects) and the engine's connection slots
/// per adapter, whose use it measures (`usage`).
public final class AsyncSemaphore: Sendable {
    private struct State {
        var credits: Int
        var closedError: (any Error)?
        var inUse = 0
        var peak = 0
        /// Told how many wait each time one starts waiting (tests observe the queue instead of sleeping).
        var observer: (@Sendable (Int) -> Void)?

        mutating func taken() {
            inUse += 1
            peak = max(peak, inUse)
        }

        /// What a newcomer gets at once: the close error, or a free permit if nobody waits for it (and
        /// the newcomer's task is not cancelled); nil when it must wait.
        mutating func take(othersWaiting: Bool, cancelled: Bool) -> Result<Void, any Error>? {
            if let e = closedError { return .failure(e) }
            guard credits > 0, !othersWaiting, !cancelled else { return nil }
            credits -= 1
            taken()
            return .success(())
        }
    }

    private let queue: WaiterQueue<State, Result<Void, any Error>>
    /// Permits at the start.
    public let capacity: Int
    /// What `acquire` throws when its task is cancelled.
    private let cancellationError: any Error

    /// - Parameter cancellationError: what a cancelled `acquire` throws (a layer's own "cancelled").
    public init(permits: Int, cancellationError: any Error = CancellationError()) {
        capacity = permits
        self.cancellationError = cancellationError
        queue = WaiterQueue(State(credits: permits))
    }

    /// Permits available now.
    public var available: Int { queue.withLock { s, _ in s.credits } }

    /// Permits held now, and the most ever held at once.
    public var usage: (current: Int, peak: Int) { queue.withLock { s, _ in (s.inUse, s.peak) } }

    /// Takes a free permit if there is one (and nobody waits for it); never waits.
    public func tryAcquire() -> Bool {
        queue.withLock { s, waiters in
            guard s.closedError == nil, case .success? = s.take(othersWaiting: !waiters.isEmpty, cancelled: false) else { return false }
            return true
        }
    }

    /// Takes one permit, waiting for one if necessary (behind every task that waits already).
    public func acquire() async throws {
        // A free permit is taken without a ticket or a suspension: the common case for link credits.
        let now: Result<Void, any Error>? = queue.withLock { s, waiters in s.take(othersWaiting: !waiters.isEmpty, cancelled: Task.isCancelled) }
        if let now { return try now.get() }
        var waiting = 0
        var observer: (@Sendable (Int) -> Void)?
        let ticket = queue.enqueue { s, waiters in
            if let ready = s.take(othersWaiting: !waiters.isEmpty, cancelled: Task.isCancelled) { return ready }
            waiting = waiters.count + 1
            observer = s.observer
            return nil
        }
        observer?(waiting)
        switch await queue.wait(ticket) {
        case .granted(let result): try result.get()
        case .cancelled, .timedOut: throw cancellationError
        }
    }

    /// Calls `observer` with the number of waiting tasks whenever one starts waiting.
    public func observeWaiters(_ observer: @escaping @Sendable (Int) -> Void) {
        queue.withLock { s, _ in s.observer = observer }
    }

    /// Returns `count` permits (e.g. credits from Number Of Completed Packets); each goes to the oldest
    /// waiter, if any.
    public func release(_ count: Int = 1) {
        queue.withLock { s, waiters in
            guard s.closedError == nil else { return }
            s.credits += count
            s.inUse = max(0, s.inUse - count)
            while s.credits > 0, waiters.resumeFirst(.success(())) != nil {
                s.credits -= 1
                s.taken()
            }
        }
    }

    /// Fails every waiter and every later `acquire` with `error`.
    public func close(_ error: any Error) {
        queue.withLock { s, waiters in
            if s.closedError == nil { s.closedError = error }
            waiters.resumeAll(.failure(s.closedError ?? error))
        }
    }
}
