import AsyncSupport

/// Waits, without blocking a thread, for a child process's exit status, with a limit (`Process` reports
/// the exit on a thread of its own through `terminationHandler`).
final class ExitWaiter: Sendable {
    private let queue = WaiterQueue<Int32?, Int32>(nil)

    /// The process exited with `status` (from `terminationHandler`).
    func exited(_ status: Int32) {
        queue.withLock { exit, waiters in
            exit = status
            waiters.resumeAll(status)
        }
    }

    /// The exit status, or nil if the process has not exited within `timeout` (or the task was cancelled).
    func wait(timeout: Duration) async -> Int32? {
        switch await queue.wait(timeout: timeout, { exit, _ in exit }) {
        case .granted(let status): return status
        case .cancelled, .timedOut: return nil
        }
    }
}
