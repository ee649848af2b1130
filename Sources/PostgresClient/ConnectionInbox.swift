import AsyncSupport
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// What tasks hand to a connection's I/O thread, and the pipe that wakes it.
///
/// Any task may post; only the I/O thread takes. Once the thread has finished, posting a submission
/// fails it at once with the error the connection ended with, so nothing waits for a thread that is gone.
final class ConnectionInbox: Sendable {
    /// A request, and the ticket of the task that waits for its answer in `replies`.
    struct Submission: Sendable {
        var request: RequestScheduler.Request
        var statements: [PostgresStatement]
        var reply: WaitTicket
    }

    /// The tasks waiting for their requests' answers (every submission is answered exactly once: by
    /// the I/O thread, or here when the thread has finished).
    let replies = WaiterQueue<Void, Result<[PostgresRows], any Error>>()

    /// Answers a submission.
    func answer(_ sub: Submission, _ result: Result<[PostgresRows], any Error>) {
        replies.withLock { _, w in _ = w.resume(sub.reply, result) }
    }

    enum Message: Sendable {
        case submit(Submission)
        case cancel(UInt64)
        case serverCancelFinished
        case close
    }

    private struct State {
        var messages: [Message] = []
        /// Set when the I/O thread has finished: the error every later request gets.
        var finished: PostgresError?
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())
    /// Counts requests put on the wire (for tests and benchmarks: one request is one round trip).
    let requestsSent = Atomic<Int>(0)
    /// The read end of the wake-up pipe (the I/O thread polls it); `wake()` writes a byte to the other end.
    let wakeFD: Int32
    private let wakeWriteFD: Int32

    init() throws(PostgresError) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else {
            throw PostgresError(.connectFailed, operation: "create connection", message: "pipe failed: errno \(errno)")
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        wakeFD = fds[0]
        wakeWriteFD = fds[1]
    }

    deinit {
        _ = Glibc.close(wakeFD)
        _ = Glibc.close(wakeWriteFD)
    }

    func nextID() -> UInt64 {
        state.withLock { s in
            s.nextID &+= 1
            return s.nextID
        }
    }

    func post(_ message: Message) {
        let refused = state.withLock { s -> (Submission, PostgresError)? in
            if let finished = s.finished {
                if case .submit(let sub) = message { return (sub, finished) }
                return nil
            }
            s.messages.append(message)
            return nil
        }
        if let (sub, error) = refused {
            var e = error
            e.operation = sub.request.label
            answer(sub, .failure(e))
            return
        }
        wake()
    }

    /// Wakes the I/O thread. A full pipe already holds a wake-up, so a failed write is fine.
    func wake() {
        var one: UInt8 = 1
        _ = Glibc.write(wakeWriteFD, &one, 1)
    }

    /// Empties the pipe after a wake-up.
    func drainWake() {
        var buffer = [UInt8](repeating: 0, count: 256)
        while buffer.withUnsafeMutableBytes({ Glibc.read(wakeFD, $0.baseAddress, $0.count) }) > 0 {}
    }

    func take() -> [Message] {
        state.withLock { s in
            defer { s.messages.removeAll(keepingCapacity: true) }
            return s.messages
        }
    }

    var finishedError: PostgresError? { state.withLock { $0.finished } }

    /// Marks the thread finished and fails whatever is still waiting in the inbox.
    func finish(_ error: PostgresError) {
        let left = state.withLock { s -> [Message] in
            s.finished = error
            defer { s.messages = [] }
            return s.messages
        }
        for m in left {
            if case .submit(let sub) = m {
                var e = error
                e.operation = sub.request.label
                answer(sub, .failure(e))
            }
        }
    }
}
