import AsyncSupport
import BLE
import Synchronization

/// The adapters of a run: each with its connection slots and its shared scan.
final class AdapterPool: Sendable {
    final class Adapter: Sendable {
        let central: any Central
        let slots: AsyncSemaphore
        let hub: ScanHub
        let failure = Mutex<String?>(nil)
        /// Permits taken out of `slots` for good because the adapter holds fewer links than it said.
        private let withheld = Mutex(0)

        init(central: any Central, slots: Int) {
            self.central = central
            self.slots = AsyncSemaphore(permits: max(1, min(slots, central.connectionSlots)), cancellationError: BLEError.cancelled)
            self.hub = ScanHub(central: central)
        }

        var id: String { central.id }
        var isFailed: Bool { failure.withLock { $0 != nil } }
        /// Its controller is down for now (reset, went away) and being brought up again.
        var isDown: Bool { central.outage != nil }

        /// Takes the adapter out of the run (its devices go to the others); the first reason is kept.
        func markFailed(_ why: String) {
            failure.withLock { if $0 == nil { $0 = why } }
        }

        /// Follows the adapter's slot count down (a controller that answered Connection Limit Exceeded):
        /// the permits above it are taken and never given back, for the rest of the run.
        func followSlots() {
            let target = max(1, min(slots.capacity, central.connectionSlots))
            let more = withheld.withLock { w -> Int in
                let n = max(0, slots.capacity - target - w)
                w += n
                return n
            }
            for _ in 0..<more {
                Task { [slots] in try? await slots.acquire() }
            }
        }
    }

    let adapters: [Adapter]
    /// The adapters' ids, in order.
    let ids: [String]
    private let byID: [String: Adapter]

    init(centrals: [any Central], slotsPerAdapter: Int?) {
        adapters = centrals.map { Adapter(central: $0, slots: slotsPerAdapter ?? $0.connectionSlots) }
        ids = adapters.map(\.id)
        byID = Dictionary(adapters.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The adapter with this id.
    func adapter(_ id: String) -> Adapter? {
        adapters.count == 1 ? (adapters[0].id == id ? adapters[0] : nil) : byID[id]
    }

    /// An adapter that connects by address without a scan (see `Central.connectsByAddress`) for a device
    /// whose address is known: not one to avoid if possible, then the most free slots.
    func connectingAdapter(avoid: Set<String>) -> Adapter? {
        let usable = adapters.filter { !$0.isFailed && $0.central.connectsByAddress }
        func score(_ a: Adapter) -> (Int, Int, Int) {
            (a.isDown ? 0 : 1, avoid.contains(a.id) ? 0 : 1, a.slots.capacity - a.slots.usage.current)
        }
        return usable.max { score($0) < score($1) }
    }

    /// The adapter for a device's connect: `current` unless it failed, or its controller is down while
    /// another's is up; then the first that is up; then one that is down but not failed (its connects
    /// wait for the controller to come back).
    func working(preferring current: Adapter?) -> Adapter? {
        if let current, !current.isFailed, !current.isDown { return current }
        if let up = adapters.first(where: { !$0.isFailed && !$0.isDown }) { return up }
        if let current, !current.isFailed { return current }
        return adapters.first { !$0.isFailed }
    }

    /// Starts the shared scans ahead of the first device. Not on adapters that connect by address: their
    /// devices with known addresses need no scan (a scan started then would only take turns with the
    /// first connections on a radio that cannot do both); a device found by name starts it on demand.
    func startScanning() async {
        for a in adapters where !a.central.connectsByAddress { await a.hub.start() }
    }

    func stop() async {
        for a in adapters { await a.hub.stop() }
    }

    /// The devices of `hearing` that a live adapter heard lately, best heard (RSSI) first: what a
    /// station on a line claims. Keeps the shared scans running while it is asked.
    func heard(_ hearing: Hearing) async -> [String] {
        var best: [String: Int] = [:]
        for a in adapters where !a.isFailed {
            for ad in await a.hub.recent() {
                guard let id = hearing.device(of: ad) else { continue }
                best[id] = max(best[id] ?? Int.min, ad.rssi)
            }
        }
        return best.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.map(\.key)
    }

    /// Waits for the device's advertisement on every live adapter; the best-heard (RSSI) wins, preferring
    /// adapters not in `avoid` (where the device's links kept failing).
    func find(_ wanted: ScanHub.Wanted, timeout: Duration, avoid: Set<String>) async -> (Advertisement, Adapter)? {
        var live: [Adapter] = []
        for a in adapters where !a.isFailed {
            if let why = await a.hub.failure {
                a.markFailed("scan failed: \(why)")
            } else {
                live.append(a)
            }
        }
        guard !live.isEmpty else { return nil }
        if live.count == 1, let a = live.first {
            return await a.hub.wait(for: wanted, timeout: timeout).map { ($0, a) }
        }
        // First any adapter that hears it; then the best of what every adapter remembers.
        let first: (Advertisement, Adapter)? = await withTaskGroup(of: (Advertisement, Adapter)?.self) { group in
            for a in live { group.addTask { await a.hub.wait(for: wanted, timeout: timeout).map { ($0, a) } } }
            for await r in group where r != nil {
                group.cancelAll()
                return r
            }
            return nil
        }
        guard let first else { return nil }
        // Of every adapter that hears it: not one to avoid, then a free slot, then the best RSSI, then
        // the least busy (Bumble's virtual radio reports the same RSSI everywhere).
        var candidates: [(Advertisement, Adapter)] = [first]
        for a in live where a !== first.1 {
            if let ad = await a.hub.cached(wanted) { candidates.append((ad, a)) }
        }
        func score(_ c: (Advertisement, Adapter)) -> (Int, Int, Int, Int) {
            let usage = c.1.slots.usage.current
            return (avoid.contains(c.1.id) ? 0 : 1, usage < c.1.slots.capacity ? 1 : 0, c.0.rssi, -usage)
        }
        var best = first
        for c in candidates.dropFirst() where score(c) > score(best) { best = c }
        return best
    }
}
