import Synchronization

/// Runs `body` with a time limit: when `limit` passes first, `body`'s task is cancelled and
/// `BLEError.timeout(operation:limit:)` is thrown. Cancellation of the caller ends with `BLEError.cancelled`.
///
/// Whichever comes first decides the outcome — `body` ending (its value or its error), the limit, or the
/// caller's cancellation — and in every case `withDeadline` returns only after `body` has ended (a body
/// given up on is cancelled and awaited, so nothing it holds outlives the call).
///
/// `body` must honour cancellation promptly (every wait in this layer does), because the limit can only
/// end it by cancelling it.
package func withDeadline<T: Sendable>(_ limit: Duration, operation: String,
                                       _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    if Task.isCancelled { throw BLEError.cancelled }
    // One task for the body (it inherits the caller's priority and task-local values), cancelled by the
    // limit or by the caller. The limit is a `Timeouts` entry, not a sleeping task: a cancelled
    // `Task.sleep` keeps its Dispatch timer (and ~600 bytes) queued until the limit passes, which at
    // thousands of operations per second was a large share of the engine's CPU and memory. (Before, a
    // task group ran the body and a second child that waited for the limit: two tasks per operation.)
    let race = DeadlineRace()
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
    case .limit?:
        throw BLEError.timeout(operation: operation, limit: limit)
    case .caller?:
        throw BLEError.cancelled
    case .body?, nil:
        do {
            return try result.get()
        } catch is CancellationError {
            throw BLEError.cancelled
        }
    }
}

/// Who ended a `withDeadline` first: the body, the limit or the caller. The first to decide wins.
private final class DeadlineRace: Sendable {
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
