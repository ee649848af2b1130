import AsyncSupport
import BLE

/// One scan of a simulated adapter, pulled by its consumer: nothing runs while nobody asks for the next
/// advertisement, so 10,000 devices cost no timers.
///
/// Round 0 reports every candidate device in the order of its first advertisement (at its offset when
/// latency is on, all at once in zero-latency mode). With duplicates allowed, later rounds repeat every
/// `period` — in zero-latency mode too (all at once, every `reportPeriod`), as a real scanner keeps
/// hearing a device that keeps advertising: a consumer that remembers advertisements for a limited time
/// (the engine's ScanHub) must still find a device that has been advertising since the scan began. A
/// device that starts advertising during the scan (its link went down) is reported at once.
final class ScanCursor: Sendable {
    let candidates: [VirtualDevice]
    let filter: ScanFilter
    let scale: Double
    let period: Duration
    let seed: UInt64
    let adapterID: String
    let start: ContinuousClock.Instant

    private struct State {
        var index = 0
        var round: UInt64 = 0
        var appeared: [VirtualDevice] = []
        /// Ids in `appeared`: a consumer that stops pulling holds at most one entry per device.
        var appearedIDs: Set<String> = []
        var seen: Set<String> = []
        /// A wake-up that came while the consumer was not waiting (it does not wait for the next one).
        var woken = false
        var closed = false
    }

    /// The cursor's state; the consumer waits here for a wake-up (a device appeared, the scan closed).
    private let state = WaiterQueue<State, Void>(State())

    init(candidates: [VirtualDevice], filter: ScanFilter, scale: Double, period: Duration, seed: UInt64, adapterID: String) {
        self.candidates = candidates
        self.filter = filter
        self.scale = scale
        self.period = period
        self.seed = seed
        self.adapterID = adapterID
        self.start = .now
    }

    private enum Step {
        case emit(VirtualDevice, round: UInt64)
        case wait(ContinuousClock.Instant?)
        case skip
        case end
    }

    /// The next advertisement, or nil when the scan ends (adapter closed, consumer cancelled).
    func next() async -> Advertisement? {
        while true {
            if Task.isCancelled { return nil }
            let now = ContinuousClock.now
            let step = state.withLock { s, _ -> Step in
                if s.closed { return .end }
                if !s.appeared.isEmpty {
                    let d = s.appeared.removeFirst()
                    s.appearedIDs.remove(d.id)
                    return .emit(d, round: s.round)
                }
                if s.index < candidates.count {
                    let d = candidates[s.index]
                    let offset = scale > 0 ? d.firstAdvertisement.scaled(scale * d.faults.slow) : .zero
                    let due = start + period * Int(clamping: s.round) + offset
                    if due > now { return .wait(due) }
                    s.index += 1
                    return .emit(d, round: s.round)
                }
                if filter.allowDuplicates, !candidates.isEmpty {
                    s.round += 1
                    s.index = 0
                    return .skip
                }
                return .wait(nil)
            }
            switch step {
            case .end: return nil
            case .skip: continue
            case .wait(let deadline): await wait(until: deadline)
            case .emit(let d, let round):
                guard d.isAdvertising else { continue }
                if !filter.allowDuplicates {
                    let fresh = state.withLock { s, _ in s.seen.insert(d.id).inserted }
                    guard fresh else { continue }
                }
                var r = SimulatorRandom(seed: seed, device: d.id, stream: 0xAD50_0000_0000 &+ round)
                let rssi = r.int(in: d.model.advertising.rssi.lowerBound, d.model.advertising.rssi.upperBound)
                let ad = Advertisement(address: d.address, rssi: rssi, data: d.advertisingData,
                                       connectable: d.model.advertising.connectable, time: .now, adapter: adapterID)
                guard filter.matches(ad) else { continue }
                return ad
            }
        }
    }

    /// A device began advertising (its link went down): report it promptly.
    func deviceAppeared(_ d: VirtualDevice) {
        if !filter.addresses.isEmpty, !filter.addresses.contains(where: { $0.sameDevice(as: d.address) }) { return }
        if !filter.names.isEmpty, !filter.names.contains(d.advertisedName) { return }
        state.withLock { s, waiters in
            guard s.appearedIDs.insert(d.id).inserted else { return }
            s.appeared.append(d)
            Self.wake(&s, &waiters)
        }
    }

    /// Ends the scan (the adapter closed).
    func close() {
        state.withLock { s, waiters in
            s.closed = true
            Self.wake(&s, &waiters)
        }
    }

    /// Wakes the waiting consumer, or leaves the wake-up for its next wait.
    private static func wake(_ s: inout State, _ waiters: inout Waiters<Void>) {
        if waiters.resumeAll(()) == 0 { s.woken = true }
    }

    /// Waits until `deadline` (forever when nil), a wake-up, or cancellation.
    private func wait(until deadline: ContinuousClock.Instant?) async {
        _ = await state.wait(timeout: deadline.map { max(.zero, $0 - .now) }) { s, _ in
            guard s.woken || s.closed else { return nil }
            s.woken = false
            return ()
        }
    }
}
