import Synchronization
import Testing
import AsyncSupport

@Suite(.timeLimit(.minutes(1))) struct TimeoutsTests {
    /// The names of the handlers that ran, in order; `wait(for:)` returns once `count` have (each
    /// handler wakes the waiter, which checks again; no polling).
    final class Fired: Sendable {
        private let queue = WaiterQueue<[String], Void>([])

        func fire(_ name: String) {
            queue.withLock { order, waiters in
                order.append(name)
                waiters.resumeAll(())
            }
        }

        func wait(for count: Int) async -> [String] {
            await wait { $0.count >= count }
        }

        /// Waits until the names that ran satisfy `done`; returns them in order.
        func wait(until done: @escaping @Sendable ([String]) -> Bool) async -> [String] {
            while true {
                // Granted at once when `done` holds, else by the next handler.
                let outcome = await queue.wait { order, _ in done(order) ? () : nil }
                let order = queue.withLock { order, _ in order }
                if done(order) { return order }
                if case .cancelled = outcome { return order }
            }
        }
    }

    @Test func handlersRunAfterTheirLimitInDeadlineOrderAndCancelledOnesNever() async {
        let timeouts = Timeouts()
        let fired = Fired()
        let clock = ContinuousClock()
        let start = clock.now
        _ = timeouts.schedule(after: .milliseconds(300)) { fired.fire("long") }
        let cancelled = timeouts.schedule(after: .milliseconds(20)) { fired.fire("cancelled") }
        // Shorter than the driver's current target: re-arms it.
        _ = timeouts.schedule(after: .milliseconds(50)) { fired.fire("short") }
        _ = timeouts.schedule(after: .milliseconds(50)) { fired.fire("short 2") }
        timeouts.cancel(cancelled)
        let order = await fired.wait(for: 3)
        #expect(order == ["short", "short 2", "long"])
        #expect(clock.now - start >= .milliseconds(300))
    }

    @Test func manyCancelledTimeoutsLeaveNothingBehind() async {
        let timeouts = Timeouts()
        let fired = Fired()
        for _ in 0..<10_000 {
            let t = timeouts.schedule(after: .seconds(30)) { fired.fire("never") }
            timeouts.cancel(t)
        }
        _ = timeouts.schedule(after: .milliseconds(10)) { fired.fire("last") }
        #expect(await fired.wait(for: 1) == ["last"])
    }
}

/// Tokens address their entries directly: cancelling in any order, across limits and after the queues
/// were compacted, cancels exactly the right waits.
///
/// A handler already due may still run just after `cancel` returns (the contract says so); on a loaded
/// machine the cancelling loop below can outlast the shortest limits. So the test records, for each
/// cancelled wait, whether its cancel returned before its deadline could have passed: such a wait must
/// never run. Nothing depends on how fast the loop goes.
@Suite(.timeLimit(.minutes(1))) struct TimeoutsTokenTests {
    @Test func cancellingInAnyOrderAcrossLimitsLeavesExactlyTheOthers() async {
        let timeouts = Timeouts()
        let fired = TimeoutsTests.Fired()
        var kept: Set<String> = []
        var tokens: [(name: String, token: Timeouts.Token, due: ContinuousClock.Instant)] = []
        // Many limits (more than are kept when empty) and enough waits per limit to compact the queues.
        for round in 0..<2_500 {
            let limit = Duration.milliseconds(20 + round % 20)
            let name = "\(round)"
            // The deadline is at least this (the entry takes the time after this line).
            let due = ContinuousClock.now + limit
            tokens.append((name, timeouts.schedule(after: limit) { fired.fire(name) }, due))
        }
        // Cancel all but every 500th, from the back and from the front alternately.
        var order = Array(tokens.indices)
        order = order.enumerated().map { $0.offset % 2 == 0 ? order[$0.offset / 2] : order[order.count - 1 - $0.offset / 2] }
        var cancelledInTime: Set<String> = []
        for i in order {
            if i % 500 == 0 {
                kept.insert(tokens[i].name)
            } else {
                timeouts.cancel(tokens[i].token)
                if ContinuousClock.now < tokens[i].due { cancelledInTime.insert(tokens[i].name) }
            }
        }
        // A token cancelled twice, or after it fired, changes nothing.
        timeouts.cancel(tokens[1].token)
        let expected = kept
        let got = await fired.wait { names in expected.isSubset(of: Set(names)) }
        #expect(Set(got).isDisjoint(with: cancelledInTime))
        #expect(got.count == Set(got).count, "a handler ran twice")
        timeouts.cancel(tokens[0].token)
        _ = timeouts.schedule(after: .milliseconds(5)) { fired.fire("after") }
        #expect(await fired.wait { $0.contains("after") }.filter { $0 == "after" }.count == 1)
    }
}
