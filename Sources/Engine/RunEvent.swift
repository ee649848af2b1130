import Foundation
import Synchronization

/// Something that happened during a run, for the progress display and `--events` (JSON lines).
public struct RunEvent: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable {
        case runStarted = "run_started"
        case deviceStarted = "device_started"
        case stepFinished = "step_finished"
        case stepRetry = "step_retry"
        case deviceFinished = "device_finished"
        case stopRequested = "stop_requested"
        case adapterFailed = "adapter_failed"
        /// Resume repaired the journal before appending (a torn last line was cut); `message` says what and where.
        case journalRepaired = "journal_repaired"
        case runFinished = "run_finished"
        /// On a line: this station lost its lease on a device in flight (it is cut); `message` says why.
        case leaseLost = "lease_lost"
        /// On a line: the line database cannot be reached; no device is claimed until it is back.
        case storeUnavailable = "store_unavailable"
        /// On a line: the line database is reachable again.
        case storeAvailable = "store_available"
    }

    public var type: Kind
    public var at: String
    public var device: String?
    public var step: String?
    public var attempt: Int?
    public var outcome: String?
    public var durationMs: Double?
    public var delayMs: Double?
    public var error: FailureRecord?
    public var message: String?
    public var adapter: String?
    public var total: Int?

    public init(_ type: Kind, device: String? = nil, step: String? = nil, attempt: Int? = nil, outcome: String? = nil,
                durationMs: Double? = nil, delayMs: Double? = nil, error: FailureRecord? = nil, message: String? = nil,
                adapter: String? = nil, total: Int? = nil) {
        self.type = type
        self.at = WallClock.iso(WallClock.now())
        self.device = device
        self.step = step
        self.attempt = attempt
        self.outcome = outcome
        self.durationMs = durationMs
        self.delayMs = delayMs
        self.error = error
        self.message = message
        self.adapter = adapter
        self.total = total
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

/// Fans events out to several sinks.
public final class EventBus: Sendable {
    private let sinks: Mutex<[any RunEventSink]>

    public init(_ sinks: [any RunEventSink] = []) {
        self.sinks = Mutex(sinks)
    }

    public func add(_ sink: any RunEventSink) { sinks.withLock { $0.append(sink) } }

    /// The event is only made when some sink is listening (a run without a display or `--events`
    /// makes none: each costs a timestamp and copies, twenty-odd times per device).
    public func emit(_ event: @autoclosure () -> RunEvent) {
        let sinks = self.sinks.withLock { $0 }
        guard !sinks.isEmpty else { return }
        let event = event()
        for s in sinks { s.emit(event) }
    }

    public func finish() async {
        for s in sinks.withLock({ $0 }) { await s.finish() }
    }
}
