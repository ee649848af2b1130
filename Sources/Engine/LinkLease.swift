import BLE

/// Where one device's link is: the adapter it is on, what was heard of it, the connection slot it
/// holds, a link a scan made for the connect step, and the adapters to avoid after repeated link
/// failures. A value with no radio: the link steps report what they did (`Event`) and it answers what
/// must follow (a slot given back, an adapter taken out of the run); it decides which adapter a connect
/// uses and when a retry looks for the device on another adapter.
///
/// Rules:
/// - A device holds at most one connection slot, of the adapter it is on; the slot goes back when its
///   link closes or its connect fails — never twice, never while a held link still owns it.
/// - A scan that connected by address holds that link (and its slot) for the next connect step.
/// - An adapter that failed (`adapterFailure`) is taken out of the run; the device forgets it (and, after
///   a connect, what it heard there), so a retry finds it on another adapter.
/// - After a connect step fails with `connect_failed` or `timeout` on a station with several adapters,
///   the adapter is avoided from then on and the retry looks for the device elsewhere first.
struct LinkLease: Sendable, Equatable {
    /// What an advertisement showed of the device (or the link a scan made).
    struct Heard: Sendable, Equatable {
        var address: BluetoothAddress
        var rssi: Int
        var name: String?

        init(address: BluetoothAddress, rssi: Int, name: String? = nil) {
            self.address = address
            self.rssi = rssi
            self.name = name
        }

        init(_ ad: Advertisement) {
            self.init(address: ad.address, rssi: ad.rssi, name: ad.name)
        }
    }

    /// The adapter the device is on (found there, connected there), by id.
    private(set) var adapter: String?
    private(set) var heard: Heard?
    /// The adapter whose connection slot the device holds.
    private(set) var slot: String?
    /// A link made by a scan step, waiting for the connect step.
    private(set) var holdsLink = false
    /// Adapters where the device's connects kept failing.
    private(set) var avoid: Set<String> = []

    enum Event: Sendable, Equatable {
        /// A scan heard the device on an adapter.
        case heard(Heard, on: String)
        /// A retry's look elsewhere heard the device on an adapter (kept only if it is not one to avoid).
        case heardElsewhere(Heard, on: String)
        /// A connection slot of the adapter is now the device's.
        case slotTaken(on: String)
        /// A scan connected to the device by address; the link (and the slot) waits for the connect step.
        /// `heard`: what the link showed (its RSSI), if anything.
        case linkHeld(on: String, heard: Heard?)
        /// A scan's connect by address failed (`adapterFailure`: the adapter itself failed).
        case scanConnectFailed(on: String, adapterFailure: String?)
        /// A connect step chose this adapter (for the device, from now on).
        case connecting(on: String)
        /// A connect step's session is up (it took the held link, if there was one).
        case connected
        /// A connect step's session failed (`adapterFailure`: the adapter itself failed).
        case connectFailed(on: String, adapterFailure: String?)
        /// The device's link is closed (session, held link, subscriptions).
        case closed
    }

    enum Action: Sendable, Equatable {
        /// Give the adapter's connection slot back.
        case releaseSlot(String)
        /// The adapter may hold fewer links than it said: follow its slot count down.
        case followSlots(String)
        /// Take the adapter out of the run (its devices go to the others) and say so.
        case adapterFailed(String, why: String)
    }

    mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .heard(let h, let on):
            heard = h
            adapter = on
            return []
        case .heardElsewhere(let h, let on):
            guard !avoid.contains(on) else { return [] }
            heard = h
            adapter = on
            return []
        case .slotTaken(let on):
            slot = on
            adapter = on
            return []
        case .linkHeld(let on, let h):
            holdsLink = true
            adapter = on
            if let h { heard = h }
            return []
        case .scanConnectFailed(let on, let failure):
            var out = releaseSlot() + [.followSlots(on)]
            if let failure {
                out.append(.adapterFailed(on, why: failure))
                if adapter == on { adapter = nil }
            }
            return out
        case .connecting(let on):
            adapter = on
            return []
        case .connected:
            holdsLink = false
            return []
        case .connectFailed(let on, let failure):
            holdsLink = false
            var out = releaseSlot() + [.followSlots(on)]
            if let failure {
                out.append(.adapterFailed(on, why: failure))
                // Let the retry find the device on another adapter.
                if adapter == on { adapter = nil }
                heard = nil
            }
            return out
        case .closed:
            holdsLink = false
            return releaseSlot()
        }
    }

    private mutating func releaseSlot() -> [Action] {
        guard let s = slot else { return [] }
        slot = nil
        return [.releaseSlot(s)]
    }

    /// The adapter a connect uses: the device's own unless it failed, else the first that works; nil
    /// when none works.
    func connectAdapter(among adapters: [String], failed: (String) -> Bool) -> String? {
        if let a = adapter, !failed(a) { return a }
        return adapters.first { !failed($0) }
    }

    /// The address a connect step connects to: the held link's, the one heard, else the inventory's.
    func peer(inventory: BluetoothAddress?) -> BluetoothAddress? {
        heard?.address ?? inventory
    }

    /// Before a failed step is retried: after a connect failure (`connect_failed`, `timeout`) on a
    /// station with several adapters, the adapter is avoided and the device is looked for elsewhere
    /// (the address to look for, and the adapters to avoid); nil otherwise.
    mutating func lookElsewhere(after f: DeviceFailure, isConnect: Bool, adapterCount: Int) -> (address: BluetoothAddress, avoid: Set<String>)? {
        guard isConnect, f.kind == .connectFailed || f.kind == .timeout, adapterCount > 1, let a = adapter, let h = heard else { return nil }
        avoid.insert(a)
        return (h.address, avoid)
    }
}
