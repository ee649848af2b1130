import Synchronization

/// Stopping a run: tracks in-flight devices and the run's stop state. A first stop (Ctrl-C, the
/// failure threshold, a journal that cannot be written) stops new work, cuts at once the in-flight
/// devices nothing was sent to yet (not connected: `RunContext.reach`), and starts the grace timer for
/// the others; when it expires, or on a second Ctrl-C, every in-flight device is cut (cancelled).
final class StopCoordinator: Sendable {
    private struct State {
        var graceful = false
        var hard = false
        var info: StopInfo?
        var inflight: [String: Task<Void, Never>] = [:]
        var peak = 0
        var graceTimer: Task<Void, Never>?
    }

    private let state = Mutex(State())
    private let events: EventBus
    private let grace: Duration
    /// Which devices have connected (nil: every in-flight device is treated as reached).
    private let reached: ReachedDevices?

    init(events: EventBus, grace: Duration, reached: ReachedDevices? = nil) {
        self.events = events
        self.grace = grace
        self.reached = reached
    }

    var isStopping: Bool { state.withLock { $0.graceful } }
    var info: StopInfo? { state.withLock { $0.info } }
    var peakInFlight: Int { state.withLock { $0.peak } }

    /// Follows the operator's stop requests: the first stops new work, the second cuts.
    func follow(_ controller: RunController) {
        let grace = self.grace
        controller.onStop { [weak self] n in
            if n == 1 {
                self?.beginStop(StopInfo(reason: .interrupted, message: "stop requested: no new devices; in-flight devices may finish for up to \(grace)"))
            } else {
                self?.escalate(StopInfo(reason: .interrupted, message: "stop requested twice: in-flight devices cut"))
            }
        }
    }

    func started(_ id: String, _ task: Task<Void, Never>) {
        let cut = state.withLock { s -> Bool in
            s.inflight[id] = task
            s.peak = max(s.peak, s.inflight.count)
            return s.hard
        }
        if cut { task.cancel() }
    }

    func finished(_ id: String) {
        state.withLock { _ = $0.inflight.removeValue(forKey: id) }
    }

    /// Stops new work (the first reason is kept) and starts the grace period for in-flight devices.
    func beginStop(_ info: StopInfo) {
        let first = state.withLock { s -> Bool in
            guard !s.graceful else { return false }
            s.graceful = true
            s.info = info
            return true
        }
        guard first else { return }
        events.emit(.stopRequested(message: info.message))
        cutUnreached()
        let grace = self.grace
        let timer = Task { [weak self] in
            do { try await Task.sleep(for: grace) } catch { return }
            self?.cutAll()
        }
        state.withLock { $0.graceTimer = timer }
    }

    /// Whether a device is in flight now.
    func isInFlight(_ id: String) -> Bool { state.withLock { $0.inflight[id] != nil } }

    /// Cuts one in-flight device (its lease was lost), if it is in flight.
    func cut(_ id: String) {
        let task = state.withLock { $0.inflight[id] }
        task?.cancel()
    }

    /// A second stop request cuts every device; the first request's promise that in-flight devices may
    /// finish no longer holds, so its message gives way to this one (another reason, such as the
    /// failure threshold, is kept).
    func escalate(_ info: StopInfo) {
        beginStop(info)
        state.withLock { s in if s.info?.reason == info.reason { s.info = info } }
        cutAll()
    }

    /// Cuts the in-flight devices that have not connected yet: nothing was sent to them, so nothing is
    /// lost by not waiting (a unit that is not advertising would otherwise hold the stop for its whole scan).
    private func cutUnreached() {
        guard let reached else { return }
        let tasks = state.withLock { s in reached.cutUnreached(Array(s.inflight.keys)).compactMap { s.inflight[$0] } }
        for t in tasks { t.cancel() }
    }

    func cutAll() {
        let tasks = state.withLock { s -> [Task<Void, Never>] in
            s.hard = true
            return Array(s.inflight.values)
        }
        for t in tasks { t.cancel() }
    }

    func cancelGraceTimer() {
        state.withLock { $0.graceTimer?.cancel() }
    }
}

/// The devices of a run that have connected, and those a stop cut before they did: decided under one
/// lock, so a device either connects (and then finishes, as in-flight devices do) or is cut with nothing
/// sent to it (`StopCoordinator` cuts those at once instead of waiting out a scan).
final class ReachedDevices: Sendable {
    private let state = Mutex<(reached: Set<String>, cut: Set<String>)>(([], []))

    /// The device is about to connect; false when a stop has cut it before its first connection (it must not).
    func reach(_ device: String) -> Bool {
        state.withLock { r in
            guard !r.cut.contains(device) else { return false }
            r.reached.insert(device)
            return true
        }
    }

    /// Of `devices`, those not yet connected are cut (they will not connect); returns them.
    func cutUnreached(_ devices: [String]) -> [String] {
        state.withLock { r in
            let unreached = devices.filter { !r.reached.contains($0) }
            r.cut.formUnion(unreached)
            return unreached
        }
    }

    /// Whether a stop cut the device before anything was sent to it.
    func wasCut(_ device: String) -> Bool { state.withLock { $0.cut.contains(device) } }
}
