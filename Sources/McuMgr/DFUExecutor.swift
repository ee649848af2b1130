import BLE
import MCUboot

/// The phases a DFU's time is reported in.
public enum DFUPhase: String, Sendable, Hashable, CaseIterable, Codable {
    case state, upload, test, reboot, confirm
}

/// What a DFU did, for the report: the result, versions, the upload's figures, time per phase, and the
/// irreversible actions it journaled.
public struct DFUReport: Sendable, Equatable {
    public var result: DFUResult
    public var versionBefore: String?
    public var versionAfter: String?
    public var upload: UploadReport?
    public var phases: [DFUPhase: Duration]
    public var intents: [DFUIntent]
}

/// A DFU that failed, with what it did before failing (for the report).
public struct DFUError: Error, Sendable, CustomStringConvertible {
    public var failure: DFUFailure?
    /// The link failed beyond what the step recovers from: a transient error for the engine's retry (a
    /// new attempt reads the device's state and goes on from there).
    public var transport: SMPError?
    public var partial: DFUReport?

    public var description: String {
        if let failure { return failure.description }
        return transport?.description ?? "DFU failed"
    }
}

extension DFUMachine.Action {
    /// The command an action sends, for messages.
    var command: String {
        switch self {
        case .readState: return "read image state"
        case .upload: return "upload"
        case .recordIntent(let i): return "journal \(i.rawValue)"
        case .markForTest: return "mark for test"
        case .reset: return "reset"
        case .awaitReboot: return "wait for the reboot"
        case .confirm: return "confirm"
        case .finish, .fail: return "finish"
        }
    }
}

/// Performs a `DFUMachine` on one device: its image state, the upload, the test mark, the reset and the
/// wait for the device, the confirm. Every irreversible action is handed to `recordIntent` first and
/// sent only once that returned (the journal holds it durably).
public enum DFUExecutor {
    public struct Options: Sendable {
        public var requestTimeout: Duration
        public var upload: Uploader.Options
        /// How long a device may take to drop its link after a reset answer.
        public var resetGrace: Duration
        /// Links lost around commands (not the upload) before the step gives up.
        public var maxReconnects: Int
        public init(requestTimeout: Duration = .seconds(5), upload: Uploader.Options = .init(), resetGrace: Duration = .seconds(3),
                    maxReconnects: Int = 3) {
            self.requestTimeout = requestTimeout
            self.upload = upload
            self.resetGrace = resetGrace
            self.maxReconnects = maxReconnects
        }
    }

    /// Runs the DFU. Throws `DFUError` (a failure, or a transport error for the engine's retry).
    public static func run(_ configuration: DFUMachine.Configuration, image: [UInt8], journaled: Set<DFUIntent>, device: any SMPDevice,
                           options: Options = Options(), recordIntent: @escaping @Sendable (DFUIntent) async throws -> Void,
                           progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }) async throws -> DFUReport {
        var run = Run(configuration: configuration, image: image, device: device, options: options, recordIntent: recordIntent,
                      progress: progress, machine: DFUMachine(configuration, journaled: journaled))
        return try await run.loop()
    }

    /// One DFU in progress: the machine, and what the report needs.
    private struct Run {
        let configuration: DFUMachine.Configuration
        let image: [UInt8]
        let device: any SMPDevice
        let options: Options
        let recordIntent: @Sendable (DFUIntent) async throws -> Void
        let progress: @Sendable (UploadProgress) -> Void
        var machine: DFUMachine
        let clock = ContinuousClock()
        var phases: [DFUPhase: Duration] = [:]
        var uploadReport: UploadReport?
        var recorded: [DFUIntent] = []
        var reconnects = 0
        var versionAfter: String?

        init(configuration: DFUMachine.Configuration, image: [UInt8], device: any SMPDevice, options: Options,
             recordIntent: @escaping @Sendable (DFUIntent) async throws -> Void, progress: @escaping @Sendable (UploadProgress) -> Void,
             machine: DFUMachine) {
            self.configuration = configuration
            self.image = image
            self.device = device
            self.options = options
            self.recordIntent = recordIntent
            self.progress = progress
            self.machine = machine
        }

        var partial: DFUReport? {
            guard let r = uploadReport else { return nil }
            return DFUReport(result: .updated(from: machine.versionBefore, to: configuration.image.version.description, confirmed: false),
                             versionBefore: machine.versionBefore, versionAfter: nil, upload: r, phases: phases, intents: recorded)
        }

        func failure(_ f: DFUFailure) -> DFUError { DFUError(failure: f, transport: nil, partial: partial) }
        func transportFailure(_ e: SMPError) -> DFUError { DFUError(failure: nil, transport: e, partial: partial) }

        mutating func loop() async throws -> DFUReport {
            var pending = machine.handle(.begin)
            while true {
                guard !pending.isEmpty else { throw failure(.noProgress("the DFU stopped without a result")) }
                if let deadline = options.upload.deadline, clock.now >= deadline {
                    throw transportFailure(.timeout(operation: "dfu", after: configuration.rebootTimeout))
                }
                let action = pending.removeFirst()
                switch action {
                case .finish(let result):
                    if case .alreadyCurrent(let v) = result { versionAfter = v }
                    return DFUReport(result: result, versionBefore: machine.versionBefore, versionAfter: versionAfter, upload: uploadReport,
                                     phases: phases, intents: recorded)
                case .fail(let f):
                    throw failure(f)
                default:
                    break
                }
                let next: DFUMachine.Event
                do {
                    next = try await perform(action)
                } catch let e as DFUError {
                    throw e
                } catch let e as SMPError {
                    switch e {
                    case .device(let d):
                        throw failure(.device(command: action.command, d))
                    case .cancelled:
                        throw transportFailure(.cancelled)
                    default:
                        // The link failed around a command: read the state again on a new link (bounded);
                        // the machine decides from it (an action in doubt shows in the state).
                        reconnects += 1
                        guard reconnects <= options.maxReconnects else { throw transportFailure(e) }
                        await device.discardClient()
                        next = .begin
                    }
                } catch is CancellationError {
                    throw transportFailure(.cancelled)
                } catch {
                    throw transportFailure(.transport("\(error)"))
                }
                pending += machine.handle(next)
            }
        }

        /// Sends one action and returns the machine's next event (the time it took counted in its phase).
        private mutating func perform(_ action: DFUMachine.Action) async throws -> DFUMachine.Event {
            let started = clock.now
            let phase: DFUPhase
            switch action {
            case .upload: phase = .upload
            case .markForTest: phase = .test
            case .reset, .awaitReboot: phase = .reboot
            case .confirm: phase = .confirm
            default: phase = .state
            }
            let event = try await send(action)
            if case .recordIntent = action {} else { phases[phase, default: .zero] += clock.now - started }
            return event
        }

        private mutating func send(_ action: DFUMachine.Action) async throws -> DFUMachine.Event {
            switch action {
            case .readState:
                let client = try await device.client(within: options.upload.reconnectLimit(now: clock.now))
                let state = try await client.send(ImageStateReadRequest(), timeout: options.requestTimeout)
                if let running = state.images.first(where: { $0.active && ($0.image ?? 0) == configuration.imageNumber }) {
                    versionAfter = running.version
                }
                return .state(state)
            case .upload:
                let result = await upload()
                switch result {
                case .success(let report):
                    uploadReport = report
                    return .uploaded
                case .failure(let f):
                    return .uploadFailed(f)
                }
            case .recordIntent(let intent):
                if let error = await journal(intent) {
                    throw failure(.noProgress("the intent to \(intent.rawValue) could not be journaled, so it was not sent: \(error)"))
                }
                recorded.append(intent)
                return .intentRecorded(intent)
            case .markForTest(let hash, let permanent):
                return try await imageStateWrite(ImageStateWriteRequest(hash: hash, confirm: permanent), intent: .test)
            case .reset:
                let client = try await device.client(within: options.upload.reconnectLimit(now: clock.now))
                let outcome = await smpResult { () async throws(SMPError) in try await client.send(ResetRequest(), timeout: options.requestTimeout) }
                switch outcome {
                case .success: return .resetSent
                case .failure(.device(let e)): return .refused(.reset, e)
                case .failure(.disconnected), .failure(.timeout):
                    // A device may reset before its answer leaves: the reset went out.
                    return .resetSent
                case .failure(let e): throw e
                }
            case .awaitReboot:
                _ = await device.awaitLinkLoss(within: options.resetGrace)
                await device.dropLink()
                var deadline = clock.now + configuration.rebootTimeout
                if let step = options.upload.deadline { deadline = min(deadline, step) }
                while clock.now < deadline {
                    try Task.checkCancellation()
                    let attempt = await smpResult { () async throws(SMPError) in try await device.client(within: deadline - clock.now) }
                    switch attempt {
                    case .success: return .rebooted
                    case .failure(.cancelled): throw SMPError.cancelled
                    case .failure: continue
                    }
                }
                return .rebootTimedOut
            case .confirm(let hash):
                return try await imageStateWrite(ImageStateWriteRequest(hash: hash, confirm: true), intent: .confirm)
            case .finish, .fail:
                return .begin
            }
        }

        /// A test or confirm: the state it answers, or the device's refusal.
        private func imageStateWrite(_ request: ImageStateWriteRequest, intent: DFUIntent) async throws -> DFUMachine.Event {
            let client = try await device.client(within: options.upload.reconnectLimit(now: clock.now))
            switch await smpResult({ () async throws(SMPError) in try await client.send(request, timeout: options.requestTimeout) }) {
            case .success(let state): return .state(state)
            case .failure(.device(let e)): return .refused(intent, e)
            case .failure(let e): throw e
            }
        }

        private func upload() async -> Result<UploadReport, UploadFailure> {
            do {
                return .success(try await Uploader.run(
                    .image(number: configuration.imageNumber, sha: configuration.image.fileSHA256, upgrade: configuration.upgradeOnly),
                    data: image, device: device, options: options.upload, progress: progress))
            } catch let f as UploadFailure {
                return .failure(f)
            } catch let e as SMPError {
                return .failure(.transport(e))
            } catch {
                return .failure(.transport(.transport("\(error)")))
            }
        }

        private func journal(_ intent: DFUIntent) async -> (any Error)? {
            do {
                try await recordIntent(intent)
                return nil
            } catch {
                return error
            }
        }
    }
}
