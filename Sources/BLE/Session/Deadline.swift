import AsyncSupport

/// Runs `body` with a time limit (`withTimeLimit`), in this layer's errors: when `limit` passes first,
/// `BLEError.timeout(operation:limit:)`; when the caller is cancelled first, `BLEError.cancelled` (a
/// body's own `CancellationError` too). `withDeadline` returns only after `body` has ended.
package func withDeadline<T: Sendable>(_ limit: Duration, operation: String,
                                       _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    switch await withTimeLimit(limit, body) {
    case .timedOut:
        throw BLEError.timeout(operation: operation, limit: limit)
    case .cancelled:
        throw BLEError.cancelled
    case .finished(let result):
        do {
            return try result.get()
        } catch is CancellationError {
            throw BLEError.cancelled
        }
    }
}
