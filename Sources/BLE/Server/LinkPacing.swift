import AsyncSupport
import Synchronization

/// The connection events of a link: one every `interval` from `anchor` (Vol 6 Part B 4.5.1). On a real
/// radio a PDU queued between two events goes out at the next one, whichever way it travels; an ATT
/// request and its response therefore cost at least two intervals when the peer's host answers in the
/// following event.
public struct ConnectionEvents: Sendable, Equatable {
    public var anchor: ContinuousClock.Instant
    public var interval: Duration

    public init(anchor: ContinuousClock.Instant, interval: Duration) {
        self.anchor = anchor
        self.interval = max(.microseconds(1), interval)
    }

    /// The first event strictly after `instant`.
    public func next(after instant: ContinuousClock.Instant) -> ContinuousClock.Instant {
        guard instant >= anchor else { return anchor }
        let elapsed = instant - anchor
        // Whole intervals gone by, computed in integers (no drift over long links).
        let n = Self.nanoseconds(elapsed) / Self.nanoseconds(interval)
        return anchor + interval * Int(n + 1)
    }

    static func nanoseconds(_ d: Duration) -> Int64 {
        let (s, atto) = d.components
        return s * 1_000_000_000 + atto / 1_000_000_000
    }
}

/// Delivers PDUs into a channel at the connection event after each was sent, in order: one direction of
/// a paced `InMemoryLink`. A task sleeps until the first event that has PDUs due and hands them all over
/// at once (several PDUs share an event, as they do on a radio); it ends when the link closes.
final class PacedDelivery: Sendable {
    private struct State {
        var queue: [(due: ContinuousClock.Instant, pdu: [UInt8])] = []
        var head = 0
        var closed = false

        /// Something to do for the delivery task: PDUs queued, or the end.
        var isReady: Bool { closed || head < queue.count }
    }

    private let events: ConnectionEvents
    /// The delivery task waits here while nothing is queued; a send or the close wakes it.
    private let state = WaiterQueue<State, Void>(State())
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(events: ConnectionEvents, into output: PDUChannel) {
        self.events = events
        let t = Task { [weak self] in
            while let batch = await self?.nextBatch() {
                for pdu in batch { output.send(pdu) }
            }
        }
        task.withLock { $0 = t }
    }

    /// Queues a PDU for the next connection event; false once closed.
    @discardableResult
    func send(_ pdu: [UInt8]) -> Bool {
        let due = events.next(after: .now)
        return state.withLock { s, waiters in
            guard !s.closed else { return false }
            s.queue.append((due, pdu))
            waiters.resumeAll(())
            return true
        }
    }

    /// Stops delivering; PDUs still queued are dropped (the link is gone).
    func close() {
        state.withLock { s, waiters in
            s.closed = true
            s.queue = []
            s.head = 0
            waiters.resumeAll(())
        }
        task.withLock { $0?.cancel() }
    }

    /// Waits for queued PDUs and their event; nil when closed.
    private func nextBatch() async -> [[UInt8]]? {
        while true {
            enum Next { case closed, wait, due(ContinuousClock.Instant) }
            let next: Next = state.withLock { s, _ in
                if s.closed { return .closed }
                return s.head < s.queue.count ? .due(s.queue[s.head].due) : .wait
            }
            switch next {
            case .closed:
                return nil
            case .wait:
                guard case .granted = await state.wait({ s, _ in s.isReady ? () : nil }) else { return nil }
            case .due(let due):
                do { try await Task.sleep(until: due, clock: .continuous) } catch { return nil }
                let now = ContinuousClock.now
                let batch: [[UInt8]]? = state.withLock { s, _ in
                    guard !s.closed else { return nil }
                    var out: [[UInt8]] = []
                    while s.head < s.queue.count, s.queue[s.head].due <= now {
                        out.append(s.queue[s.head].pdu)
                        s.head += 1
                    }
                    if s.head > 64, s.head * 2 > s.queue.count {
                        s.queue.removeFirst(s.head)
                        s.head = 0
                    }
                    return out
                }
                guard let batch else { return nil }
                if !batch.isEmpty { return batch }
            }
        }
    }
}
