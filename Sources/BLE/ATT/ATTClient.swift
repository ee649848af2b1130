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
/// - One outstanding request at a time: callers queue in FIFO order for the request slot.
/// - A transaction timer per request (default 30 s, 3.3.3): when it expires the pending request fails with
///   `BLEError.timeout`, the bearer is closed with `.attTimeout`, and every later operation fails.
/// - Notifications and indications are handed to `valueHandler` in arrival order, also while a request is
///   pending; every indication is confirmed after the handler returns.
/// - Unexpected responses: a response when no request is outstanding (or a second one) is dropped and
///   counted in `strayResponses`; a response with the wrong opcode, an Error Response naming another
///   request, an oversized or malformed response fails the pending request with `protocolError` (the
///   transaction is over; whatever arrives for it later is a stray response).
/// - A task cancelled while queued leaves the queue at once. A task cancelled after its request went out
///   returns at once, but the slot stays taken until the response (or the timer) ends the transaction,
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
    public private(set) var requestsSent = 0
    /// Responses dropped because no request was waiting for them.
    public private(set) var strayResponses = 0
    /// Incoming PDUs dropped as malformed or oversized (notifications, unknown junk).
    public private(set) var droppedPDUs = 0
    /// Why the bearer is unusable, once it is.
    public private(set) var closedError: BLEError?

    public static let defaultMTU = 23

    private let valueHandler: @Sendable (ATTValueEvent) -> Void
    private let counter: RoundTripCounter?
    private let disconnectReason: (@Sendable () async -> DisconnectReason)?
    private let log: @Sendable (String) -> Void
    private var mtuExchanged = false

    private struct Transaction {
        var id: UInt64
        var request: ATTOpcode
        var continuation: CheckedContinuation<ATTPDU, any Error>?
        var result: Result<ATTPDU, any Error>?
        var abandoned = false
        /// The transaction timer (Vol 3 Part F 3.3.3), armed when the request went out.
        var timer: Timeouts.Token?
    }

    /// Holder of the request slot (a transaction in flight, or a task about to send).
    private var slotTaken = false
    private var current: Transaction?
    private var waiters: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
    private var waiterHead = 0
    private var nextID: UInt64 = 0
    /// Told how many requests wait for the slot each time one starts waiting (tests observe the queue
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
        guard closedError == nil else { return }
        let reason = await disconnectReason?() ?? .bearerClosed
        fail(.disconnected(reason))
    }

    // MARK: - Operations

    /// Sends a request and waits for its response. An Error Response throws `BLEError.att`.
    public func request(_ pdu: ATTPDU) async throws -> ATTPDU {
        guard pdu.opcode.responseOpcode != nil else {
            throw BLEError.protocolError("\(pdu.opcode.name) is not a request")
        }
        let bytes = pdu.bytes
        guard bytes.count <= mtu else {
            throw BLEError.protocolError("\(pdu.opcode.name) of \(bytes.count) bytes exceeds ATT_MTU \(mtu)")
        }
        try await acquireSlot()
        if let e = closedError { throw e }
        if Task.isCancelled {
            releaseSlot()
            throw BLEError.cancelled
        }
        nextID &+= 1
        let id = nextID
        current = Transaction(id: id, request: pdu.opcode)
        requestsSent += 1
        counter?.increment()
        do {
            try await bearer.send(bytes)
        } catch {
            if current?.id == id { current = nil; releaseSlot() }
            throw (error as? BLEError) ?? .disconnected(.bearerClosed)
        }
        // The transaction may have ended while sending (response, failure), or the bearer failed.
        if let e = closedError, current?.id == id, current?.result == nil {
            current?.result = .failure(e)
        }
        if current?.id == id, current?.result == nil {
            // The transaction timer: a `Timeouts` entry per request (not a sleeping task per bearer, whose
            // cancelled sleep would keep a Dispatch timer queued for 30 s after the link closed).
            current?.timer = Timeouts.shared.schedule(after: transactionTimeout) { [weak self] in
                guard let self else { return }
                Task { await self.transactionExpired(id) }
            }
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<ATTPDU, any Error>) in
                guard var t = current, t.id == id else {
                    c.resume(throwing: closedError ?? BLEError.protocolError("ATT transaction lost"))
                    return
                }
                if let r = t.result {
                    finishTransaction()
                    c.resume(with: r)
                } else if t.abandoned || Task.isCancelled {
                    t.abandoned = true
                    current = t
                    c.resume(throwing: BLEError.cancelled)
                } else {
                    t.continuation = c
                    current = t
                }
            }
        } onCancel: {
            Task { await self.abandon(id) }
        }
    }

    /// Sends a command (no response): Write Command, Signed Write Command. Waits for link credits
    /// (backpressure) and never takes the request slot.
    public func command(_ pdu: ATTPDU) async throws {
        if let e = closedError { throw e }
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
    /// The result is min(preferred, the server's Rx MTU), never below 23.
    @discardableResult
    public func exchangeMTU(preferred: Int) async throws -> Int {
        let ours = max(Self.defaultMTU, min(preferred, bearer.localMaxMTU, Int(UInt16.max)))
        guard !mtuExchanged, ours > Self.defaultMTU else { return mtu }
        mtuExchanged = true
        let response = try await request(.exchangeMTURequest(ATTExchangeMTU(mtu: UInt16(ours))))
        guard case .exchangeMTUResponse(let r) = response else {
            throw BLEError.protocolError("unexpected \(response.opcode.name) to Exchange MTU")
        }
        mtuStore.store(max(Self.defaultMTU, min(ours, Int(r.mtu))), ordering: .relaxed)
        return mtu
    }

    /// Ends the bearer for this client: the pending request and every waiter fail with `error`, and so
    /// does every later operation. Does not close the bearer.
    public func fail(_ error: BLEError) {
        guard closedError == nil else { return }
        closedError = error
        if var t = current {
            disarm(&t)
            if let c = t.continuation {
                current = nil
                c.resume(throwing: error)
            } else {
                t.result = .failure(error)
                current = t
            }
        }
        let queued = waiters[waiterHead...].map(\.continuation)
        waiters = []
        waiterHead = 0
        for c in queued { c.resume(throwing: error) }
    }

    /// Closes the bearer with `reason` and fails everything with `.disconnected(reason)`.
    public func close(reason: DisconnectReason) async {
        fail(.disconnected(reason))
        reader?.cancel()
        await bearer.close(reason: reason)
    }

    // MARK: - Slot queue

    private func acquireSlot() async throws {
        if let e = closedError { throw e }
        if !slotTaken {
            slotTaken = true
            return
        }
        nextID &+= 1
        let id = nextID
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                if let e = closedError {
                    c.resume(throwing: e)
                } else if Task.isCancelled {
                    c.resume(throwing: BLEError.cancelled)
                } else {
                    waiters.append((id, c))
                    queueObserver?(waiters.count - waiterHead)
                }
            }
        } onCancel: {
            Task { await self.cancelWaiter(id) }
        }
    }

    /// Calls `observer` with the number of requests waiting for the slot whenever one starts waiting.
    package func observeQueue(_ observer: @escaping @Sendable (Int) -> Void) {
        queueObserver = observer
    }

    private func cancelWaiter(_ id: UInt64) {
        guard let i = waiters[waiterHead...].firstIndex(where: { $0.id == id }) else { return }
        let c = waiters.remove(at: i).continuation
        c.resume(throwing: BLEError.cancelled)
    }

    /// Hands the slot to the next waiter in FIFO order, or frees it.
    private func releaseSlot() {
        if waiterHead < waiters.count {
            let next = waiters[waiterHead].continuation
            waiterHead += 1
            if waiterHead > 64, waiterHead * 2 > waiters.count {
                waiters.removeFirst(waiterHead)
                waiterHead = 0
            }
            next.resume()
        } else {
            waiters.removeAll(keepingCapacity: true)
            waiterHead = 0
            slotTaken = false
        }
    }

    private func finishTransaction() {
        if var t = current { disarm(&t) }
        current = nil
        releaseSlot()
    }

    /// Stops a transaction's timer (its outcome is known).
    private func disarm(_ t: inout Transaction) {
        if let timer = t.timer {
            Timeouts.shared.cancel(timer)
            t.timer = nil
        }
    }

    private func abandon(_ id: UInt64) {
        guard var t = current, t.id == id else { return }
        t.abandoned = true
        if let c = t.continuation {
            t.continuation = nil
            current = t
            c.resume(throwing: BLEError.cancelled)
        } else {
            current = t
        }
    }

    private func transactionExpired(_ id: UInt64) async {
        guard let t = current, t.id == id, t.result == nil else { return }
        let timeout = BLEError.timeout(operation: "ATT \(t.request.name)", limit: transactionTimeout)
        log("ATT transaction timeout: \(t.request.name) unanswered after \(transactionTimeout); dropping the link")
        complete(.failure(timeout))
        fail(.disconnected(.attTimeout))
        reader?.cancel()
        await bearer.close(reason: .attTimeout)
    }

    /// Completes the current transaction with `result` (delivering it now, or keeping it for the
    /// requester that is still sending).
    private func complete(_ result: Result<ATTPDU, any Error>) {
        guard var t = current else { return }
        if let c = t.continuation {
            finishTransaction()
            c.resume(with: result)
        } else if t.abandoned {
            finishTransaction()
        } else {
            disarm(&t)
            t.result = result
            current = t
        }
    }

    // MARK: - Incoming

    private func receive(_ bytes: [UInt8]) async {
        guard closedError == nil else { return }
        let pending = current.flatMap { $0.result == nil ? $0.request : nil }
        switch ATTInbound.classify(bytes, pending: pending, mtu: mtu) {
        case .response(let pdu):
            complete(.success(pdu))
        case .failPending(let error):
            complete(.failure(error))
        case .stray(let why):
            strayResponses += 1
            log("dropped \(why)")
        case .value(let event):
            valueHandler(event)
        case .drop(let why):
            drop(why)
        case .answerNotSupported(let opcode):
            // A request to a server we do not run (3.4.1.1).
            drop("unsupported \(opcode.name) from the peer; answering Request Not Supported")
            let reply = ATTPDU.errorResponse(ATTErrorResponse(requestOpcode: opcode, handle: 0, code: .requestNotSupported))
            try? await bearer.send(reply.bytes)
        }
        if ATTInbound.needsConfirmation(bytes) {
            try? await bearer.send([ATTOpcode.handleValueConfirmation.rawValue])
        }
    }

    private func drop(_ why: String) {
        droppedPDUs += 1
        log("dropped: \(why)")
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
