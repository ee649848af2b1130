import Synchronization

/// A counting semaphore for tasks: `acquire` suspends (FIFO) while no permits are free and honours
/// task cancellation. Used for the global concurrency bound and per-adapter connection slots.
package final class AsyncSemaphore: Sendable {
    private struct State {
        var permits: Int
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextID: UInt64 = 0
        var inUse = 0
        var peak = 0
    }

    private let state: Mutex<State>
    package let capacity: Int

    package init(permits: Int) {
        capacity = permits
        state = Mutex(State(permits: permits))
    }

    /// Permits in use now, and the most ever in use at once.
    package var usage: (current: Int, peak: Int) { state.withLock { ($0.inUse, $0.peak) } }

    package func acquire() async throws {
        let id: UInt64 = state.withLock { s in
            s.nextID += 1
            return s.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                let result: Result<Void, any Error>? = state.withLock { s in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if s.permits > 0 && s.waiters.isEmpty {
                        s.permits -= 1
                        s.inUse += 1
                        s.peak = max(s.peak, s.inUse)
                        return .success(())
                    }
                    s.waiters.append((id, c))
                    return nil
                }
                if let result { c.resume(with: result) }
            }
        } onCancel: {
            let c: CheckedContinuation<Void, any Error>? = state.withLock { s in
                guard let i = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return s.waiters.remove(at: i).continuation
            }
            c?.resume(throwing: CancellationError())
        }
    }

    /// Takes a permit only if one is free now.
    package func tryAcquire() -> Bool {
        state.withLock { s in
            guard s.permits > 0, s.waiters.isEmpty else { return false }
            s.permits -= 1
            s.inUse += 1
            s.peak = max(s.peak, s.inUse)
            return true
        }
    }

    package func release() {
        let next: CheckedContinuation<Void, any Error>? = state.withLock { s in
            if !s.waiters.isEmpty {
                // Hand the permit straight to the next waiter (inUse unchanged).
                return s.waiters.removeFirst().continuation
            }
            s.permits += 1
            s.inUse -= 1
            return nil
        }
        next?.resume()
    }
}
