import Synchronization

/// Stopping a run: tracks in-flight devices and the run's stop state. A first stop (Ctrl-C, the
/// failure threshold, a journal that cannot be written) stops new work and starts the grace timer;
/// when it expires, or on a second Ctrl-C, every in-flight device is cut (cancelled).
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

    init(events: EventBus, grace: Duration) {
        self.events = events
        self.grace = grace
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
                self?.beginStop(StopInfo(reason: .interrupted, message: "stop requested twice: in-flight devices cut"))
                self?.cutAll()
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
