import AsyncSupport
import BLE
import CBOR

/// An SMP client on one link: performs `SMPClientMachine`'s actions over an `SMPTransport`.
///
/// Any number of requests may be in flight (callers on several tasks, or the upload engine's pipeline);
/// each waits for its own response within its deadline. Writes of different requests never interleave:
/// one writer drains them in the order they were sent. When the link goes down every waiting request
/// fails with `disconnected`; a new link needs a new client.
public actor SMPClient {
    /// Bounds on a response's CBOR (responses are small; a file or image chunk is at most a buffer).
    public static let responseLimits = CBORDecoder.Limits(maxBytes: 65_535, maxDepth: 16, maxItems: 4_096)

    public nonisolated let transport: any SMPTransport
    private var machine: SMPClientMachine
    private var waiters: [SMPClientMachine.RequestID: CheckedContinuation<SMPFrame, any Error>] = [:]
    private var timers: [SMPClientMachine.RequestID: Timeouts.Token] = [:]
    private var writes: [(SMPClientMachine.RequestID, [[UInt8]])] = []
    private var writing = false
    private var nextID: SMPClientMachine.RequestID = 0
    private var reader: Task<Void, Never>?
    private var down: String?
    private let log: @Sendable (String) -> Void

    public init(transport: any SMPTransport, limits: SMPLinkLimits, log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.transport = transport
        self.machine = SMPClientMachine(limits: limits)
        self.log = log
    }

    /// The limits requests are sized by.
    public var limits: SMPLinkLimits { machine.limits }

    /// False once the link under this client went down (a new link needs a new client).
    public var isUsable: Bool { down == nil }

    /// Subscribes to the device's responses; call once before the first request.
    public func start() async throws(SMPError) {
        guard reader == nil else { return }
        let stream: AsyncThrowingStream<[UInt8], any Error>
        do {
            stream = try await transport.responses()
        } catch {
            throw Self.transportError(error)
        }
        reader = Task { [weak self] in
            var reason = "the link went down"
            do {
                for try await piece in stream {
                    guard let self else { return }
                    await self.perform(self.feed(.received(piece)))
                }
            } catch {
                reason = "\(error)"
            }
            await self?.linkDown(reason)
        }
    }

    /// Sets new limits (after MCUmgr parameters).
    public func setLimits(_ limits: SMPLinkLimits) {
        perform(machine.handle(.limits(limits)))
    }

    /// The link under this client went down (its owner saw it): waiting requests fail with
    /// `disconnected`, and nothing more is written (a write queued now would reach the next link, where
    /// the device would read it as the middle of some other request).
    public func linkLost(_ reason: String) {
        linkDown(reason)
    }

    /// Ends the subscription; waiting requests fail with `disconnected`.
    public func close() async {
        reader?.cancel()
        reader = nil
        await transport.close()
        linkDown("closed")
    }

    /// Sends a request and returns its decoded response; a device error is thrown as `SMPError.device`.
    public func send<R: SMPRequest>(_ request: R, timeout: Duration) async throws(SMPError) -> R.Response {
        let body = try await exchange(group: R.group, command: R.command, op: R.op, body: request.body, timeout: timeout,
                                      operation: "\(R.group)/\(R.command)")
        do {
            return try R.Response(body: body)
        } catch {
            throw .malformed(error.description)
        }
    }

    /// Sends any request and returns the response's CBOR body (success only; a device error is thrown).
    public func exchange(group: SMPGroup, command: UInt8, op: SMPOp, body: CBOR, timeout: Duration,
                         operation: String) async throws(SMPError) -> CBOR {
        let (decoded, reported) = try await exchangeKeepingErrors(group: group, command: command, op: op, body: body, timeout: timeout,
                                                                  operation: operation)
        if let reported { throw .device(reported) }
        return decoded
    }

    /// Sends any request and returns the response's body with the error it reports, if any (some errors
    /// carry data: a file upload's refused offset comes with the file's length).
    public func exchangeKeepingErrors(group: SMPGroup, command: UInt8, op: SMPOp, body: CBOR, timeout: Duration,
                                      operation: String) async throws(SMPError) -> (CBOR, SMPDeviceError?) {
        let frame = try await roundTrip(group: group, command: command, op: op, body: body.encoded, timeout: timeout, operation: operation)
        let decoded: CBOR
        do {
            decoded = try CBORDecoder(limits: Self.responseLimits).decode(frame.data)
        } catch {
            throw .malformed("\(operation): \(error)")
        }
        let reported: SMPDeviceError?
        do {
            reported = try SMPDeviceError.reported(in: decoded)
        } catch {
            throw .malformed("\(operation): \(error)")
        }
        return (decoded, reported)
    }

    private func roundTrip(group: SMPGroup, command: UInt8, op: SMPOp, body: [UInt8], timeout: Duration,
                           operation: String) async throws(SMPError) -> SMPFrame {
        if let down { throw .disconnected(down) }
        if Task.isCancelled { throw .cancelled }
        nextID += 1
        let id = nextID
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (c: CheckedContinuation<SMPFrame, any Error>) in
                    waiters[id] = c
                    timers[id] = Timeouts.shared.schedule(after: timeout) { [weak self] in
                        Task { await self?.expire(id, operation: operation, after: timeout) }
                    }
                    perform(machine.handle(.send(id, group: group, command: command, op: op, body: body)))
                }
            } onCancel: {
                Task { await self.cancelled(id) }
            }
        } catch let e as SMPError {
            throw e
        } catch {
            throw .transport("\(error)")
        }
    }

    private func feed(_ event: SMPClientMachine.Event) -> [SMPClientMachine.Action] {
        machine.handle(event)
    }

    private func perform(_ actions: [SMPClientMachine.Action]) {
        for action in actions {
            switch action {
            case .write(let id, let pieces):
                writes.append((id, pieces))
                if !writing {
                    writing = true
                    Task { await self.drainWrites() }
                }
            case .completed(let id, let frame):
                finish(id, .success(frame))
            case .failed(let id, let error):
                finish(id, .failure(error))
            case .note(let text):
                log(text)
            }
        }
    }

    /// Writes queued requests, one whole request after another.
    private func drainWrites() async {
        while !writes.isEmpty {
            let (id, pieces) = writes.removeFirst()
            guard waiters[id] != nil else { continue }
            do {
                for piece in pieces {
                    if let down { throw SMPError.disconnected(down) }
                    try await transport.write(piece)
                }
            } catch {
                perform(machine.handle(.abandon(id)))
                finish(id, .failure(Self.transportError(error)))
            }
        }
        writing = false
    }

    private func finish(_ id: SMPClientMachine.RequestID, _ result: Result<SMPFrame, SMPError>) {
        if let t = timers.removeValue(forKey: id) { Timeouts.shared.cancel(t) }
        guard let waiter = waiters.removeValue(forKey: id) else { return }
        switch result {
        case .success(let f): waiter.resume(returning: f)
        case .failure(let e): waiter.resume(throwing: e)
        }
    }

    private func expire(_ id: SMPClientMachine.RequestID, operation: String, after: Duration) {
        guard waiters[id] != nil else { return }
        perform(machine.handle(.abandon(id)))
        finish(id, .failure(.timeout(operation: operation, after: after)))
    }

    private func cancelled(_ id: SMPClientMachine.RequestID) {
        guard waiters[id] != nil else { return }
        perform(machine.handle(.abandon(id)))
        finish(id, .failure(.cancelled))
    }

    private func linkDown(_ reason: String) {
        if down == nil { down = reason }
        perform(machine.handle(.linkDown(reason)))
        for id in Array(waiters.keys) { finish(id, .failure(.disconnected(reason))) }
    }

    static func transportError(_ error: any Error) -> SMPError {
        if let e = error as? SMPError { return e }
        if let e = error as? BLEError {
            switch e {
            case .disconnected(let reason): return .disconnected(reason.description)
            case .cancelled: return .cancelled
            case .timeout(let op, let limit): return .timeout(operation: op, after: limit)
            default: return .transport(e.description)
            }
        }
        return .transport("\(error)")
    }
}

/// An SMP exchange's result as a value. (Catching an `SMPError` case by pattern, in an async function
/// that throws untyped errors, crashes the Swift 6.3 compiler's ownership verifier: match on this instead.)
public func smpResult<T: Sendable>(_ body: () async throws(SMPError) -> T) async -> Result<T, SMPError> {
    do {
        return .success(try await body())
    } catch {
        return .failure(error)
    }
}
