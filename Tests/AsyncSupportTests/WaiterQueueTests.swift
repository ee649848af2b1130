import Synchronization
import Testing
import AsyncSupport

/// The one waiter queue: who is granted what (asserted through tickets and values, never through which
/// task runs first), cancellation before and after a grant, time limits, every waiter ended exactly once,
/// and many waiters at once. Nothing here sleeps or asserts a duration.
@Suite(.timeLimit(.minutes(1)))
struct WaiterQueueTests {
    @Test func grantsGoToTheOldestWaiterAndEachWaiterGetsWhatItWasGranted() async {
        let queue = WaiterQueue<Void, Int>()
        let tickets = (0..<5).map { _ in queue.enqueue() }
        #expect(tickets == tickets.sorted())
        #expect(queue.count == 5)
        // Tasks wait on the tickets in any order: what each gets is decided by its ticket alone.
        let waits = tickets.reversed().map { t in Task { (t, await queue.wait(t)) } }
        var grantedTo: [WaitTicket] = []
        for value in 0..<5 {
            let ticket = queue.withLock { _, waiters in waiters.resumeFirst(value) }
            grantedTo.append(ticket!)
        }
        #expect(grantedTo == tickets)
        #expect(queue.count == 0)
        for w in waits {
            let (ticket, outcome) = await w.value
            #expect(outcome == .granted(tickets.firstIndex(of: ticket)!))
        }
    }

    @Test func aGrantBeforeTheWaitStartsIsKeptForIt() async {
        let queue = WaiterQueue<Void, String>()
        let ticket = queue.enqueue()
        #expect(queue.withLock { _, w in w.resume(ticket, "early") })
        #expect(queue.count == 0)
        #expect(await queue.wait(ticket) == .granted("early"))
    }

    @Test func enqueueingWithAValueReadyGrantsItWithoutJoiningTheQueue() async {
        let queue = WaiterQueue<Int, Int>(7)
        let outcome = await queue.wait { state, waiters in
            #expect(waiters.isEmpty)
            state -= 1
            return state
        }
        #expect(outcome == .granted(6))
        #expect(queue.count == 0)
    }

    @Test func cancellingAWaitingTaskRemovesItAndTheNextWaiterGetsTheGrant() async {
        let queue = WaiterQueue<Void, Int>()
        let first = queue.enqueue(), second = queue.enqueue()
        let cancelled = Task { await queue.wait(first) }
        let other = Task { await queue.wait(second) }
        cancelled.cancel()
        #expect(await cancelled.value == .cancelled)
        #expect(queue.withLock { _, w in w.tickets } == [second])
        #expect(queue.withLock { _, w in w.resumeFirst(1) } == second)
        #expect(await other.value == .granted(1))
        // The cancelled ticket is gone: granting it does nothing.
        #expect(!queue.withLock { _, w in w.resume(first, 2) })
    }

    @Test func aTaskCancelledBeforeItWaitsEndsCancelledAndLeavesTheQueue() async {
        let queue = WaiterQueue<Void, Int>()
        let gate = OneShot<Void>()
        let task = Task { () -> WaitOutcome<Int> in
            _ = await gate.wait()
            return await queue.wait()
        }
        task.cancel()
        gate.fulfill(())
        #expect(await task.value == .cancelled)
        #expect(queue.count == 0)
    }

    @Test func aGrantMadeBeforeTheCancellationWins() async {
        let queue = WaiterQueue<Void, Int>()
        let ticket = queue.enqueue()
        let gate = OneShot<Void>()
        let task = Task { () -> WaitOutcome<Int> in
            _ = await gate.wait()
            return await queue.wait(ticket)
        }
        queue.withLock { _, w in _ = w.resume(ticket, 42) }
        task.cancel()
        gate.fulfill(())
        // The grant came first: the waiter has the value (a permit is never lost to a late cancellation).
        #expect(await task.value == .granted(42))
    }

    @Test func aWaitThatIgnoresCancellationGoesOnUntilItIsGranted() async {
        let queue = WaiterQueue<Void, Int>()
        let ticket = queue.enqueue()
        let task = Task { await queue.wait(ticket, cancellation: .isIgnored) }
        task.cancel()
        #expect(queue.withLock { _, w in w.contains(ticket) })
        queue.withLock { _, w in _ = w.resume(ticket, 5) }
        #expect(await task.value == .granted(5))
    }

    @Test func aWaitPastItsLimitEndsTimedOutAndLeavesTheQueue() async {
        let queue = WaiterQueue<Void, Int>()
        let ticket = queue.enqueue()
        let later = queue.enqueue()
        #expect(await queue.wait(ticket, timeout: .milliseconds(5)) == .timedOut)
        #expect(queue.withLock { _, w in w.tickets } == [later])
        #expect(!queue.withLock { _, w in w.resume(ticket, 1) })
        // A wait granted within its limit is granted (its limit no longer matters).
        let granted = Task { await queue.wait(later, timeout: .seconds(30)) }
        queue.withLock { _, w in _ = w.resume(later, 3) }
        #expect(await granted.value == .granted(3))
    }

    @Test func resumingEveryoneEndsEveryWaitOnce() async {
        let queue = WaiterQueue<Void, Int>()
        let tickets = (0..<10).map { _ in queue.enqueue() }
        let waits = tickets.map { t in Task { await queue.wait(t) } }
        #expect(queue.withLock { _, w in w.resumeAll(9) } == 10)
        #expect(queue.withLock { _, w in w.resumeAll(8) } == 0)
        for w in waits { #expect(await w.value == .granted(9)) }
    }

    /// Grants, cancellations and time limits race on every waiter: each ends exactly once, and a grant
    /// the queue accepted (`resume` returned true) is exactly the outcome its waiter saw.
    @Test func racingGrantsCancellationsAndLimitsEndEveryWaiterExactlyOnce() async {
        let queue = WaiterQueue<Void, Int>()
        let rounds = 2_000
        final class Accepted: Sendable { let grants = Mutex<[Int: Bool]>([:]) }
        let accepted = Accepted()
        let outcomes = await withTaskGroup(of: (Int, WaitOutcome<Int>).self) { group in
            for i in 0..<rounds {
                let ticket = queue.enqueue()
                let waiter = Task { await queue.wait(ticket, timeout: i % 3 == 0 ? .milliseconds(1) : nil) }
                group.addTask {
                    if i % 2 == 0 { waiter.cancel() }
                    let ok = queue.withLock { _, w in w.resume(ticket, i) }
                    accepted.grants.withLock { $0[i] = ok }
                    if i % 2 == 1 { waiter.cancel() }
                    return (i, await waiter.value)
                }
            }
            var all: [Int: WaitOutcome<Int>] = [:]
            for await (i, o) in group { all[i] = o }
            return all
        }
        #expect(outcomes.count == rounds)
        let grants = accepted.grants.withLock { $0 }
        for i in 0..<rounds {
            if grants[i] == true {
                #expect(outcomes[i] == .granted(i))
            } else {
                #expect(outcomes[i] == .cancelled || outcomes[i] == .timedOut)
            }
        }
        #expect(queue.count == 0)
    }

    /// A thousand tasks wait at once; grants come from several tasks at once. Every waiter gets exactly
    /// one value and every value goes to exactly one waiter.
    @Test func aThousandConcurrentWaitersEachGetOneGrant() async {
        let queue = WaiterQueue<Void, Int>()
        let n = 1_000
        let tickets = (0..<n).map { _ in queue.enqueue() }
        let waits = Task {
            await withTaskGroup(of: WaitOutcome<Int>.self) { group in
                for t in tickets { group.addTask { await queue.wait(t) } }
                var got: [WaitOutcome<Int>] = []
                for await o in group { got.append(o) }
                return got
            }
        }
        let granted = await withTaskGroup(of: [WaitTicket].self) { group in
            for g in 0..<4 {
                group.addTask {
                    (0..<(n / 4)).compactMap { i in queue.withLock { _, w in w.resumeFirst(g * n / 4 + i) } }
                }
            }
            var all: [WaitTicket] = []
            for await part in group { all += part }
            return all
        }
        #expect(granted.count == n)
        #expect(Set(granted) == Set(tickets))
        let values = await waits.value.compactMap { o -> Int? in
            if case .granted(let v) = o { return v }
            return nil
        }
        #expect(values.count == n)
        #expect(Set(values) == Set(0..<n))
        #expect(queue.count == 0)
    }
}
