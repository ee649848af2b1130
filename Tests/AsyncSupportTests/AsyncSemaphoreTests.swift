import Synchronization
import Testing
import AsyncSupport

/// Credits and slots: free permits taken at once, permits granted to waiters in the order they came,
/// cancellation and close. Waits are observed (`observeWaiters`), never slept on; what is asserted is
/// who was granted a permit, never which task happened to run first.
@Suite(.timeLimit(.minutes(1)))
struct AsyncSemaphoreTests {
    struct Closed: Error, Equatable { var why: String }

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

    /// Three tasks wait, in a known order (each is seen waiting before the next starts). Permits are
    /// returned one at a time, and each time exactly one waiter can hold one: the one it was granted
    /// to reports, and that is the oldest waiter left. (Three permits returned at once would let three
    /// tasks resume in whatever order the scheduler runs them: that order says nothing about grants.)
    @Test func permitsAreGrantedToWaitersInTheOrderTheyCame() async throws {
        let (s, waiting) = observed(permits: 0)
        let granted = PDUChannel()
        var tasks: [Task<Void, any Error>] = []
        for i in 0..<5 {
            tasks.append(Task {
                try await s.acquire()
                granted.send([UInt8(i)])
            })
            await waiting(i + 1)
        }
        var order: [UInt8] = []
        for _ in 0..<5 {
            s.release()
            order += await granted.receive() ?? []
        }
        for t in tasks { try await t.value }
        #expect(order == [0, 1, 2, 3, 4])
        #expect(s.available == 0)
    }

    @Test func aReturnedPermitGoesToAWaiterNotToANewcomer() async throws {
        let (s, waiting) = observed(permits: 0)
        let waiter = Task { try await s.acquire() }
        await waiting(1)
        s.release()
        // The permit is the waiter's already: a newcomer finds none free.
        #expect(!s.tryAcquire())
        try await waiter.value
        #expect(s.available == 0)
    }

    @Test func aCancelledWaiterLeavesTheQueueAndTheNextOneGetsThePermit() async throws {
        let (s, waiting) = observed(permits: 0)
        let first = Task { try await s.acquire() }
        await waiting(1)
        let second = Task { try await s.acquire() }
        await waiting(2)
        first.cancel()
        await #expect(throws: CancellationError.self) { try await first.value }
        s.release()
        try await second.value
        #expect(s.available == 0)
    }

    @Test func aCancelledTaskDoesNotTakeAFreePermit() async throws {
        let s = AsyncSemaphore(permits: 1, cancellationError: Closed(why: "cancelled"))
        let gate = OneShot<Void>()
        let t = Task { () async throws in
            _ = await gate.wait()
            try await s.acquire()
        }
        t.cancel()
        gate.fulfill(())
        await #expect(throws: Closed(why: "cancelled")) { try await t.value }
        #expect(s.available == 1)
    }

    @Test func closingFailsEveryWaiterAndEveryLaterAcquire() async throws {
        let (s, waiting) = observed(permits: 0)
        let w = Task { try await s.acquire() }
        await waiting(1)
        s.close(Closed(why: "link lost"))
        await #expect(throws: Closed(why: "link lost")) { try await w.value }
        await #expect(throws: Closed(why: "link lost")) { try await s.acquire() }
        // Permits returned after the close change nothing.
        s.release()
        await #expect(throws: Closed(why: "link lost")) { try await s.acquire() }
        #expect(!s.tryAcquire())
    }

    /// Many tasks contend for a few permits: every acquire is granted exactly once, never more holders
    /// than permits, and every permit comes back.
    @Test func manyTasksShareFewPermitsWithoutLosingOne() async throws {
        let s = AsyncSemaphore(permits: 3)
        final class Holders: Sendable { let counts = Mutex((now: 0, most: 0, total: 0)) }
        let holders = Holders()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<500 {
                group.addTask {
                    try await s.acquire()
                    holders.counts.withLock { h in
                        h.now += 1
                        h.most = max(h.most, h.now)
                        h.total += 1
                    }
                    await Task.yield()
                    holders.counts.withLock { $0.now -= 1 }
                    s.release()
                }
            }
            try await group.waitForAll()
        }
        let h = holders.counts.withLock { $0 }
        #expect(h.total == 500)
        #expect(h.most <= 3)
        #expect(s.available == 3)
        #expect(s.usage.current == 0)
        #expect(s.usage.peak <= 3)
    }
}
