import AsyncSupport
import Synchronization

/// A notification or indication received from the peer's GATT server.
public struct ATTValueEvent: Sendable, Hashable {
    public var handle: UInt16
    public var value: [UInt8]
    public var isIndication: Bool
    public init(handle: UInt16, value: [UInt8], isIndication: Bool) {
        self.handle = handle
        self.value = value
        self.isIndication = isIndication
    }
}

/// The client role of ATT over one bearer (Vol 3 Part F 3.3).
///
/// The rules are decided by `ATTClientMachine`, a value tested on its own; the actor executes what it
/// decides: it sends over the bearer, arms the transaction timer on the shared `Timeouts` driver, hands
/// notifications to `valueHandler`, and wakes the callers waiting in its `WaiterQueue`.
///
/// - One outstanding request at a time: callers queue in FIFO order for their turn.
/// - A transaction timer per request (default 30 s, 3.3.3): when it expires the pending request fails with
///   `BLEError.timeout`, the bearer is closed with `.attTimeout`, and every later operation fails.
/// - Notifications and indications are handed to `valueHandler` in arrival order, also while a request is
///   pending; every indication is confirmed after the handler returns.
/// - Unexpected responses: a response when no request is outstanding (or a second one) is dropped and
///   counted in `strayResponses`; a response with the wrong opcode, an Error Response naming another
///   request, an oversized or malformed response fails the pending request with `protocolError` (the
///   transaction is over; whatever arrives for it later is a stray response).
/// - A task cancelled while queued leaves the queue at once. A task cancelled after its request went out
///   returns at once, but the turn stays taken until the response (or the timer) ends the transaction,
///   because ATT allows no second request before the first is answered.
/// - When `incoming` ends, or `fail(_:)` is called, every pending and later operation fails at once.
public actor ATTClient {
    /// The bearer this client talks over.
    public nonisolated let bearer: any ATTBearer
    /// The ATT transaction timeout.
    public nonisolated let transactionTimeout: Duration
    /// The current ATT_MTU (23 until exchanged). Readable without a hop: it changes once, in `exchangeMTU`.
    public nonisolated var mtu: Int { mtuStore.load(ordering: .relaxed) }
    private let mtuStore = Atomic<Int>(ATTClient.defaultMTU)
    /// Requests sent (ATT round trips), including those that failed.
    public var requestsSent: Int { machine.statistics.requestsSent }
    /// Responses dropped because no request was waiting for them.
    public var strayResponses: Int { machine.statistics.strayResponses }
    /// Incoming PDUs dropped as malformed or oversized (notifications, unknown junk).
    public var droppedPDUs: Int { machine.statistics.droppedPDUs }
    /// Why the bearer is unusable, once it is.
    public var closedError: BLEError? { machine.closed }

    public static let defaultMTU = 23

    private typealias RequestID = ATTClientMachine.RequestID
    private typealias Action = ATTClientMachine.Action

    /// What a caller waiting in `waits` is woken with: its turn to send, or how its request ended.
    private enum Wake: Sendable {
        case turn([UInt8])
        case ended(ATTClientMachine.Outcome)
    }

    private var machine: ATTClientMachine
    /// The callers waiting for their turn or their answer.
    private let waits = WaiterQueue<Void, Wake>()
    /// The ticket of each caller that waits, by request.
    private var tickets: [RequestID: WaitTicket] = [:]
    private var nextID: RequestID = 0
    /// The armed transaction timer (at most one: one request is out at a time).
    private var timer: (id: RequestID, token: Timeouts.Token)?

    private let valueHandler: @Sendable (ATTValueEvent) -> Void
    private let counter: RoundTripCounter?
    private let disconnectReason: (@Sendable () async -> DisconnectReason)?
    private let log: @Sendable (String) -> Void
    /// Told how many requests wait for their turn each time one starts waiting (tests observe the queue
    /// instead of waiting a while to see that nothing was sent).
    private var queueObserver: (@Sendable (Int) -> Void)?
    private var reader: Task<Void, Never>?

    /// - Parameters:
    ///   - valueHandler: called on the client's executor for every notification and indication, in order.
    ///     It must not block.
    ///   - log: diagnostics for dropped PDUs.
    ///   - counter: also counts this client's requests (a session sums them over its links).
    ///   - disconnectReason: asked, when `incoming` ends, why the link went down (e.g. `Link.waitForDisconnect`),
    ///     so that pending operations fail with the real reason; `.bearerClosed` when nil.
    public init(bearer: any ATTBearer, transactionTimeout: Duration = .seconds(30),
                counter: RoundTripCounter? = nil,
                disconnectReason: (@Sendable () async -> DisconnectReason)? = nil,
                log: @escaping @Sendable (String) -> Void = { _ in },
                valueHandler: @escaping @Sendable (ATTValueEvent) -> Void) {
        self.bearer = bearer
        self.transactionTimeout = transactionTimeout
        self.machine = ATTClientMachine(transactionTimeout: transactionTimeout)
        self.log = log
        self.valueHandler = valueHandler
        self.counter = counter
        self.disconnectReason = disconnectReason
    }

    /// Starts reading the bearer. Idempotent.
    public func start() {
        guard reader == nil else { return }
        reader = Task { await self.readLoop() }
    }

    private func readLoop() async {
        if let direct = bearer as? any ATTBearerReceiving {
            while let pdu = await direct.receive() {
                await receive(pdu)
            }
        } else {
            for await pdu in bearer.incoming {
                await receive(pdu)
            }
        }
        guard machine.closed == nil else { return }
        let reason = await disconnectReason?() ?? .bearerClosed
        fail(.disconnected(reason))
    }

    // MARK: - Operations

    /// Sends a request and waits for its response. An Error Response throws `BLEError.att`.
    public func request(_ pdu: ATTPDU) async throws -> ATTPDU {
        let id = nextRequestID()
        switch try await transact(id, .request(id, pdu)) {
        case .response(let response): return response
        case .failed(let e): throw e
        case .mtu: throw BLEError.protocolError("\(pdu.opcode.name) answered as an MTU exchange")
        }
    }

    /// Sends a command (no response): Write Command, Signed Write Command. Waits for link credits
    /// (backpressure) and never takes a turn.
    public func command(_ pdu: ATTPDU) async throws {
        if let e = machine.closed { throw e }
        let bytes = pdu.bytes
        guard bytes.count <= mtu else {
            throw BLEError.protocolError("\(pdu.opcode.name) of \(bytes.count) bytes exceeds ATT_MTU \(mtu)")
        }
        if Task.isCancelled { throw BLEError.cancelled }
        do {
            try await bearer.send(bytes)
        } catch let e as BLEError {
            throw e
        } catch {
            throw BLEError.cancelled
        }
    }

    /// Exchanges the MTU once per bearer (3.4.2); later calls return the current MTU without a request.
    /// The result is min(preferred, this side's and the server's Rx MTU), never below 23.
    @discardableResult
    public func exchangeMTU(preferred: Int) async throws -> Int {
        let id = nextRequestID()
        switch try await transact(id, .exchangeMTU(id, preferred: min(preferred, bearer.localMaxMTU))) {
        case .mtu(let n): return n
        case .failed(let e): throw e
        case .response(let r): throw BLEError.protocolError("unexpected \(r.opcode.name) to Exchange MTU")
        }
    }

    /// Ends the bearer for this client: the pending request and every waiter fail with `error`, and so
    /// does every later operation. Does not close the bearer.
    public func fail(_ error: BLEError) {
        perform(machine.handle(.fail(error)))
    }

    /// Closes the bearer with `reason` and fails everything with `.disconnected(reason)`.
    public func close(reason: DisconnectReason) async {
        fail(.disconnected(reason))
        reader?.cancel()
        await bearer.close(reason: reason)
    }

    /// Calls `observer` with the number of requests waiting for their turn whenever one starts waiting.
    package func observeQueue(_ observer: @escaping @Sendable (Int) -> Void) {
        queueObserver = observer
    }

    // MARK: - The executor

    private func nextRequestID() -> RequestID {
        nextID &+= 1
        return nextID
    }

    /// One transaction from its caller's side: its turn, the send, its answer.
    private func transact(_ id: RequestID, _ event: ATTClientMachine.Event) async throws -> ATTClientMachine.Outcome {
        let bytes: [UInt8]
        switch try await wake(id, after: machine.handle(event), forTurn: true) {
        case .turn(let b): bytes = b
        case .ended(let outcome): return outcome
        }
        if Task.isCancelled {
            perform(machine.handle(.cancel(id)))
            throw BLEError.cancelled
        }
        counter?.increment()
        do {
            try await bearer.send(bytes)
        } catch {
            perform(machine.handle(.notSent(id)))
            throw (error as? BLEError) ?? .disconnected(.bearerClosed)
        }
        switch try await wake(id, after: machine.handle(.sent(id)), forTurn: false) {
        case .ended(let outcome): return outcome
        case .turn: throw BLEError.protocolError("ATT transaction lost")
        }
    }

    /// Performs `actions`; returns what they address to `id`, or waits for it in `waits`. A cancelled
    /// wait tells the machine (the caller gives up) and throws `cancelled`.
    private func wake(_ id: RequestID, after actions: [Action], forTurn: Bool) async throws -> Wake {
        if let now = perform(actions, caller: id).caller { return now }
        let ticket = waits.enqueue()
        tickets[id] = ticket
        if forTurn { queueObserver?(machine.waiting) }
        switch await waits.wait(ticket) {
        case .granted(let w):
            return w
        case .cancelled, .timedOut:
            tickets[id] = nil
            perform(machine.handle(.cancel(id)))
            throw BLEError.cancelled
        }
    }

    /// What `perform` leaves to its async caller, and what it addresses to a caller not waiting yet.
    private struct Leftover {
        var caller: Wake?
        /// PDUs that answer the peer (confirmations, Request Not Supported), in order.
        var replies: [[UInt8]] = []
        var close: DisconnectReason?
    }

    /// Carries out the machine's actions: wakes waiting callers, arms and disarms the transaction timer,
    /// delivers values.
    @discardableResult
    private func perform(_ actions: [Action], caller: RequestID? = nil) -> Leftover {
        var left = Leftover()
        for action in actions {
            switch action {
            case .transmit(let id, let bytes):
                wake(id, .turn(bytes), caller: caller, &left)
            case .finish(let id, let outcome):
                wake(id, .ended(outcome), caller: caller, &left)
            case .arm(let id, let limit):
                if let old = timer { Timeouts.shared.cancel(old.token) }
                let token = Timeouts.shared.schedule(after: limit) { [weak self] in
                    guard let self else { return }
                    Task { await self.expired(id) }
                }
                timer = (id, token)
            case .disarm(let id):
                if let t = timer, t.id == id {
                    Timeouts.shared.cancel(t.token)
                    timer = nil
                }
            case .deliver(let event):
                valueHandler(event)
            case .reply(let bytes):
                left.replies.append(bytes)
            case .closeBearer(let reason):
                left.close = reason
            case .mtu(let n):
                mtuStore.store(n, ordering: .relaxed)
            case .log(let line):
                log(line)
            }
        }
        return left
    }

    private func wake(_ id: RequestID, _ value: Wake, caller: RequestID?, _ left: inout Leftover) {
        if let ticket = tickets.removeValue(forKey: id) {
            waits.withLock { _, waiters in _ = waiters.resume(ticket, value) }
        } else if id == caller {
            left.caller = value
        }
    }

    private func expired(_ id: RequestID) async {
        guard let t = timer, t.id == id else { return }
        timer = nil
        if let reason = perform(machine.handle(.timerExpired(id))).close {
            reader?.cancel()
            await bearer.close(reason: reason)
        }
    }

    private func receive(_ bytes: [UInt8]) async {
        for reply in perform(machine.handle(.received(bytes))).replies {
            try? await bearer.send(reply)
        }
    }
}

extension DisconnectReason {
    /// The ATT bearer's incoming stream ended (the transport said nothing more).
    public static let bearerClosed = DisconnectReason(code: 0x08, text: "ATT bearer closed")
}

/// Counts ATT requests across clients (thread-safe).
public final class RoundTripCounter: Sendable {
    private let count = Atomic<Int>(0)
    public init() {}
    public func increment() { count.add(1, ordering: .relaxed) }
    public var value: Int { count.load(ordering: .relaxed) }
}
