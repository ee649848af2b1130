import AsyncSupport
import Synchronization

/// Waits, without blocking a thread, for a child process's exit status, with a limit (`Process`
/// reports the exit on a thread of its own through `terminationHandler`).
final class ExitWaiter: Sendable {
    private struct State {
        var status: Int32?
        var waiter: CheckedContinuation<Int32?, Never>?
        var timer: Timeouts.Token?
    }
    private let state = Mutex(State())

    func exited(_ status: Int32) {
        let (w, timer) = state.withLock { s -> (CheckedContinuation<Int32?, Never>?, Timeouts.Token?) in
            s.status = status
            defer { s.waiter = nil }
            return (s.waiter, s.timer)
        }
        if let timer { Timeouts.shared.cancel(timer) }
        w?.resume(returning: status)
    }

    func wait(timeout: Duration) async -> Int32? {
        await withCheckedContinuation { (c: CheckedContinuation<Int32?, Never>) in
            let done = state.withLock { s -> Int32? in
                if let status = s.status { return status }
                s.waiter = c
                return nil
            }
            if let done {
                c.resume(returning: done)
                return
            }
            let timer = Timeouts.shared.schedule(after: timeout) { [self] in
                let w = state.withLock { s -> CheckedContinuation<Int32?, Never>? in
                    defer { s.waiter = nil }
                    return s.waiter
                }
                w?.resume(returning: nil)
            }
            state.withLock { $0.timer = timer }
        }
    }
}
