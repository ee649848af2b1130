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
