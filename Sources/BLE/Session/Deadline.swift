/// Runs `body` with a time limit: when `limit` passes first, `body`'s task is cancelled and
/// `BLEError.timeout(operation:limit:)` is thrown. Cancellation of the caller ends with `BLEError.cancelled`.
///
/// `body` must honour cancellation promptly (every wait in this layer does), because the limit can only
/// end it by cancelling it.
package func withDeadline<T: Sendable>(_ limit: Duration, operation: String,
                                       _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    if Task.isCancelled { throw BLEError.cancelled }
    do {
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: limit)
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
