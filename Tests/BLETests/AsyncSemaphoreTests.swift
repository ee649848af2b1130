import Synchronization
import Testing
@testable import BLE

/// Credits and slots: free permits taken at once, waiters served in order, cancellation and close.
/// Waits are observed (`observeWaiters`), never slept on.
@Suite(.timeLimit(.minutes(1)))
struct AsyncSemaphoreTests {
    /// One-shots fulfilled when `n` tasks wait.
    final class Reached: Sendable {
        private let shots = Mutex<[Int: OneShot<Void>]>([:])
        func shot(_ n: Int) -> OneShot<Void> {
            shots.withLock { r in
                if let s = r[n] { return s }
                let s = OneShot<Void>()
                r[n] = s
                return s
            }
        }
    }

    /// A semaphore and a way to wait until `n` tasks wait on it.
    private func observed(permits: Int) -> (AsyncSemaphore, @Sendable (Int) async -> Void) {
        let semaphore = AsyncSemaphore(permits: permits)
        let reached = Reached()
        semaphore.observeWaiters { n in reached.shot(n).fulfill(()) }
        return (semaphore, { n in _ = await reached.shot(n).wait() })
    }

    @Test func freePermitsAreTakenAtOnceAndCounted() async throws {
        let s = AsyncSemaphore(permits: 2)
        try await s.acquire()
        try await s.acquire()
        #expect(s.available == 0)
        #expect(s.usage == (current: 2, peak: 2))
        s.release()
        #expect(s.available == 1)
        #expect(s.usage == (current: 1, peak: 2))
    }

    @Test func waitersAreServedInTheOrderTheyCame() async throws {
        let (s, waiting) = observed(permits: 0)
        let order = Recorder<Int>()
        var tasks: [Task<Void, any Error>] = []
        for i in 0..<3 {
            tasks.append(Task {
                try await s.acquire()
                order.append(i)
            })
            await waiting(i + 1)
        }
        // A permit returned while tasks wait goes to the first of them, not to a newcomer.
        for _ in 0..<3 { s.release() }
        for t in tasks { try await t.value }
        #expect(order.items == [0, 1, 2])
        #expect(s.available == 0)
    }

    @Test func aCancelledWaiterLeavesTheQueueAndTheNextOneGetsThePermit() async throws {
        let (s, waiting) = observed(permits: 0)
        let first = Task { try await s.acquire() }
        await waiting(1)
        let second = Task { try await s.acquire() }
        await waiting(2)
        first.cancel()
        await #expect(throws: BLEError.cancelled) { try await first.value }
        s.release()
        try await second.value
        #expect(s.available == 0)
    }

    @Test func aCancelledTaskDoesNotTakeAFreePermit() async throws {
        let s = AsyncSemaphore(permits: 1)
        let gate = OneShot<Void>()
        let t = Task { () async throws in
            _ = await gate.wait()
            try await s.acquire()
        }
        t.cancel()
        gate.fulfill(())
        await #expect(throws: BLEError.cancelled) { try await t.value }
        #expect(s.available == 1)
    }

    @Test func closingFailsEveryWaiterAndEveryLaterAcquire() async throws {
        let (s, waiting) = observed(permits: 0)
        let w = Task { try await s.acquire() }
        await waiting(1)
        s.close(.disconnected(.supervisionTimeout))
        await #expect(throws: BLEError.disconnected(.supervisionTimeout)) { try await w.value }
        await #expect(throws: BLEError.disconnected(.supervisionTimeout)) { try await s.acquire() }
        // Permits returned after the close change nothing.
        s.release()
        await #expect(throws: BLEError.disconnected(.supervisionTimeout)) { try await s.acquire() }
    }
}
