/// An ordered queue of packets (PDUs) from any number of senders to one receiver: one direction of a link.
///
/// What `AsyncStream` does for a link, without its generic storage (looked up at run time, per element)
/// and its per-element bookkeeping: a PDU sent while the receiver waits goes straight to it; otherwise it
/// is buffered (unbounded: the link's credits bound what a sender may have in flight).
///
/// - Order: PDUs are received in the order `send` was called (across senders, in the order their sends
///   took the lock).
/// - `finish()`: later sends are refused (false); the receiver gets what was buffered, then nil.
/// - Cancellation: a receive waiting when its task is cancelled returns nil at once, and a receive by a
///   cancelled task returns nil without waiting; the channel is left as it was (a PDU sent afterwards
///   is kept for the next receive — nothing is lost).
/// - One receiver: a receive called while another one waits returns nil at once.
public final class PDUChannel: Sendable {
    private struct State {
        var buffer = FIFOBuffer<[UInt8]>()
        var finished = false
        /// Told each time the receiver starts waiting (tests observe the wait instead of sleeping).
        var waitObserver: (@Sendable () -> Void)?

        mutating func pop() -> [UInt8]? { buffer.removeFirst() }
    }

    /// The receiver's wait: granted a PDU, or nil at the end.
    private let queue = WaiterQueue<State, [UInt8]?>(State())

    public init() {}

    /// Queues a PDU for the receiver (or hands it over, if it waits). False once finished.
    @discardableResult
    public func send(_ pdu: [UInt8]) -> Bool {
        queue.withLock { s, waiters in
            guard !s.finished else { return false }
            if waiters.resumeFirst(pdu) == nil { s.buffer.append(pdu) }
            return true
        }
    }

    /// Refuses later sends; the receiver drains the buffer, then gets nil. Idempotent.
    public func finish() {
        queue.withLock { s, waiters in
            s.finished = true
            // A waiting receiver has nothing buffered (it would not wait otherwise).
            waiters.resumeAll(nil)
        }
    }

    /// Whether `finish()` was called.
    public var isFinished: Bool { queue.withLock { s, _ in s.finished } }

    /// The next PDU; nil once finished and drained, or when the receiving task is cancelled.
    public func receive() async -> [UInt8]? {
        // Without a ticket when something is buffered (or the receive ends at once).
        enum Now { case pdu([UInt8]), end, wait }
        let now: Now = queue.withLock { s, waiters in
            if let pdu = s.pop() { return .pdu(pdu) }
            return s.finished || !waiters.isEmpty ? .end : .wait
        }
        switch now {
        case .pdu(let pdu): return pdu
        case .end: return nil
        case .wait: break
        }
        var observer: (@Sendable () -> Void)?
        let ticket = queue.enqueue { s, waiters in
            if let pdu = s.pop() { return .some(pdu) }
            if s.finished || !waiters.isEmpty || Task.isCancelled { return .some(nil) }
            observer = s.waitObserver
            return nil
        }
        observer?()
        switch await queue.wait(ticket) {
        case .granted(let pdu): return pdu
        case .cancelled, .timedOut: return nil
        }
    }

    /// Calls `observer` each time the receiver starts waiting.
    public func observeWaiting(_ observer: @escaping @Sendable () -> Void) {
        queue.withLock { s, _ in s.waitObserver = observer }
    }

    /// The PDUs as a stream, for consumers that iterate (`ATTBearer.incoming`): each element is a
    /// `receive()`.
    public var stream: AsyncStream<[UInt8]> {
        AsyncStream(unfolding: { await self.receive() })
    }
}
