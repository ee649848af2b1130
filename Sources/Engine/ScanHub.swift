import AsyncSupport
import BLE

/// One shared scan per adapter, whose advertisements are routed to the device agents waiting for them,
/// so that scanning does not fight connecting and N devices do not start N scans.
///
/// The hub remembers the latest advertisement per address and per name for `freshness`, so an agent
/// that starts waiting after its device advertised is answered at once. Waiters are indexed by address
/// and by name; only waiters with neither are checked against every advertisement.
actor ScanHub {
    /// What an agent waits for.
    struct Wanted: Sendable {
        var address: BluetoothAddress?
        var name: String?
        var filter: ScanFilter
        var manufacturer: (company: UInt16, prefix: [UInt8])?

        func matches(_ ad: Advertisement) -> Bool {
            if let address, !ad.isFrom(address) { return false }
            if let name, ad.name != name { return false }
            if !filter.matches(ad) { return false }
            if let m = manufacturer {
                guard let d = ad.data.manufacturerData, d.company == m.company, d.data.starts(with: m.prefix) else { return false }
            }
            return ad.connectable
        }
    }

    private struct Waiter {
        var wanted: Wanted
        var continuation: CheckedContinuation<Advertisement?, Never>
    }

    nonisolated let central: any Central
    private let freshness: Duration
    /// How long the adapter keeps scanning with nobody waiting before it stops (a radio that scans
    /// while it connects does both worse, and on a real line scanning costs air time).
    private let idleStop: Duration
    private var byAddress: [UInt64: Advertisement] = [:]
    private var byName: [String: UInt64] = [:]
    private var waiters: [UInt64: Waiter] = [:]
    private var waitersByAddress: [UInt64: Set<UInt64>] = [:]
    private var waitersByName: [String: Set<UInt64>] = [:]
    private var generalWaiters: Set<UInt64> = []
    private var nextID: UInt64 = 0
    private var task: Task<Void, Never>?
    /// Tells a scan that was stopped on purpose from one that ended by itself.
    private var generation = 0
    private var idleTimer: Task<Void, Never>?
    /// Set when the adapter's scan failed; waiters get nil at once.
    private(set) var failure: String?
    private(set) var advertisementsSeen = 0
    /// Advertisements remembered when the stale ones were last dropped.
    private var rememberedAfterSweep = 0

    init(central: any Central, freshness: Duration = .seconds(10), idleStop: Duration = .milliseconds(500)) {
        self.central = central
        self.freshness = freshness
        self.idleStop = idleStop
    }

    /// Starts the adapter's scan (devices are about to be waited for); it stops again when idle.
    func start() {
        ensureScanning()
        scheduleIdleStop()
    }

    func stop() {
        idleTimer?.cancel()
        idleTimer = nil
        generation += 1
        task?.cancel()
        task = nil
    }

    private func ensureScanning() {
        idleTimer?.cancel()
        idleTimer = nil
        guard task == nil, failure == nil else { return }
        generation += 1
        let gen = generation
        let stream = central.scan(ScanFilter(allowDuplicates: true))
        task = Task { [weak self] in
            do {
                for try await ad in stream {
                    guard let self else { return }
                    await self.deliver(ad)
                }
                await self?.ended(gen, error: nil)
            } catch {
                await self?.ended(gen, error: String(describing: error))
            }
        }
    }

    /// With nobody waiting, stop scanning after `idleStop` unless someone comes.
    private func scheduleIdleStop() {
        guard waiters.isEmpty, task != nil, idleTimer == nil else { return }
        let delay = idleStop
        idleTimer = Task { [weak self] in
            do { try await Task.sleep(for: delay) } catch { return }
            await self?.idleStopFired()
        }
    }

    private func idleStopFired() {
        idleTimer = nil
        guard waiters.isEmpty else { return }
        generation += 1
        task?.cancel()
        task = nil
    }

    private func ended(_ gen: Int, error: String?) {
        // A scan stopped on purpose (idle, or the run's end) is not a failure.
        guard gen == generation, task != nil else { return }
        task = nil
        failure = error ?? "scan ended"
        for (_, w) in waiters { w.continuation.resume(returning: nil) }
        waiters = [:]
        waitersByAddress = [:]
        waitersByName = [:]
        generalWaiters = []
    }

    private func deliver(_ ad: Advertisement) {
        advertisementsSeen += 1
        // A device behind a resolvable private address is known by its identity (the inventory's).
        let key = (ad.identity ?? ad.address).value
        byAddress[key] = ad
        if let name = ad.name { byName[name] = key }
        // What is older than `freshness` is never answered again: forget it once the memory has doubled
        // since the last sweep (a line of 100,000 devices would otherwise keep every advertisement).
        if byAddress.count >= 2 * max(1_024, rememberedAfterSweep) { dropStale(now: .now) }
        var candidates: [UInt64] = []
        if let ids = waitersByAddress[key] { candidates.append(contentsOf: ids) }
        if let name = ad.name, let ids = waitersByName[name] { candidates.append(contentsOf: ids) }
        candidates.append(contentsOf: generalWaiters)
        for id in candidates {
            guard let w = waiters[id], w.wanted.matches(ad) else { continue }
            remove(id)
            w.continuation.resume(returning: ad)
        }
        scheduleIdleStop()
    }

    /// Advertisements remembered now (for tests).
    var remembered: Int { byAddress.count }

    /// Forgets the advertisements older than `freshness` (and the names that pointed at them).
    private func dropStale(now: ContinuousClock.Instant) {
        byAddress = byAddress.filter { now - $0.value.time <= freshness }
        byName = byName.filter { byAddress[$0.value] != nil }
        rememberedAfterSweep = byAddress.count
    }

    /// The freshest remembered advertisement that matches, if any.
    func cached(_ wanted: Wanted) -> Advertisement? {
        let now = ContinuousClock.now
        func fresh(_ ad: Advertisement) -> Bool { now - ad.time <= freshness && wanted.matches(ad) }
        if let a = wanted.address, let ad = byAddress[a.value] { return fresh(ad) ? ad : nil }
        if let n = wanted.name, let key = byName[n], let ad = byAddress[key] { return fresh(ad) ? ad : nil }
        if wanted.address == nil && wanted.name == nil {
            return byAddress.values.filter(fresh).max(by: { $0.rssi < $1.rssi })
        }
        return nil
    }

    /// Every advertisement heard within `freshness`, for a station choosing what to claim (the scan is
    /// started if it is not running, and stops again when idle).
    func recent() -> [Advertisement] {
        if failure == nil {
            ensureScanning()
            scheduleIdleStop()
        }
        let now = ContinuousClock.now
        return byAddress.values.filter { now - $0.time <= freshness && $0.connectable }
    }

    /// Waits for a matching advertisement; nil on timeout, cancellation or adapter failure.
    func wait(for wanted: Wanted, timeout: Duration) async -> Advertisement? {
        if let ad = cached(wanted) { return ad }
        if failure != nil { return nil }
        ensureScanning()
        nextID += 1
        let id = nextID
        let timer = Timeouts.shared.schedule(after: timeout) { [weak self] in
            Task { await self?.expire(id) }
        }
        defer { Timeouts.shared.cancel(timer) }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Advertisement?, Never>) in
                if Task.isCancelled {
                    c.resume(returning: nil)
                    return
                }
                waiters[id] = Waiter(wanted: wanted, continuation: c)
                if let a = wanted.address {
                    waitersByAddress[a.value, default: []].insert(id)
                } else if let n = wanted.name {
                    waitersByName[n, default: []].insert(id)
                } else {
                    generalWaiters.insert(id)
                }
            }
        } onCancel: {
            Task { await self.expire(id) }
        }
    }

    private func expire(_ id: UInt64) {
        guard let w = waiters[id] else { return }
        remove(id)
        w.continuation.resume(returning: nil)
        scheduleIdleStop()
    }

    private func remove(_ id: UInt64) {
        guard let w = waiters.removeValue(forKey: id) else { return }
        if let a = w.wanted.address {
            waitersByAddress[a.value]?.remove(id)
            if waitersByAddress[a.value]?.isEmpty == true { waitersByAddress[a.value] = nil }
        } else if let n = w.wanted.name {
            waitersByName[n]?.remove(id)
            if waitersByName[n]?.isEmpty == true { waitersByName[n] = nil }
        } else {
            generalWaiters.remove(id)
        }
    }
}
