import BLE

/// What an upload did: bytes, time, and how the link behaved.
public struct UploadReport: Sendable, Equatable {
    /// The upload's size.
    public var bytes: Int
    /// Data bytes sent, resent ones included (≥ `bytes`).
    public var sent: Int
    public var duration: Duration
    /// Times the device dropped requests; the window the upload ended with.
    public var drops: Int
    public var window: Int
    public var linkLosses: Int
    /// The device's own check of the image's `sha`, when it made one.
    public var match: Bool?

    /// Goodput in kilobytes (1000 bytes) per second.
    public var kilobytesPerSecond: Double {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return seconds > 0 ? Double(bytes) / 1000 / seconds : 0
    }
}

/// Progress of an upload, as events carry it.
public struct UploadProgress: Sendable, Equatable {
    public var acknowledged: Int
    public var total: Int
    public var sent: Int
    public var elapsed: Duration
}

/// Performs an `UploadMachine` over an `SMPDevice`: each request on its own child task (as many in
/// flight as the machine's window), answers fed back as events, a lost link reconnected and the upload
/// resumed from the device's offset.
public enum Uploader {
    public struct Options: Sendable {
        public var machine: UploadMachine.Configuration
        /// How long a lost link may take to come back, each time.
        public var reconnectTimeout: Duration
        /// Links lost before the upload gives up.
        public var maxLinkLosses: Int
        /// When the whole upload must be over (the step's deadline): nil for no limit beyond the requests'.
        public var deadline: ContinuousClock.Instant?
        public init(machine: UploadMachine.Configuration = .init(), reconnectTimeout: Duration = .seconds(30), maxLinkLosses: Int = 5,
                    deadline: ContinuousClock.Instant? = nil) {
            self.machine = machine
            self.reconnectTimeout = reconnectTimeout
            self.maxLinkLosses = maxLinkLosses
            self.deadline = deadline
        }

        /// How long a reconnect may take now: the reconnect timeout, within the deadline.
        func reconnectLimit(now: ContinuousClock.Instant) -> Duration {
            guard let deadline else { return reconnectTimeout }
            return max(.zero, min(reconnectTimeout, deadline - now))
        }
    }

    /// A machine event from a request's task, with the client generation it belongs to.
    private struct Tagged: Sendable {
        var generation: Int
        var event: UploadMachine.Event
    }

    /// Uploads `data`; `startingAt` bytes are known to be on the device already (a file upload that
    /// resumes). Throws `UploadFailure`, or `SMPError` when the link cannot be had.
    public static func run(_ target: UploadMachine.Target, data: [UInt8], device: any SMPDevice, options: Options = Options(),
                           startingAt: Int = 0, progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }) async throws -> UploadReport {
        let clock = ContinuousClock()
        let start = clock.now
        var machine = UploadMachine(target: target, data: data, configuration: options.machine, startingAt: startingAt)
        var client = try await device.client(within: options.reconnectLimit(now: clock.now))
        var generation = 0
        let (events, sink) = AsyncStream.makeStream(of: Tagged.self)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            defer { group.cancelAll() }
            var pending = machine.handle(.start(await client.limits))
            while true {
                for action in pending {
                    switch action {
                    case .send(let tag, let request, let timeout):
                        let c = client, g = generation
                        group.addTask {
                            sink.yield(Tagged(generation: g, event: await exchange(c, tag, request, timeout, device)))
                        }
                    case .progress(let acked, let sent):
                        progress(UploadProgress(acknowledged: acked, total: data.count, sent: sent, elapsed: clock.now - start))
                    case .finished(let match):
                        return UploadReport(bytes: data.count, sent: machine.bytesSent, duration: clock.now - start, drops: machine.drops,
                                            window: machine.window, linkLosses: machine.linkLosses, match: match)
                    case .failed(let failure):
                        throw failure
                    case .note:
                        break
                    }
                }
                pending = []
                var next: Tagged?
                for await e in events {
                    next = e
                    break
                }
                guard let tagged = next else { throw SMPError.cancelled }
                try Task.checkCancellation()
                if let deadline = options.deadline, clock.now >= deadline {
                    throw SMPError.timeout(operation: "upload (at \(machine.acknowledged) of \(data.count) bytes)", after: deadline - start)
                }
                guard tagged.generation == generation else { continue }
                pending = machine.handle(tagged.event)
                if tagged.event == .linkDown {
                    guard machine.linkLosses <= options.maxLinkLosses else {
                        throw SMPError.disconnected("the link was lost \(machine.linkLosses) times during the upload")
                    }
                    await device.discardClient()
                    client = try await device.client(within: options.reconnectLimit(now: clock.now))
                    generation += 1
                    pending += machine.handle(.start(await client.limits))
                }
            }
        }
    }

    /// Sends one request and turns its outcome into the machine's event.
    private static func exchange(_ client: SMPClient, _ tag: UploadMachine.Tag, _ request: UploadMachine.Request, _ timeout: Duration,
                                 _ device: any SMPDevice) async -> UploadMachine.Event {
        do {
            switch request {
            case .image(let r):
                let response = try await client.send(r, timeout: timeout)
                return .response(tag, offset: response.offset, match: response.match)
            case .file(let r):
                // A refused offset comes with the file's length (`len`): keep the body of errors too.
                let (body, error) = try await client.exchangeKeepingErrors(
                    group: FileUploadRequest.group, command: FileUploadRequest.command, op: FileUploadRequest.op, body: r.body,
                    timeout: timeout, operation: "file upload")
                if let error { return .rejected(tag, error, length: body["len"]?.unsignedValue.map { Int(clamping: $0) }) }
                return .response(tag, offset: try FileUploadResponse(body: body).offset, match: nil)
            }
        } catch SMPError.device(let e) {
            return .rejected(tag, e, length: nil)
        } catch SMPError.malformed(let what) {
            return .malformed(tag, what)
        } catch let e as SMPMessageError {
            return .malformed(tag, e.description)
        } catch SMPError.disconnected {
            return .linkDown
        } catch SMPError.timeout {
            return await device.isLinkUp() ? .lost(tag) : .linkDown
        } catch {
            return await device.isLinkUp() ? .lost(tag) : .linkDown
        }
    }
}
