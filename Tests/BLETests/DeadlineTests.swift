import Synchronization
import Testing
@testable import BLE

/// `withDeadline`: the body's outcome, the limit, the caller's cancellation — and the body always ended
/// before the call returns. Nothing here asserts a duration.
@Suite(.timeLimit(.minutes(1)))
struct DeadlineTests {
    /// Set by a body as it ends, read after `withDeadline` returned.
    final class Ended: Sendable {
        private let flag = Mutex(false)
        func mark() { flag.withLock { $0 = true } }
        var value: Bool { flag.withLock { $0 } }
    }

    @TaskLocal static var label: String?

    @Test func aBodyThatEndsFirstGivesItsValueOrItsError() async throws {
        #expect(try await withDeadline(.seconds(30), operation: "value") { 42 } == 42)
        await #expect(throws: BLEError.attributeNotFound("x")) {
            try await withDeadline(.seconds(30), operation: "error") { () throws -> Int in throw BLEError.attributeNotFound("x") }
        }
        // A body's own CancellationError is reported as the layer's cancellation.
        await #expect(throws: BLEError.cancelled) {
            try await withDeadline(.seconds(30), operation: "cancellation") { () throws -> Int in throw CancellationError() }
        }
    }

    @Test func theLimitCancelsTheBodyWaitsForItToEndAndThrowsATimeout() async throws {
        let ended = Ended()
        let never = OneShot<Int>()
        await #expect(throws: BLEError.timeout(operation: "read 2A26", limit: .milliseconds(20))) {
            try await withDeadline(.milliseconds(20), operation: "read 2A26") { () throws -> Int in
                defer { ended.mark() }
                // Returns nil when the limit cancels this task.
                guard let v = await never.wait() else { throw BLEError.cancelled }
                return v
            }
        }
        #expect(ended.value)
    }

    @Test func cancellingTheCallerCancelsTheBodyWaitsForItAndThrowsCancelled() async throws {
        let ended = Ended()
        let waiting = OneShot<Void>()
        let never = OneShot<Int>()
        let caller = Task { () throws -> Int in
            try await withDeadline(.seconds(30), operation: "write FFF1") { () throws -> Int in
                defer { ended.mark() }
                waiting.fulfill(())
                guard let v = await never.wait() else { throw BLEError.cancelled }
                return v
            }
        }
        _ = await waiting.wait()
        caller.cancel()
        await #expect(throws: BLEError.cancelled) { try await caller.value }
        #expect(ended.value)
    }

    @Test func aCallerAlreadyCancelledDoesNotRunTheBody() async throws {
        let ran = Ended()
        let caller = Task { () throws -> Int in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await withDeadline(.seconds(30), operation: "read") { ran.mark(); return 1 }
        }
        await #expect(throws: BLEError.cancelled) { try await caller.value }
        #expect(!ran.value)
    }

    @Test func theBodySeesTheCallersTaskLocalValues() async throws {
        let seen = try await Self.$label.withValue("device SN-7") {
            try await withDeadline(.seconds(30), operation: "read") { Self.label }
        }
        #expect(seen == "device SN-7")
    }
}
