import McuMgr
import BLE
import Synchronization

/// One virtual peripheral: its identity, model and faults (immutable), and its state (created on first
/// use, so an untouched device of a 10,000-device fleet costs only its identity). The GATT server
/// exists only while a connection is being served.
package final class VirtualDevice: Sendable {
    let id: String
    package let address: BluetoothAddress
    let advertisedName: String
    /// Its model (kept once, by its layout: a fleet of 100,000 devices kept 100,000 copies).
    var model: DeviceModel { layout.model }
    /// Its faults (shared by the devices of its model that override none: a fleet of 100,000 devices
    /// kept 100,000 copies of 200 bytes).
    var faults: FaultSettings { sharedFaults.value }
    private let sharedFaults: SharedFaults
    /// The device's own layers of `${variables}` (`variable(_:)` reads them in order, with the built-ins
    /// and the model's defaults; no merged copy per device).
    private let overrideVariables: [String: String]
    private let inventoryVariables: [String: String]
    private let specName: String
    let advertisingData: AdvertisingData
    /// Offset of the first advertisement in a scan (unscaled), drawn from the advertising interval.
    let firstAdvertisement: Duration
    /// The advertising interval (unscaled), drawn once per device from the model's range: a paced
    /// connect waits for the device's next advertising event.
    let advertisingInterval: Duration
    let journal: StateJournal?
    /// The GATT layout its connections start from (shared by the devices of its model and faults).
    let layout: DatabaseLayout
    /// The unit's provisioning side (`esp_prov:` models).
    let esp: ESPUnit?

    struct Runtime {
        var connected = false
        /// Off the air (rebooting) until then.
        var offUntil: ContinuousClock.Instant?
        /// `drop_mid_upload` struck already (it strikes once).
        var droppedMidUpload = false
        /// What a device keeps once used, each boxed on first use: an untouched device of a large fleet
        /// holds two nil pointers instead of some 370 bytes, and one without `mcumgr:` never holds the
        /// MCUmgr state's 216. Only ever touched under the runtime's lock.
        private var stateBox: Box<DeviceState>?
        private var smpBox: Box<McuMgrState>?

        final class Box<Value> {
            var value: Value
            init(_ value: Value) { self.value = value }
        }

        var state: DeviceState? {
            get { stateBox?.value }
            set { stateBox = Self.store(newValue, in: stateBox) }
        }

        /// The MCUmgr device's slots, upload, settings and files (`mcumgr:` models).
        var smp: McuMgrState? {
            get { smpBox?.value }
            set { smpBox = Self.store(newValue, in: smpBox) }
        }

        private static func store<Value>(_ value: Value?, in box: Box<Value>?) -> Box<Value>? {
            guard let value else { return nil }
            guard let box else { return Box(value) }
            box.value = value
            return box
        }
    }

    private let runtime = Mutex(Runtime())

    init(spec: SimulatedDeviceSpec, model: DeviceModel, overrides: DeviceOverrides, faults: SharedFaults, seed: UInt64,
         journal: StateJournal?, layout: DatabaseLayout) {
        id = spec.id
        self.layout = layout
        esp = model.espProv.map { ESPUnit(config: $0) }
        address = spec.address ?? SimulatedDeviceSpec.derivedAddress(for: spec.id)
        sharedFaults = faults
        self.journal = journal
        overrideVariables = overrides.variables
        inventoryVariables = spec.variables
        specName = spec.name ?? spec.id
        let name: String
        let address = self.address
        let (id, specName, overrideVariables, inventoryVariables) = (spec.id, self.specName, overrides.variables, spec.variables)
        let lookup = { (key: String) in
            Self.variable(key, overrides: overrideVariables, id: id, name: specName, address: address, inventory: inventoryVariables,
                          defaults: model.defaults)
        }
        switch model.advertising.name.expand(lookup) {
        case .success(let n): name = n
        case .failure: name = spec.name ?? spec.id
        }
        advertisedName = name
        advertisingData = .make(name: name, services: model.advertising.services)
        var r = SimulatorRandom(seed: seed, device: spec.id, stream: 0xAD00_0000)
        firstAdvertisement = r.duration(in: model.advertising.interval)
        advertisingInterval = r.duration(in: model.advertising.interval)
    }

    /// The device's advertising events: from `epoch` (the fleet's start) + its first advertisement,
    /// every advertising interval, both × `scale`.
    func advertisingEvents(epoch: ContinuousClock.Instant, scale: Double) -> ConnectionEvents {
        ConnectionEvents(anchor: epoch + firstAdvertisement.scaled(scale), interval: advertisingInterval.scaled(scale))
    }

    /// A `${name}` of this device: its per-device override, else a built-in (`id`, `name`, `address`),
    /// else its inventory variable, else the model's default.
    func variable(_ key: String) -> String? {
        Self.variable(key, overrides: overrideVariables, id: id, name: specName, address: address, inventory: inventoryVariables,
                      defaults: layout.model.defaults)
    }

    private static func variable(_ key: String, overrides: [String: String], id: String, name: String, address: BluetoothAddress,
                                 inventory: [String: String], defaults: [String: String]) -> String? {
        if let v = overrides[key] { return v }
        switch key {
        case "id": return id
        case "name": return name
        case "address": return address.description
        default: return inventory[key] ?? defaults[key]
        }
    }

    /// The value of a characteristic for this device (templates resolved).
    /// `${running_version}` is the version of the image an MCUmgr device runs now (so a Firmware
    /// Revision follows an update).
    func value(_ c: DeviceModel.Characteristic) -> Result<[UInt8], TemplateFailure> {
        c.value.resolve { name in
            if name == "running_version", let smp = self.smpState { return smp.primary.version }
            return self.variable(name)
        }
    }

    /// The state value a fresh device starts with: the model's initial value of the state characteristic.
    private func initialState() -> DeviceState {
        guard let path = model.behaviour?.state else { return DeviceState(state: 0) }
        for s in model.services where s.uuid == path.service {
            for c in s.characteristics where c.uuid == path.characteristic {
                if case .success(let v) = value(c), let b = v.first { return DeviceState(state: b) }
            }
        }
        return DeviceState(state: 0)
    }

    /// Applies and records an event; returns the ack for a control write.
    @discardableResult
    func record(_ event: DeviceEvent) -> [UInt8]? {
        let ack = runtime.withLock { rt -> [UInt8]? in
            var s = rt.state ?? initialState()
            defer { rt.state = s }
            return s.apply(event, behaviour: model.behaviour)
        }
        journal?.append(id: id, event)
        return ack
    }

    /// Records a connection attempt; returns its number (1, 2, ...), the stream of its random draws.
    func recordAttempt() -> Int {
        let n = runtime.withLock { rt -> Int in
            var s = rt.state ?? initialState()
            defer { rt.state = s }
            s.apply(.connectAttempt, behaviour: model.behaviour)
            return s.connectAttempts
        }
        journal?.append(id: id, .connectAttempt)
        return n
    }

    /// The value a client last wrote to a stored characteristic, if any.
    func storedValue(_ path: CommandBehaviour.Path) -> [UInt8]? {
        runtime.withLock { $0.state?.stored[path] }
    }

    /// The current state value.
    var stateValue: UInt8 { runtime.withLock { $0.state?.state } ?? initialState().state }

    /// Applies an event read back from a state file (not recorded again).
    func restore(_ event: DeviceEvent) {
        if case .smp(let e) = event {
            runtime.withLock { rt in
                guard let config = model.mcumgr else { return }
                var smp = rt.smp ?? McuMgrState(primary: config.factoryImage { self.variable($0) })
                smp.apply(e, faults: bootFaults)
                rt.smp = smp
            }
            return
        }
        if case .fault("drop_mid_upload") = event { runtime.withLock { $0.droppedMidUpload = true } }
        runtime.withLock { rt in
            var s = rt.state ?? initialState()
            s.apply(event, behaviour: model.behaviour)
            rt.state = s
        }
    }

    /// A copy of the state.
    var snapshot: DeviceState {
        runtime.withLock { $0.state } ?? initialState()
    }

    var isConnected: Bool { runtime.withLock { $0.connected } }

    /// Marks the device connected; false if it already was (a peripheral takes one central).
    func beginConnection() -> Bool {
        runtime.withLock { rt in
            if rt.connected { return false }
            rt.connected = true
            return true
        }
    }

    func endConnection() {
        runtime.withLock { $0.connected = false }
    }

    /// Whether a scan can hear it now (never with `no_advertise`; not while connected or rebooting).
    var isAdvertising: Bool { !faults.noAdvertise && !isConnected && offUntil == nil }

    /// When a rebooting device comes back on the air (nil: it is on).
    var offUntil: ContinuousClock.Instant? {
        runtime.withLock { rt in
            guard let until = rt.offUntil else { return nil }
            if until <= .now {
                rt.offUntil = nil
                return nil
            }
            return until
        }
    }

    /// Takes the device off the air for `duration` (a reset: the time it takes to boot).
    func powerOff(for duration: Duration) {
        runtime.withLock { $0.offUntil = .now + duration }
    }

    // MARK: - MCUmgr

    private var bootFaults: McuMgrState.BootFaults {
        McuMgrState.BootFaults(failedSwap: faults.smpFailedSwap, crashOnTest: faults.smpRevert)
    }

    /// The MCUmgr state now (nil for a device without `mcumgr:`).
    var smpState: McuMgrState? {
        guard let config = model.mcumgr else { return nil }
        return runtime.withLock { $0.smp } ?? McuMgrState(primary: config.factoryImage { self.variable($0) })
    }

    /// Serves one SMP request against the device's state: its answer and what it changed (recorded in
    /// the state file). Nil when `drop_mid_upload` strikes: the device drops the link instead.
    func serveSMP(_ frame: SMPFrame, config: McuMgrConfig) -> SMPServer.Outcome? {
        let server = SMPServer(config: config, notBootable: faults.smpNotBootable)
        let result = runtime.withLock { rt -> (SMPServer.Outcome?, [SMPDeviceEvent], Bool) in
            var smp = rt.smp ?? McuMgrState(primary: config.factoryImage { self.variable($0) })
            let outcome = server.handle(frame, state: smp)
            if let fraction = faults.smpDropMidUpload, !rt.droppedMidUpload, let upload = smp.upload,
               outcome.events.contains(where: { if case .uploadChunk(let off, let data) = $0 { return Double(off + data.count) > fraction * Double(upload.length) && off > 0 } else { return false } }) {
                rt.droppedMidUpload = true
                rt.smp = smp
                return (nil, [], true)
            }
            for e in outcome.events { smp.apply(e, faults: bootFaults) }
            rt.smp = smp
            return (outcome, outcome.events, false)
        }
        if result.2 { record(.fault("drop_mid_upload")) }
        for e in result.1 { journal?.append(id: id, .smp(e)) }
        return result.0
    }
}

/// A device's faults, kept once for the devices that share them (`SimulatedCentral`).
final class SharedFaults: Sendable {
    let value: FaultSettings

    init(_ value: FaultSettings) {
        self.value = value
    }
}
