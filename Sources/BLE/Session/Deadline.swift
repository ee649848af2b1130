import Synchronization

/// Runs `body` with a time limit: when `limit` passes first, `body`'s task is cancelled and
/// `BLEError.timeout(operation:limit:)` is thrown. Cancellation of the caller ends with `BLEError.cancelled`.
///
/// `body` must honour cancellation promptly (every wait in this layer does), because the limit can only
/// end it by cancelling it.
package func withDeadline<T: Sendable>(_ limit: Duration, operation: String,
                                       _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    if Task.isCancelled { throw BLEError.cancelled }
    // The limit is a `Timeouts` entry that opens a gate, not a sleeping task: a cancelled `Task.sleep`
    // keeps its Dispatch timer (and ~600 bytes) queued until the limit passes, which at thousands of
    // operations per second was a large share of the engine's CPU and memory.
    let gate = DeadlineGate()
    let timer = Timeouts.shared.schedule(after: limit) { gate.open(expired: true) }
    defer { Timeouts.shared.cancel(timer) }
    do {
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await gate.wait()
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw BLEError.cancelled }
            if let value = first { return value }
            throw BLEError.timeout(operation: operation, limit: limit)
        }
    } catch is CancellationError {
        throw BLEError.cancelled
    }
}

/// What the limit's side of `withDeadline` waits on: opened by the limit (returns) or by cancellation
/// (throws `CancellationError`, as the `Task.sleep` it replaces did).
private final class DeadlineGate: Sendable {
    private struct State {
        var waiter: CheckedContinuation<Void, any Error>?
        var opened: Bool?  // nil: closed; true: the limit passed; false: cancelled
    }

    private let state = Mutex(State())

    func open(expired: Bool) {
        let waiter = state.withLock { s -> CheckedContinuation<Void, any Error>? in
            guard s.opened == nil else { return nil }
            s.opened = expired
            defer { s.waiter = nil }
            return s.waiter
        }
        if expired { waiter?.resume() } else { waiter?.resume(throwing: CancellationError()) }
    }

    func wait() async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                let opened = state.withLock { s -> Bool? in
                    if s.opened == nil { s.waiter = c }
                    return s.opened
                }
                switch opened {
                case true?: c.resume()
                case false?: c.resume(throwing: CancellationError())
                case nil: break
                }
            }
        } onCancel: {
            open(expired: false)
        }
    }
}
