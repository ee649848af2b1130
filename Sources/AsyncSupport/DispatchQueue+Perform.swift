import Dispatch

extension DispatchQueue {
    /// Runs `work` on this queue and hands its result to the awaiting task: for work that may block
    /// (file I/O, fsync), which must never run on the cooperative pool. The task waits without holding a
    /// thread; `work` runs to its end even if the task is cancelled meanwhile (its result is then what
    /// the task gets: a write under way is not abandoned halfway).
    public func perform<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
            self.async { c.resume(with: Result { try work() }) }
        }
    }

    /// `perform` for work that cannot fail.
    public func perform<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { (c: CheckedContinuation<T, Never>) in
            self.async { c.resume(returning: work()) }
        }
    }
}
