import Synchronization
import Testing
import AsyncSupport

/// `withTimeLimit`: the body's outcome, the limit, the caller's cancellation — and the body always ended
/// before the call returns. Nothing here asserts a duration.
@Suite(.timeLimit(.minutes(1)))
struct TimeLimitTests {
    struct Failure: Error, Equatable {}

    /// Set by a body as it ends, read after `withTimeLimit` returned.
    final class Ended: Sendable {
        private let flag = Mutex(false)
        func mark() { flag.withLock { $0 = true } }
        var value: Bool { flag.withLock { $0 } }
    }

    @TaskLocal static var label: String?

    @Test func aBodyThatEndsFirstGivesItsValueOrItsError() async throws {
        guard case .finished(let value) = await withTimeLimit(.seconds(30), { 42 }) else {
            Issue.record("the body did not finish first")
            return
        }
        #expect(try value.get() == 42)
        guard case .finished(let error) = await withTimeLimit(.seconds(30), { () throws -> Int in throw Failure() }) else {
            Issue.record("the body did not finish first")
            return
        }
        #expect(throws: Failure()) { try error.get() }
    }

    @Test func theLimitCancelsTheBodyAndWaitsForItToEnd() async {
        let ended = Ended()
        let never = OneShot<Int>()
        let outcome = await withTimeLimit(.milliseconds(20)) { () -> Int? in
            defer { ended.mark() }
            // Returns nil when the limit cancels this task.
            return await never.wait()
        }
        guard case .timedOut = outcome else {
            Issue.record("expected the limit to win, got \(outcome)")
            return
        }
        #expect(ended.value)
    }

    @Test func cancellingTheCallerCancelsTheBodyAndWaitsForIt() async {
        let ended = Ended()
        let waiting = OneShot<Void>()
        let never = OneShot<Int>()
        let caller = Task { () -> TimeLimitOutcome<Int?> in
            await withTimeLimit(.seconds(30)) { () -> Int? in
                defer { ended.mark() }
                waiting.fulfill(())
                return await never.wait()
            }
        }
        _ = await waiting.wait()
        caller.cancel()
        guard case .cancelled = await caller.value else {
            Issue.record("expected the caller's cancellation to win")
            return
        }
        #expect(ended.value)
    }

    @Test func aCallerAlreadyCancelledDoesNotRunTheBody() async {
        let ran = Ended()
        let caller = Task { () -> TimeLimitOutcome<Int> in
            withUnsafeCurrentTask { $0?.cancel() }
            return await withTimeLimit(.seconds(30)) { ran.mark(); return 1 }
        }
        guard case .cancelled = await caller.value else {
            Issue.record("expected cancelled")
            return
        }
        #expect(!ran.value)
    }

    @Test func theBodySeesTheCallersTaskLocalValues() async throws {
        let outcome = await Self.$label.withValue("device SN-7") {
            await withTimeLimit(.seconds(30)) { Self.label }
        }
        guard case .finished(let seen) = outcome else {
            Issue.record("the body did not finish first")
            return
        }
        #expect(try seen.get() == "device SN-7")
    }
}
