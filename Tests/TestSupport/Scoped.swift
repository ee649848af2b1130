/// Runs `body` with `resource`, then awaits `stop(resource)` whether `body` returned or threw (a `defer`
/// cannot await, and a stop that blocks a thread instead would hold a concurrency thread).
func scoped<R, T>(_ resource: R, stop: (R) async -> Void, _ body: (R) async throws -> T) async throws -> T {
    do {
        let result = try await body(resource)
        await stop(resource)
        return result
    } catch {
        await stop(resource)
        throw error
    }
}
