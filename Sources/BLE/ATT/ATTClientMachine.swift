/// The client role of ATT over one bearer as a value (Vol 3 Part F 3.3): callers' requests and the
/// peer's PDUs in, what to send, which waits end and which timer to arm out. No clock, no I/O, no
/// tasks: `ATTClient` executes the actions (bearer sends, the transaction timer, the callers'
/// continuations) and feeds back what happened.
///
/// - One outstanding request at a time (3.3.2): requests take turns in FIFO order. A caller is told
///   `transmit` when its turn comes; it sends, then reports `sent` (or `notSent`). Its transaction
///   timer is armed once the request is with the bearer.
/// - The transaction timer (3.3.3): when it expires the request fails with `timeout`, and the bearer is
///   dead — every waiting and later request fails with `disconnected(.attTimeout)` and the bearer is
///   closed.
/// - The peer's PDUs are classified by `ATTInbound`: the matching response ends the transaction; a
///   malformed, oversized, wrong-opcode response or an Error Response naming another request fails it;
///   a response with nothing outstanding (or a second one) is stray. Notifications and indications are
///   delivered in order, between a request and its response too; every indication is confirmed.
/// - The MTU is exchanged at most once (3.4.2).
/// - A caller that gives up while waiting for its turn leaves the queue; one that gives up after its
///   request went out is answered `cancelled` at once, but the turn stays taken until the response (or
///   the timer) ends the transaction, since ATT allows no second request before the first is answered.
///
/// `finish` is only ever addressed to a caller that waits (for its turn or for its answer): a caller
/// that is sending learns what happened to its transaction when it reports `sent`.
struct ATTClientMachine: Sendable {
    typealias RequestID = UInt64

    enum Event: Sendable, Equatable {
        /// A caller wants `pdu` (a request) answered.
        case request(RequestID, ATTPDU)
        /// A caller wants the MTU exchanged with `preferred` (already capped to what this side takes).
        case exchangeMTU(RequestID, preferred: Int)
        /// The caller's request is with the bearer.
        case sent(RequestID)
        /// The caller's request did not go out: the bearer refused it, or the caller gave up first.
        case notSent(RequestID)
        /// The caller gave up (its task was cancelled) and sends nothing more: waiting for its turn, it
        /// leaves the queue; with its turn, it passes it on; with its request out, it keeps the turn until
        /// the transaction ends.
        case cancel(RequestID)
        /// A PDU from the peer.
        case received([UInt8])
        /// A transaction timer expired.
        case timerExpired(RequestID)
        /// The bearer is gone (its incoming stream ended, or the owner ends the client).
        case fail(BLEError)
    }

    /// What a waiting caller gets.
    enum Outcome: Sendable, Equatable {
        /// The response to its request.
        case response(ATTPDU)
        /// The ATT_MTU after its exchange (or without one, when it was exchanged before).
        case mtu(Int)
        case failed(BLEError)
    }

    enum Action: Sendable, Equatable {
        /// The caller's turn: it sends these bytes and reports `sent` or `notSent`.
        case transmit(RequestID, [UInt8])
        /// The caller's wait ends.
        case finish(RequestID, Outcome)
        /// The transaction timer of a request that went out.
        case arm(RequestID, Duration)
        case disarm(RequestID)
        /// A notification or indication for the owner, in arrival order.
        case deliver(ATTValueEvent)
        /// A PDU that answers the peer (a confirmation, Request Not Supported); nobody waits for it.
        case reply([UInt8])
        /// The bearer is dead: close it.
        case closeBearer(DisconnectReason)
        /// The ATT_MTU changed.
        case mtu(Int)
        case log(String)
    }

    /// Counters of surprising input.
    struct Statistics: Sendable, Equatable {
        /// Requests that went out (ATT round trips), including those that failed.
        var requestsSent = 0
        /// Responses dropped because no request was waiting for them.
        var strayResponses = 0
        /// Incoming PDUs dropped as malformed or oversized, and requests from the peer.
        var droppedPDUs = 0
    }

    let transactionTimeout: Duration
    private(set) var mtu = ATTClient.defaultMTU
    private(set) var statistics = Statistics()
    /// Why the bearer is unusable, once it is.
    private(set) var closed: BLEError?

    private enum Kind: Equatable {
        case request
        /// An Exchange MTU Request with our Rx MTU.
        case mtu(Int)
    }

    private struct Queued {
        var id: RequestID
        var opcode: ATTOpcode
        var bytes: [UInt8]
        var kind: Kind
    }

    private struct Transaction {
        var id: RequestID
        var opcode: ATTOpcode
        var kind: Kind
        /// False while the caller is sending; true once the request is with the bearer (timer armed).
        var out = false
        /// The caller gave up after its request went out (answered `cancelled`); the turn stays taken until
        /// the transaction ends.
        var abandoned = false
        /// How the transaction ended while the caller was still sending.
        var ended: Outcome?
    }

    private var current: Transaction?
    private var queue: [Queued] = []
    private var head = 0
    private var mtuAsked = false

    init(transactionTimeout: Duration = .seconds(30)) {
        self.transactionTimeout = transactionTimeout
    }

    /// Requests waiting for their turn.
    var waiting: Int { queue.count - head }

    mutating func handle(_ event: Event) -> [Action] {
        var actions: [Action] = []
        handle(event, into: &actions)
        return actions
    }

    /// `handle(_:)` appending to `actions` (the executor reuses one buffer).
    mutating func handle(_ event: Event, into actions: inout [Action]) {
        switch event {
        case .request(let id, let pdu):
            guard pdu.opcode.responseOpcode != nil else {
                actions.append(.finish(id, .failed(.protocolError("\(pdu.opcode.name) is not a request"))))
                return
            }
            enqueue(Queued(id: id, opcode: pdu.opcode, bytes: pdu.bytes, kind: .request), into: &actions)
        case .exchangeMTU(let id, let preferred):
            let ours = max(ATTClient.defaultMTU, min(preferred, Int(UInt16.max)))
            guard !mtuAsked, ours > ATTClient.defaultMTU else {
                actions.append(.finish(id, .mtu(mtu)))
                return
            }
            mtuAsked = true
            let pdu = ATTPDU.exchangeMTURequest(ATTExchangeMTU(mtu: UInt16(ours)))
            enqueue(Queued(id: id, opcode: pdu.opcode, bytes: pdu.bytes, kind: .mtu(ours)), into: &actions)
        case .sent(let id):
            guard var t = current, t.id == id, !t.out else { return }
            if let ended = t.ended {
                endTransaction(finishing: ended, into: &actions)
                return
            }
            t.out = true
            current = t
            actions.append(.arm(id, transactionTimeout))
        case .notSent(let id):
            guard let t = current, t.id == id, !t.out else { return }
            endTransaction(finishing: nil, into: &actions)
        case .cancel(let id):
            if var t = current, t.id == id {
                guard t.out else {
                    // It had its turn and sends nothing: the next one goes.
                    endTransaction(finishing: nil, into: &actions)
                    return
                }
                guard !t.abandoned else { return }
                t.abandoned = true
                current = t
                actions.append(.finish(id, .failed(.cancelled)))
            } else if let i = queue[head...].firstIndex(where: { $0.id == id }) {
                queue.remove(at: i)
                actions.append(.finish(id, .failed(.cancelled)))
            }
        case .received(let bytes):
            receive(bytes, into: &actions)
        case .timerExpired(let id):
            guard let t = current, t.id == id, t.out else { return }
            let limit = transactionTimeout
            actions.append(.log("ATT transaction timeout: \(t.opcode.name) unanswered after \(limit); dropping the link"))
            current = nil
            if !t.abandoned { actions.append(.finish(id, .failed(.timeout(operation: "ATT \(t.opcode.name)", limit: limit)))) }
            fail(.disconnected(.attTimeout), into: &actions)
            actions.append(.closeBearer(.attTimeout))
        case .fail(let error):
            fail(error, into: &actions)
        }
    }

    // MARK: - Turns

    private mutating func enqueue(_ q: Queued, into actions: inout [Action]) {
        if let closed {
            actions.append(.finish(q.id, .failed(closed)))
        } else if q.bytes.count > mtu {
            actions.append(.finish(q.id, .failed(.protocolError("\(q.opcode.name) of \(q.bytes.count) bytes exceeds ATT_MTU \(mtu)"))))
        } else if current == nil && waiting == 0 {
            start(q, into: &actions)
        } else {
            queue.append(q)
        }
    }

    private mutating func start(_ q: Queued, into actions: inout [Action]) {
        current = Transaction(id: q.id, opcode: q.opcode, kind: q.kind)
        statistics.requestsSent += 1
        actions.append(.transmit(q.id, q.bytes))
    }

    /// The transaction is over: its timer goes, its caller (if waiting) gets `outcome`, the next request
    /// in line gets its turn.
    private mutating func endTransaction(finishing outcome: Outcome?, into actions: inout [Action]) {
        guard let t = current else { return }
        current = nil
        if t.out { actions.append(.disarm(t.id)) }
        if let outcome { actions.append(.finish(t.id, outcome)) }
        guard head < queue.count else { return }
        let next = queue[head]
        head += 1
        if head == queue.count {
            queue.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 64, head * 2 > queue.count {
            queue.removeFirst(head)
            head = 0
        }
        start(next, into: &actions)
    }

    /// Ends the current transaction with `outcome`: delivered now, or kept for a caller still sending.
    private mutating func complete(_ outcome: Outcome, into actions: inout [Action]) {
        guard var t = current, t.ended == nil else { return }
        var outcome = outcome
        if case .response(.exchangeMTUResponse(let r)) = outcome, case .mtu(let ours) = t.kind {
            mtu = max(ATTClient.defaultMTU, min(ours, Int(r.mtu)))
            actions.append(.mtu(mtu))
            outcome = .mtu(mtu)
        }
        guard t.out else {
            t.ended = outcome
            current = t
            return
        }
        endTransaction(finishing: t.abandoned ? nil : outcome, into: &actions)
    }

    /// Everything waiting, and everything later, fails with `error`.
    private mutating func fail(_ error: BLEError, into actions: inout [Action]) {
        guard closed == nil else { return }
        closed = error
        if var t = current {
            if t.out {
                current = nil
                actions.append(.disarm(t.id))
                if !t.abandoned { actions.append(.finish(t.id, .failed(error))) }
            } else if t.ended == nil {
                t.ended = .failed(error)
                current = t
            }
        }
        for q in queue[head...] { actions.append(.finish(q.id, .failed(error))) }
        queue = []
        head = 0
    }

    // MARK: - Incoming

    private mutating func receive(_ bytes: [UInt8], into actions: inout [Action]) {
        guard closed == nil else { return }
        let pending = current.flatMap { $0.ended == nil ? $0.opcode : nil }
        switch ATTInbound.classify(bytes, pending: pending, mtu: mtu) {
        case .response(let pdu):
            complete(.response(pdu), into: &actions)
        case .failPending(let error):
            complete(.failed(error), into: &actions)
        case .stray(let why):
            statistics.strayResponses += 1
            actions.append(.log("dropped \(why)"))
        case .value(let event):
            actions.append(.deliver(event))
        case .drop(let why):
            statistics.droppedPDUs += 1
            actions.append(.log("dropped: \(why)"))
        case .answerNotSupported(let opcode):
            // A request to a server we do not run (3.4.1.1).
            statistics.droppedPDUs += 1
            actions.append(.log("dropped: unsupported \(opcode.name) from the peer; answering Request Not Supported"))
            actions.append(.reply(ATTPDU.errorResponse(ATTErrorResponse(requestOpcode: opcode, handle: 0, code: .requestNotSupported)).bytes))
        }
        if ATTInbound.needsConfirmation(bytes) {
            actions.append(.reply([ATTOpcode.handleValueConfirmation.rawValue]))
        }
    }
}
