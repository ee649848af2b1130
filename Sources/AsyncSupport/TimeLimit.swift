import Synchronization

/// How `withTimeLimit` ended: the body's own result, the limit, or the caller's cancellation.
public enum TimeLimitOutcome<T: Sendable>: Sendable {
    /// The body ended first, with its value or its error.
    case finished(Result<T, any Error>)
    /// The limit passed first; the body was cancelled and has ended.
    case timedOut
    /// The caller was cancelled first (or before the call); the body was cancelled and has ended (or
    /// never ran).
    case cancelled
}

/// Runs `body` with a time limit. When `limit` passes first, `body`'s task is cancelled; when the caller
/// is cancelled first, likewise. Layers map the outcome to their own errors (BLE's `withDeadline`).
///
/// Whichever comes first decides the outcome — `body` ending (its value or its error), the limit, or the
/// caller's cancellation — and in every case `withTimeLimit` returns only after `body` has ended (a body
/// given up on is cancelled and awaited, so nothing it holds outlives the call).
///
/// `body` must honour cancellation promptly, because the limit can only end it by cancelling it.
public func withTimeLimit<T: Sendable>(_ limit: Duration,
                                       _ body: @escaping @Sendable () async throws -> T) async -> TimeLimitOutcome<T> {
    if Task.isCancelled { return .cancelled }
    // One task for the body (it inherits the caller's priority and task-local values), cancelled by the
    // limit or by the caller. The limit is a `Timeouts` entry, not a sleeping task: a cancelled
    // `Task.sleep` keeps its Dispatch timer (and ~600 bytes) queued until the limit passes, which at
    // thousands of operations per second was a large share of the engine's CPU and memory. (Before, a
    // task group ran the body and a second child that waited for the limit: two tasks per operation.)
    let race = Race()
    let priority = Task.currentPriority
    let task = Task { () throws -> T in
        defer { race.decide(.body) }
        return try await body()
    }
    let timer = Timeouts.shared.schedule(after: limit) {
        // The limit is decided by a job queued at the caller's priority when it passes (not on the timer
        // driver itself): a body already queued to finish — on a busy machine, behind other work — ends
        // first, as it did when a second child task waited for the limit.
        Task(priority: priority) {
            if race.decide(.limit) { task.cancel() }
        }
    }
    defer { Timeouts.shared.cancel(timer) }
    let result = await withTaskCancellationHandler {
        await task.result
    } onCancel: {
        if race.decide(.caller) { task.cancel() }
    }
    switch race.winner {
    case .limit?: return .timedOut
    case .caller?: return .cancelled
    case .body?, nil: return .finished(result)
    }
}

/// Who ended a `withTimeLimit` first: the body, the limit or the caller. The first to decide wins.
private final class Race: Sendable {
    enum Side { case body, limit, caller }

    private let state = Mutex<Side?>(nil)

    /// True when `side` is the first to decide.
    @discardableResult
    func decide(_ side: Side) -> Bool {
        state.withLock { s in
            guard s == nil else { return false }
            s = side
            return true
        }
    }

    var winner: Side? { state.withLock { $0 } }
}
