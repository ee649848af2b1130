import AsyncSupport
import Testing
@testable import BLE

/// `withDeadline` is `withTimeLimit` (AsyncSupportTests) in this layer's errors: the limit is
/// `BLEError.timeout` with the operation and the limit, the caller's cancellation and a body's own
/// `CancellationError` are `BLEError.cancelled`, a body's error is itself.
@Suite(.timeLimit(.minutes(1)))
struct DeadlineTests {
    @Test func outcomesAreThisLayersErrors() async throws {
        #expect(try await withDeadline(.seconds(30), operation: "value") { 42 } == 42)
        await #expect(throws: BLEError.attributeNotFound("x")) {
            try await withDeadline(.seconds(30), operation: "error") { () throws -> Int in throw BLEError.attributeNotFound("x") }
        }
        await #expect(throws: BLEError.cancelled) {
            try await withDeadline(.seconds(30), operation: "cancellation") { () throws -> Int in throw CancellationError() }
        }
        let never = OneShot<Int>()
        await #expect(throws: BLEError.timeout(operation: "read 2A26", limit: .milliseconds(20))) {
            try await withDeadline(.milliseconds(20), operation: "read 2A26") { () throws -> Int in
                guard let v = await never.wait() else { throw BLEError.cancelled }
                return v
            }
        }
        let caller = Task { () throws -> Int in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await withDeadline(.seconds(30), operation: "read") { 1 }
        }
        await #expect(throws: BLEError.cancelled) { try await caller.value }
    }
}
