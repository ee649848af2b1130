import Synchronization

/// An ordered queue of PDUs from any number of senders to one receiver: one direction of a link.
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
package final class PDUChannel: Sendable {
    private struct State {
        var buffer: [[UInt8]] = []
        var head = 0
        var waiter: (id: UInt64, continuation: UnsafeContinuation<[UInt8]?, Never>)?
        var finished = false
        /// Told each time the receiver starts waiting (tests observe the wait instead of sleeping).
        var waitObserver: (@Sendable () -> Void)?

        mutating func pop() -> [UInt8]? {
            guard head < buffer.count else { return nil }
            let pdu = buffer[head]
            head += 1
            if head == buffer.count {
                buffer.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 64, head * 2 >= buffer.count {
                buffer.removeFirst(head)
                head = 0
            }
            return pdu
        }
    }

    private let state = Mutex(State())
    private let receives = Atomic<UInt64>(0)

    package init() {}

    /// Queues a PDU for the receiver (or hands it over, if it waits). False once finished.
    @discardableResult
    package func send(_ pdu: [UInt8]) -> Bool {
        let handOver: UnsafeContinuation<[UInt8]?, Never>?? = state.withLock { s in
            guard !s.finished else { return .none }
            if let w = s.waiter {
                s.waiter = nil
                return .some(w.continuation)
            }
            s.buffer.append(pdu)
            return .some(nil)
        }
        guard let handOver else { return false }
        handOver?.resume(returning: pdu)
        return true
    }

    /// Refuses later sends; the receiver drains the buffer, then gets nil. Idempotent.
    package func finish() {
        let waiter = state.withLock { s -> UnsafeContinuation<[UInt8]?, Never>? in
            s.finished = true
            defer { s.waiter = nil }
            return s.waiter?.continuation
        }
        // A waiting receiver has nothing buffered (it would not wait otherwise).
        waiter?.resume(returning: nil)
    }

    /// Whether `finish()` was called.
    package var isFinished: Bool { state.withLock { $0.finished } }

    /// The next PDU; nil once finished and drained, or when the receiving task is cancelled.
    package func receive() async -> [UInt8]? {
        // Without a wait when something is buffered.
        enum Now { case pdu([UInt8]), end, wait }
        let now: Now = state.withLock { s in
            if let pdu = s.pop() { return .pdu(pdu) }
            return s.finished || s.waiter != nil ? .end : .wait
        }
        switch now {
        case .pdu(let pdu): return pdu
        case .end: return nil
        case .wait: break
        }
        let id = receives.add(1, ordering: .relaxed).newValue
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (c: UnsafeContinuation<[UInt8]?, Never>) in
                let (immediate, observer): ([UInt8]??, (@Sendable () -> Void)?) = state.withLock { s in
                    if let pdu = s.pop() { return (.some(pdu), nil) }
                    if s.finished || s.waiter != nil || Task.isCancelled { return (.some(nil), nil) }
                    s.waiter = (id, c)
                    return (.none, s.waitObserver)
                }
                if let immediate { c.resume(returning: immediate) }
                observer?()
            }
        } onCancel: {
            let c = state.withLock { s -> UnsafeContinuation<[UInt8]?, Never>? in
                guard let w = s.waiter, w.id == id else { return nil }
                s.waiter = nil
                return w.continuation
            }
            c?.resume(returning: nil)
        }
    }

    /// Calls `observer` each time the receiver starts waiting.
    package func observeWaiting(_ observer: @escaping @Sendable () -> Void) {
        state.withLock { $0.waitObserver = observer }
    }

    /// The PDUs as a stream, for consumers that iterate (`ATTBearer.incoming`): each element is a
    /// `receive()`.
    package var stream: AsyncStream<[UInt8]> {
        AsyncStream(unfolding: { await self.receive() })
    }
}
