import Foundation
import Synchronization

/// Something that happened during a run, for the progress display and `--events` (JSON lines). In
/// memory a typed case with its time; the JSON object of the events stream (`type`, `at`, and the
/// fields of its kind) is made only at the Codable edge.
public struct RunEvent: Sendable, Equatable {
    public var at: WallTime
    public var kind: Kind

    /// What happened.
    public enum Kind: Sendable, Equatable {
        case runStarted(workflow: String, total: Int)
        case deviceStarted(device: String, attempt: Int)
        case stepFinished(StepFinished)
        case stepRetry(StepRetry)
        /// A step's progress through a long transfer (a firmware image, a file): bytes so far and the rate.
        case stepProgress(StepProgress)
        case deviceFinished(DeviceFinished)
        case stopRequested(message: String)
        case adapterFailed(device: String, adapter: String, message: String)
        /// Resume repaired the journal before appending (a torn last line was cut); `message` says what and where.
        case journalRepaired(message: String)
        case runFinished(message: String, total: Int)
        /// On a line: this station lost its lease on a device in flight (it is cut); `message` says why.
        case leaseLost(device: String, message: String)
        /// On a line: the line database cannot be reached; no device is claimed until it is back.
        case storeUnavailable(message: String)
        /// On a line: the line database is reachable again.
        case storeAvailable(message: String)
    }

    /// A step ended: its outcome, how long it took over all its attempts, and its failure.
    public struct StepFinished: Sendable, Equatable {
        public var device: String
        public var step: String
        public var attempt: Int
        public var outcome: StepOutcome
        public var durationMs: Double
        public var error: FailureRecord?
        public init(device: String, step: String, attempt: Int, outcome: StepOutcome, durationMs: Double, error: FailureRecord? = nil) {
            self.device = device
            self.step = step
            self.attempt = attempt
            self.outcome = outcome
            self.durationMs = durationMs
            self.error = error
        }
    }

    /// A step failed and is tried again after `delayMs`.
    public struct StepRetry: Sendable, Equatable {
        public var device: String
        public var step: String
        public var attempt: Int
        public var delayMs: Double
        public var error: FailureRecord
        public init(device: String, step: String, attempt: Int, delayMs: Double, error: FailureRecord) {
            self.device = device
            self.step = step
            self.attempt = attempt
            self.delayMs = delayMs
            self.error = error
        }
    }

    /// A step's transfer so far.
    public struct StepProgress: Sendable, Equatable {
        public var device: String
        public var step: String
        public var attempt: Int
        public var bytes: Int
        /// The whole transfer, when known.
        public var bytesTotal: Int?
        /// KiB per second since the step's attempt began.
        public var kibPerSecond: Double
        public init(device: String, step: String, attempt: Int, bytes: Int, bytesTotal: Int?, kibPerSecond: Double) {
            self.device = device
            self.step = step
            self.attempt = attempt
            self.bytes = bytes
            self.bytesTotal = bytesTotal
            self.kibPerSecond = kibPerSecond
        }
    }

    /// A device ended.
    public struct DeviceFinished: Sendable, Equatable {
        public var device: String
        public var outcome: DeviceOutcome
        public var durationMs: Double?
        public var error: FailureRecord?
        public var adapter: String?
        /// The device's whole record, for sinks in the same process (a station's per-device hook); never
        /// written to the events stream.
        public var record: DeviceRecord?
        public init(device: String, outcome: DeviceOutcome, durationMs: Double?, error: FailureRecord?, adapter: String?,
                    record: DeviceRecord? = nil) {
            self.record = record
            self.device = device
            self.outcome = outcome
            self.durationMs = durationMs
            self.error = error
            self.adapter = adapter
        }
    }

    /// The `type` of an event on the wire.
    public enum EventType: String, Codable, Sendable, CaseIterable {
        case runStarted = "run_started"
        case deviceStarted = "device_started"
        case stepFinished = "step_finished"
        case stepRetry = "step_retry"
        case stepProgress = "step_progress"
        case deviceFinished = "device_finished"
        case stopRequested = "stop_requested"
        case adapterFailed = "adapter_failed"
        case journalRepaired = "journal_repaired"
        case runFinished = "run_finished"
        case leaseLost = "lease_lost"
        case storeUnavailable = "store_unavailable"
        case storeAvailable = "store_available"
    }

    public init(_ kind: Kind, at: WallTime = .now()) {
        self.kind = kind
        self.at = at
    }

    public var type: EventType {
        switch kind {
        case .runStarted: return .runStarted
        case .deviceStarted: return .deviceStarted
        case .stepFinished: return .stepFinished
        case .stepRetry: return .stepRetry
        case .stepProgress: return .stepProgress
        case .deviceFinished: return .deviceFinished
        case .stopRequested: return .stopRequested
        case .adapterFailed: return .adapterFailed
        case .journalRepaired: return .journalRepaired
        case .runFinished: return .runFinished
        case .leaseLost: return .leaseLost
        case .storeUnavailable: return .storeUnavailable
        case .storeAvailable: return .storeAvailable
        }
    }

    /// The device the event is about, if any.
    public var device: String? {
        switch kind {
        case .deviceStarted(let d, _), .adapterFailed(let d, _, _), .leaseLost(let d, _): return d
        case .stepFinished(let s): return s.device
        case .stepRetry(let s): return s.device
        case .stepProgress(let s): return s.device
        case .deviceFinished(let f): return f.device
        case .runStarted, .stopRequested, .journalRepaired, .runFinished, .storeUnavailable, .storeAvailable: return nil
        }
    }
}

extension RunEvent: Codable {
    /// Every field an event can carry on the wire (the kind decides which).
    enum CodingKeys: String, CodingKey {
        case adapter, at, attempt, bytes, bytesTotal, delayMs, device, durationMs, error, kibPerSecond, message, outcome, step, total, type
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(at, forKey: .at)
        try c.encode(type, forKey: .type)
        switch kind {
        case .runStarted(let workflow, let total):
            try c.encode(workflow, forKey: .message)
            try c.encode(total, forKey: .total)
        case .deviceStarted(let device, let attempt):
            try c.encode(device, forKey: .device)
            try c.encode(attempt, forKey: .attempt)
        case .stepFinished(let s):
            try c.encode(s.device, forKey: .device)
            try c.encode(s.step, forKey: .step)
            try c.encode(s.attempt, forKey: .attempt)
            try c.encode(s.outcome, forKey: .outcome)
            try c.encode(s.durationMs, forKey: .durationMs)
            try c.encodeIfPresent(s.error, forKey: .error)
        case .stepRetry(let s):
            try c.encode(s.device, forKey: .device)
            try c.encode(s.step, forKey: .step)
            try c.encode(s.attempt, forKey: .attempt)
            try c.encode(s.delayMs, forKey: .delayMs)
            try c.encode(s.error, forKey: .error)
        case .stepProgress(let p):
            try c.encode(p.device, forKey: .device)
            try c.encode(p.step, forKey: .step)
            try c.encode(p.attempt, forKey: .attempt)
            try c.encode(p.bytes, forKey: .bytes)
            try c.encodeIfPresent(p.bytesTotal, forKey: .bytesTotal)
            try c.encode(p.kibPerSecond, forKey: .kibPerSecond)
        case .deviceFinished(let f):
            try c.encode(f.device, forKey: .device)
            try c.encode(f.outcome, forKey: .outcome)
            try c.encodeIfPresent(f.durationMs, forKey: .durationMs)
            try c.encodeIfPresent(f.error, forKey: .error)
            try c.encodeIfPresent(f.adapter, forKey: .adapter)
        case .adapterFailed(let device, let adapter, let message):
            try c.encode(device, forKey: .device)
            try c.encode(adapter, forKey: .adapter)
            try c.encode(message, forKey: .message)
        case .leaseLost(let device, let message):
            try c.encode(device, forKey: .device)
            try c.encode(message, forKey: .message)
        case .runFinished(let message, let total):
            try c.encode(message, forKey: .message)
            try c.encode(total, forKey: .total)
        case .stopRequested(let message), .journalRepaired(let message), .storeUnavailable(let message), .storeAvailable(let message):
            try c.encode(message, forKey: .message)
        }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let at = try c.decode(WallTime.self, forKey: .at)
        func text(_ key: CodingKeys) throws -> String { try c.decode(String.self, forKey: key) }
        let kind: Kind
        switch try c.decode(EventType.self, forKey: .type) {
        case .runStarted: kind = .runStarted(workflow: try text(.message), total: try c.decode(Int.self, forKey: .total))
        case .deviceStarted: kind = .deviceStarted(device: try text(.device), attempt: try c.decode(Int.self, forKey: .attempt))
        case .stepFinished:
            kind = .stepFinished(StepFinished(device: try text(.device), step: try text(.step), attempt: try c.decode(Int.self, forKey: .attempt),
                                              outcome: try c.decode(StepOutcome.self, forKey: .outcome),
                                              durationMs: try c.decode(Double.self, forKey: .durationMs),
                                              error: try c.decodeIfPresent(FailureRecord.self, forKey: .error)))
        case .stepRetry:
            kind = .stepRetry(StepRetry(device: try text(.device), step: try text(.step), attempt: try c.decode(Int.self, forKey: .attempt),
                                        delayMs: try c.decode(Double.self, forKey: .delayMs),
                                        error: try c.decode(FailureRecord.self, forKey: .error)))
        case .stepProgress:
            kind = .stepProgress(StepProgress(device: try text(.device), step: try text(.step), attempt: try c.decode(Int.self, forKey: .attempt),
                                              bytes: try c.decode(Int.self, forKey: .bytes),
                                              bytesTotal: try c.decodeIfPresent(Int.self, forKey: .bytesTotal),
                                              kibPerSecond: try c.decode(Double.self, forKey: .kibPerSecond)))
        case .deviceFinished:
            kind = .deviceFinished(DeviceFinished(device: try text(.device), outcome: try c.decode(DeviceOutcome.self, forKey: .outcome),
                                                  durationMs: try c.decodeIfPresent(Double.self, forKey: .durationMs),
                                                  error: try c.decodeIfPresent(FailureRecord.self, forKey: .error),
                                                  adapter: try c.decodeIfPresent(String.self, forKey: .adapter)))
        case .stopRequested: kind = .stopRequested(message: try text(.message))
        case .adapterFailed: kind = .adapterFailed(device: try text(.device), adapter: try text(.adapter), message: try text(.message))
        case .journalRepaired: kind = .journalRepaired(message: try text(.message))
        case .runFinished: kind = .runFinished(message: try text(.message), total: try c.decode(Int.self, forKey: .total))
        case .leaseLost: kind = .leaseLost(device: try text(.device), message: try text(.message))
        case .storeUnavailable: kind = .storeUnavailable(message: try text(.message))
        case .storeAvailable: kind = .storeAvailable(message: try text(.message))
        }
        self.init(kind, at: at)
    }
}

extension RunEvent {
    /// The event as one line of JSON, without its newline, exactly as `JSONLinesEventSink` writes it:
    /// for sinks outside the engine (the command line's standard output).
    public func jsonLine() -> Data { Data(RecordEncoder.compact(self)) }
}

/// Receives run events. `emit` is called from many tasks and must be cheap and non-blocking.
public protocol RunEventSink: Sendable {
    func emit(_ event: RunEvent)
    /// Called once at the end of the run; flush what is buffered.
    func finish() async
}

/// Work a station does beside the run for each device that finishes (`provision run --on-device`): an
/// event sink the runner waits for before the report's final write, so the report records what it did
/// (`run.on_device`).
public protocol DeviceHooks: RunEventSink {
    /// Waits for the work still to do — each piece bounded by its own time limit, and none started once
    /// the operator has stopped the run — and says what was done. Called once the run's devices are done.
    func settle() async -> OnDeviceInfo
}

/// Fans events out to several sinks.
public final class EventBus: Sendable {
    private let sinks: Mutex<[any RunEventSink]>

    public init(_ sinks: [any RunEventSink] = []) {
        self.sinks = Mutex(sinks)
    }

    public func add(_ sink: any RunEventSink) { sinks.withLock { $0.append(sink) } }

    /// Whether any sink listens (a run makes no event when none does).
    public var isListening: Bool { sinks.withLock { !$0.isEmpty } }

    /// The event is only made when some sink is listening (a run without a display or `--events`
    /// makes none: each costs a timestamp and copies, twenty-odd times per device).
    public func emit(_ kind: @autoclosure () -> RunEvent.Kind) {
        let sinks = self.sinks.withLock { $0 }
        guard !sinks.isEmpty else { return }
        let event = RunEvent(kind())
        for s in sinks { s.emit(event) }
    }

    public func finish() async {
        for s in sinks.withLock({ $0 }) { await s.finish() }
    }
}
