import Engine
import Foundation
import Synchronization
import Workflow

/// Shows a run's progress. On a terminal: one status line redrawn at most 10 times a second, however
/// many events arrive (updates are coalesced into counters; a timer draws). Elsewhere: one line per
/// finished device and a summary line every 10 seconds.
final class ProgressDisplay: RunEventSink {
    private struct State {
        var total = 0
        var succeeded = 0
        var failed = 0
        var interrupted = 0
        var skipped = 0
        var inflight = 0
        var retries = 0
        var dirty = false
        var started: ContinuousClock.Instant = .now
        var lastSummary: ContinuousClock.Instant = .now
        var stopping: String?
        /// Set by `finish()`: nothing is drawn after it.
        var finished = false
        /// Long transfers in flight (a firmware upload), by device: bytes so far, total, KiB/s.
        var transfers: [String: RunEvent.StepProgress] = [:]
    }

    private let state = Mutex(State())
    private let output: Output
    private let interactive: Bool
    private let color: Bool
    private let timer = Mutex<Task<Void, Never>?>(nil)
    private let slots: @Sendable () -> [(id: String, used: Int, capacity: Int)]
    /// Whether the operator asked for the stop (a signal): that is acknowledged where it is caught, so
    /// the display does not say "stopping:" a second time.
    private let operatorStopped: @Sendable () -> Bool

    init(output: Output, interactive: Bool, color: Bool, slots: @escaping @Sendable () -> [(id: String, used: Int, capacity: Int)],
         operatorStopped: @escaping @Sendable () -> Bool = { false }) {
        self.output = output
        self.interactive = interactive
        self.color = color
        self.slots = slots
        self.operatorStopped = operatorStopped
        let task = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(interactive ? 100 : 1000))
                self?.tick()
            }
        }
        timer.withLock { $0 = task }
    }

    func emit(_ event: RunEvent) {
        var line: String?
        state.withLock { s in
            switch event.kind {
            case .runStarted(_, let total):
                s.total = total
                s.started = .now
                s.lastSummary = .now
            case .deviceStarted:
                s.inflight += 1
            case .stepRetry:
                s.retries += 1
            case .stepProgress(let p):
                if let total = p.bytesTotal, p.bytes >= total {
                    s.transfers[p.device] = nil
                } else {
                    s.transfers[p.device] = p
                }
            case .deviceFinished(let f):
                s.inflight -= 1
                s.transfers[f.device] = nil
                switch f.outcome {
                case .succeeded: s.succeeded += 1
                case .failed: s.failed += 1
                case .interrupted: s.interrupted += 1
                case .skipped: s.skipped += 1
                }
                if !interactive || f.outcome != .succeeded {
                    line = Self.deviceLine(f, color: color)
                }
            case .stopRequested(let message):
                s.stopping = message
                if !operatorStopped() { line = "stopping: \(ControlCharacters.escaped(message))" }
            case .leaseLost(let device, let message):
                line = "\(ControlCharacters.escaped(device))  \(ControlCharacters.escaped(message))"
            case .storeUnavailable(let message), .storeAvailable(let message):
                line = "line: \(ControlCharacters.escaped(message))"
            default:
                break
            }
            s.dirty = true
        }
        if let line {
            if interactive {
                output.writeErr("\r\u{1B}[K" + line + "\n")
            } else {
                output.err(line)
            }
        }
    }

    /// One device's line. What came from the device or the files (id, step, message) is escaped; only
    /// the outcome's colour is a terminal sequence.
    static func deviceLine(_ e: RunEvent.DeviceFinished, color: Bool) -> String {
        let id = ControlCharacters.escaped(e.device)
        let ms = e.durationMs.map { String(format: "%.0f ms", $0) } ?? ""
        switch e.outcome {
        case .succeeded:
            return "\(id)  \(color ? "\u{1B}[32msucceeded\u{1B}[0m" : "succeeded")  \(ms)"
        case .skipped:
            // Only a stop makes a started device `skipped`: it was cut before anything was sent to it.
            return "\(id)  skipped  (stopped before anything was sent to it)"
        case .failed, .interrupted:
            let outcome = e.outcome.rawValue
            let err = e.error.map { ControlCharacters.escaped("\($0.kind.rawValue) at `\($0.step ?? "?")`: \($0.message)") } ?? ""
            return "\(id)  \(color ? "\u{1B}[31m\(outcome)\u{1B}[0m" : outcome)  \(ms)  \(err)"
        }
    }

    private func tick() {
        let (text, summary): (String?, String?) = state.withLock { s in
            if s.finished { return (nil, nil) }
            let done = s.succeeded + s.failed + s.interrupted + s.skipped
            let elapsed = (ContinuousClock.now - s.started)
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let rate = seconds > 0 ? Double(done) / seconds * 60 : 0
            let remaining = s.total - done
            let eta = rate > 0 ? Self.format(Double(remaining) / rate * 60) : "--"
            var status = "[\(done)/\(s.total)] ok \(s.succeeded)  failed \(s.failed)  in flight \(s.inflight)"
            status += String(format: "  %.1f dev/min  ETA %@", rate, eta)
            if s.retries > 0 { status += "  retries \(s.retries)" }
            if !s.transfers.isEmpty {
                let rate = s.transfers.values.reduce(0) { $0 + $1.kibPerSecond }
                status += String(format: "  transfers %d at %.1f KiB/s", s.transfers.count, rate)
            }
            let slotText = slots().map { "\($0.id) \($0.used)/\($0.capacity)" }.joined(separator: ", ")
            if !slotText.isEmpty { status += "  slots: \(slotText)" }
            if interactive {
                guard s.dirty else { return (nil, nil) }
                s.dirty = false
                return (status, nil)
            }
            if ContinuousClock.now - s.lastSummary >= .seconds(10) {
                s.lastSummary = .now
                // Each transfer in flight: its bytes and rate (the first ten, by device).
                let each = s.transfers.values.sorted { $0.device < $1.device }.prefix(10).map { p in
                    let total = p.bytesTotal.map { "/\($0 / 1024)" } ?? ""
                    return ControlCharacters.escaped(p.device) + " \(p.bytes / 1024)\(total) KiB" + String(format: " %.1f KiB/s", p.kibPerSecond)
                }
                return (nil, "progress: " + status + (each.isEmpty ? "" : "\n  " + each.joined(separator: "; ")))
            }
            return (nil, nil)
        }
        if let text { output.writeErr("\r\u{1B}[K" + text) }
        if let summary { output.err(summary) }
    }

    static func format(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "--" }
        let s = Int(seconds.rounded())
        return s >= 60 ? "\(s / 60)m\(s % 60)s" : "\(s)s"
    }

    func finish() async {
        timer.withLock { $0?.cancel() }
        state.withLock { $0.finished = true }
        if interactive { output.writeErr("\r\u{1B}[K") }
    }
}
