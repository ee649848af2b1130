import BLE

/// Host-to-controller ACL flow control (Core v5.4 Vol 4 Part E 4.1.1) as a value state machine.
///
/// L2CAP frames are fragmented to the controller's buffer size and each fragment is handed to the
/// controller only with a credit (one free controller buffer). Credits come back with Number Of
/// Completed Packets, or when a connection closes (its in-flight packets are flushed). Each credit goes
/// to the connection with the fewest packets with the controller (connections take turns among
/// equals), one fragment at a time: one bulk transfer cannot starve the others, and a link whose
/// packets leave slowly cannot hold the controller's buffers while 15 others wait. A queued frame's
/// sender is told (`.sent`) once its last fragment is with the controller, which is how a sender
/// waits for room (write-without-response backpressure).
public struct ACLFlowControl: Sendable {
    public enum Action: Sendable, Equatable {
        /// Send this ACL packet (without H4 indicator) to the controller.
        case transmit(ACLDataPacket)
        /// Every fragment of the frame with this token is with the controller.
        case sent(token: UInt64)
        /// The frame with this token will never be sent (its connection closed).
        case failed(token: UInt64)
    }

    private struct Pending: Sendable {
        var token: UInt64
        var fragments: [ACLDataPacket]
        var next = 0
    }

    /// Largest ACL payload the controller accepts.
    public let maxFragment: Int
    /// Controller buffers in total.
    public let totalCredits: Int
    /// Controller buffers free now.
    public private(set) var credits: Int
    private var queues: [UInt16: [Pending]] = [:]
    private var rotation: [UInt16] = []
    private var inFlight: [UInt16: Int] = [:]

    public init(maxFragment: Int, credits: Int) {
        self.maxFragment = max(1, maxFragment)
        self.totalCredits = max(1, credits)
        self.credits = max(1, credits)
    }

    /// Packets with the controller and not yet completed, for `handle`.
    public func inFlight(_ handle: UInt16) -> Int { inFlight[handle, default: 0] }
    /// Frames waiting (whole or partly sent) for `handle`.
    public func queued(_ handle: UInt16) -> Int { queues[handle]?.count ?? 0 }

    /// Splits an L2CAP frame into ACL fragments of at most `maxFragment` bytes.
    public func fragments(handle: UInt16, frame: [UInt8]) -> [ACLDataPacket] {
        var out: [ACLDataPacket] = []
        var offset = 0
        repeat {
            let end = min(frame.count, offset + maxFragment)
            out.append(ACLDataPacket(handle: handle, boundary: offset == 0 ? .firstNonFlushable : .continuation,
                                     data: Array(frame[offset..<end])))
            offset = end
        } while offset < frame.count
        return out
    }

    /// Queues one L2CAP frame for `handle`.
    public mutating func enqueue(token: UInt64, handle: UInt16, frame: [UInt8]) -> [Action] {
        if queues[handle] == nil {
            queues[handle] = []
            // A connection not yet served goes first; served ones move to the back.
            rotation.insert(handle, at: 0)
        }
        queues[handle, default: []].append(Pending(token: token, fragments: fragments(handle: handle, frame: frame)))
        return pump()
    }

    /// The controller finished `count` packets of `handle`. Counts for unknown handles or beyond what
    /// is in flight are ignored (hostile or confused controller) and reported with `ignored`.
    public mutating func completed(handle: UInt16, count: Int) -> (actions: [Action], ignored: Int) {
        let outstanding = inFlight[handle, default: 0]
        let accepted = max(0, min(count, outstanding))
        if accepted > 0 {
            inFlight[handle] = outstanding - accepted
            credits = min(totalCredits, credits + accepted)
        }
        return (pump(), count - accepted)
    }

    /// Removes a frame not yet started (its sender gave up). Returns false when it is already partly
    /// or wholly with the controller (it will then complete normally).
    public mutating func cancel(token: UInt64) -> Bool {
        for (handle, queue) in queues {
            if let i = queue.firstIndex(where: { $0.token == token }) {
                guard queue[i].next == 0 else { return false }
                queues[handle]?.remove(at: i)
                return true
            }
        }
        return false
    }

    /// A connection closed: its in-flight packets are flushed (their credits return) and its queued
    /// frames fail.
    public mutating func connectionClosed(handle: UInt16) -> [Action] {
        var actions: [Action] = []
        credits = min(totalCredits, credits + inFlight[handle, default: 0])
        inFlight[handle] = nil
        for p in queues[handle] ?? [] { actions.append(.failed(token: p.token)) }
        queues[handle] = nil
        rotation.removeAll { $0 == handle }
        return actions + pump()
    }

    private mutating func pump() -> [Action] {
        var actions: [Action] = []
        while credits > 0 {
            // Of the connections with something to send, the one with the fewest packets with the
            // controller goes next (the first in turn among equals): a link whose packets leave slowly
            // (a long connection interval, a slow peer) cannot hold every buffer while others wait.
            var next: Int?
            var fewest = Int.max
            for (i, handle) in rotation.enumerated() where !(queues[handle]?.isEmpty ?? true) {
                let n = inFlight[handle, default: 0]
                if n < fewest {
                    fewest = n
                    next = i
                }
            }
            guard let i = next else { break }
            let handle = rotation.remove(at: i)
            rotation.append(handle)
            guard var queue = queues[handle], !queue.isEmpty else { continue }
            let fragment = queue[0].fragments[queue[0].next]
            queue[0].next += 1
            credits -= 1
            inFlight[handle, default: 0] += 1
            actions.append(.transmit(fragment))
            if queue[0].next == queue[0].fragments.count {
                actions.append(.sent(token: queue[0].token))
                queue.removeFirst()
            }
            queues[handle] = queue
        }
        return actions
    }
}
