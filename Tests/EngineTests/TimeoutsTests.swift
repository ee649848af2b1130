import Synchronization
import Testing
import BLE

@Suite(.timeLimit(.minutes(1))) struct TimeoutsTests {
    /// Waits for `fired` to reach `count` (resumed by the handlers themselves, no polling).
    final class Fired: Sendable {
        let state = Mutex<(order: [String], waiter: CheckedContinuation<Void, Never>?, want: Int)>(([], nil, 0))

        func fire(_ name: String) {
            let w = state.withLock { s -> CheckedContinuation<Void, Never>? in
                s.order.append(name)
                guard s.order.count >= s.want, let w = s.waiter else { return nil }
                s.waiter = nil
                return w
            }
            w?.resume()
        }

        func wait(for count: Int) async -> [String] {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.order.count >= count { return true }
                    s.want = count
                    s.waiter = c
                    return false
                }
                if now { c.resume() }
            }
            return state.withLock { $0.order }
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
@Suite(.timeLimit(.minutes(1))) struct TimeoutsTokenTests {
    @Test func cancellingInAnyOrderAcrossLimitsLeavesExactlyTheOthers() async {
        let timeouts = Timeouts()
        let fired = TimeoutsTests.Fired()
        var kept: [String] = []
        var tokens: [(String, Timeouts.Token)] = []
        // Many limits (more than are kept when empty) and enough waits per limit to compact the queues.
        for round in 0..<2_500 {
            let limit = Duration.milliseconds(20 + round % 20)
            let name = "\(round)"
            tokens.append((name, timeouts.schedule(after: limit) { fired.fire(name) }))
        }
        // Cancel all but every 500th, from the back and from the front alternately.
        var order = Array(tokens.indices)
        order = order.enumerated().map { $0.offset % 2 == 0 ? order[$0.offset / 2] : order[order.count - 1 - $0.offset / 2] }
        for i in order {
            if i % 500 == 0 { kept.append(tokens[i].0) } else { timeouts.cancel(tokens[i].1) }
        }
        // A token cancelled twice, or after it fired, changes nothing.
        timeouts.cancel(tokens[1].1)
        let got = await fired.wait(for: kept.count)
        #expect(Set(got) == Set(kept))
        #expect(got.count == kept.count)
        timeouts.cancel(tokens[0].1)
        _ = timeouts.schedule(after: .milliseconds(5)) { fired.fire("after") }
        #expect(await fired.wait(for: kept.count + 1).last == "after")
    }
}
