import Synchronization

/// A counting semaphore for tasks: `acquire` suspends (FIFO) while no permits are free, honours task
/// cancellation (throwing `BLEError.cancelled`) and ends with an error once the semaphore is closed.
///
/// It counts transmit credits (buffers free at the receiver: the backpressure behind
/// write-without-response, the simulator's one-at-a-time connects) and the engine's connection slots
/// per adapter, whose use it measures (`usage`).
package final class AsyncSemaphore: Sendable {
    private struct State {
        var credits: Int
        var closedError: BLEError?
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextID: UInt64 = 0
        var inUse = 0
        var peak = 0
        /// Told how many wait each time one starts waiting (tests observe the queue instead of sleeping).
        var observer: (@Sendable (Int) -> Void)?

        mutating func taken() {
            inUse += 1
            peak = max(peak, inUse)
        }
    }

    private let state: Mutex<State>
    /// Permits at the start.
    package let capacity: Int

    package init(permits: Int) {
        capacity = permits
        state = Mutex(State(credits: permits))
    }

    /// Permits available now.
    package var available: Int { state.withLock { $0.credits } }

    /// Permits held now, and the most ever held at once.
    package var usage: (current: Int, peak: Int) { state.withLock { ($0.inUse, $0.peak) } }

    /// Takes a free permit if there is one (and nobody waits for it); never waits.
    package func tryAcquire() -> Bool {
        state.withLock { s in
            guard s.closedError == nil, s.credits > 0, s.waiters.isEmpty else { return false }
            s.credits -= 1
            s.taken()
            return true
        }
    }

    /// Takes one credit, waiting for one if necessary.
    package func acquire() async throws {
        // A free permit is taken without suspending (no continuation, no cancellation handler): the
        // common case for link credits.
        let id: UInt64? = try state.withLock { s in
            if let e = s.closedError { throw e }
            if s.credits > 0 && s.waiters.isEmpty && !Task.isCancelled {
                s.credits -= 1
                s.taken()
                return nil
            }
            s.nextID += 1
            return s.nextID
        }
        guard let id else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                let (result, observe): (Result<Void, any Error>?, (() -> Void)?) = state.withLock { s in
                    if let e = s.closedError { return (.failure(e), nil) }
                    if Task.isCancelled { return (.failure(BLEError.cancelled), nil) }
                    if s.credits > 0 && s.waiters.isEmpty {
                        s.credits -= 1
                        s.taken()
                        return (.success(()), nil)
                    }
                    s.waiters.append((id, c))
                    let observer = s.observer, count = s.waiters.count
                    return (nil, observer.map { o in { o(count) } })
                }
                if let result { c.resume(with: result) }
                observe?()
            }
        } onCancel: {
            let c: CheckedContinuation<Void, any Error>? = state.withLock { s in
                guard let i = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return s.waiters.remove(at: i).continuation
            }
            c?.resume(throwing: BLEError.cancelled)
        }
    }

    /// Calls `observer` with the number of waiting tasks whenever one starts waiting.
    package func observeWaiters(_ observer: @escaping @Sendable (Int) -> Void) {
        state.withLock { $0.observer = observer }
    }

    /// Returns `count` permits (e.g. credits from Number Of Completed Packets) and wakes waiters in order.
    package func release(_ count: Int = 1) {
        let woken: [CheckedContinuation<Void, any Error>] = state.withLock { s in
            guard s.closedError == nil else { return [] }
            s.credits += count
            s.inUse = max(0, s.inUse - count)
            var out: [CheckedContinuation<Void, any Error>] = []
            while s.credits > 0, !s.waiters.isEmpty {
                s.credits -= 1
                s.taken()
                out.append(s.waiters.removeFirst().continuation)
            }
            return out
        }
        for c in woken { c.resume() }
    }

    /// Fails every waiter and every later `acquire` with `error`.
    package func close(_ error: BLEError) {
        let waiters = state.withLock { s in
            if s.closedError == nil { s.closedError = error }
            defer { s.waiters = [] }
            return s.waiters.map(\.continuation)
        }
        for c in waiters { c.resume(throwing: error) }
    }
}
