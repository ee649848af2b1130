import AsyncSupport
import BLE
import BLESecurity
import Synchronization
import YAML

/// The simulator adapter: an in-process `Central` whose virtual peripherals run real ATT servers
/// (`ATTServer`) over in-memory links, built from device models and inventory specs.
///
/// Seeded and deterministic: every random choice of a device comes from a generator seeded by (run
/// seed, device id, connection number). LE connection creation is serialized like a real controller's
/// (one pending connect at a time). Scans are pulled by their consumers; untouched devices cost only
/// their identity, and a GATT server exists only while its device is connected.
public final class SimulatedCentral: Central {
    public let id: String
    public let connectionSlots: Int
    public var isSimulated: Bool { true }
    /// False: the simulator connects one device at a time and a device that does not advertise holds
    /// that one connect until its deadline (no Filter Accept List), so scan steps scan first.
    public var connectsByAddress: Bool { false }
    public let options: SimulatorOptions
    /// The station's identity: the central's address on every link, under which the devices and the
    /// bond store (`SimulatorOptions.bonds`) keep bonds. Derived from the adapter id, so it is the same
    /// on every run.
    public let stationAddress: BluetoothAddress

    /// Devices in order of first advertisement (then id).
    package let devices: [VirtualDevice]
    private let byAddress: [UInt64: VirtualDevice]
    private let byName: [String: [VirtualDevice]]
    private let byID: [String: VirtualDevice]
    private let scanPeriod: Duration
    /// When the fleet started advertising (paced connects wait for each device's next advertising event).
    let epoch = ContinuousClock.now
    /// One pending LE connection at a time.
    let connectGate = AsyncSemaphore(permits: 1, cancellationError: BLEError.cancelled)
    private let journal: StateJournal?

    private struct WeakCursor {
        weak var cursor: ScanCursor?
    }

    private struct State {
        var closed = false
        var activeLinks = 0
        var peakLinks = 0
        var links: [ObjectIdentifier: InMemoryLink] = [:]
        var scans: [UInt64: WeakCursor] = [:]
        var nextScan: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Builds the fleet.
    /// - Parameters:
    ///   - models: device models by name (`DeviceModel.loadDirectory`).
    ///   - devices: the inventory's devices.
    ///   - defaultModel: the model of a device whose `simulator:` names none (may be nil when there is
    ///     exactly one model).
    ///   - inventoryFile: the file the specs' `overrides` came from, for messages.
    public init(models: [String: DeviceModel], devices specs: [SimulatedDeviceSpec], defaultModel: String? = nil,
                inventoryFile: String = "inventory", options: SimulatorOptions = SimulatorOptions()) throws(SimulatorError) {
        self.id = options.id
        self.connectionSlots = options.connectionSlots
        self.options = options
        self.stationAddress = SimulatedDeviceSpec.derivedAddress(for: "station " + options.id)
        var journal: StateJournal?
        var replay: [(String, DeviceEvent)] = []
        if let path = options.statePath {
            let (j, events) = try StateJournal.open(path: path)
            journal = j
            replay = events
        }
        self.journal = journal

        var all: [VirtualDevice] = []
        all.reserveCapacity(specs.count)
        var byAddress: [UInt64: VirtualDevice] = [:]
        var byName: [String: [VirtualDevice]] = [:]
        var byID: [String: VirtualDevice] = [:]
        var maxInterval = Duration.zero
        var layouts: [DatabaseLayout.Key: DatabaseLayout] = [:]
        var modelFaults: [String: SharedFaults] = [:]
        for spec in specs {
            let overrides = try DeviceOverrides.parse(spec.overrides, file: inventoryFile)
            let modelName = overrides.model ?? defaultModel ?? (models.count == 1 ? models.keys.first : nil)
            guard let modelName, let model = models[modelName] ?? Self.model(byFile: modelName, in: models) else {
                let known = models.keys.sorted().joined(separator: ", ")
                let message = modelName.map { "device \(spec.id): no device model named `\($0)`" }
                    ?? "device \(spec.id): no device model given"
                throw SimulatorError(message, file: inventoryFile, at: spec.overrides?["model"]?.mark ?? spec.overrides?.mark,
                                     hint: "known models: \(known.isEmpty ? "none" : known)")
            }
            try overrides.check(against: model, node: spec.overrides, file: inventoryFile)
            var faults = model.faults
            if let f = overrides.faults { try faults.apply(f, ModelReader(file: inventoryFile)) }
            let layoutKey = DatabaseLayout.Key(model: model.name, notifyUndeclared: faults.notifyUndeclared, longUUIDs: faults.longUUIDs)
            let layout = layouts[layoutKey] ?? DatabaseLayout(model: model, notifyUndeclared: faults.notifyUndeclared,
                                                              longUUIDs: faults.longUUIDs)
            layouts[layoutKey] = layout
            // The model's faults are kept once for the devices that override none.
            let shared: SharedFaults
            if overrides.faults == nil {
                shared = modelFaults[model.name] ?? SharedFaults(faults)
                modelFaults[model.name] = shared
            } else {
                shared = SharedFaults(faults)
            }
            let device = VirtualDevice(spec: spec, model: model, overrides: overrides, faults: shared,
                                       seed: options.seed, journal: journal, layout: layout)
            for s in model.services {
                for c in s.characteristics {
                    if case .failure(let f) = device.value(c) {
                        throw SimulatorError("device \(spec.id): \(f.message)", file: inventoryFile, at: spec.overrides?.mark)
                    }
                }
            }
            if let security = model.security, !security.passkey.source.isEmpty {
                switch security.passkey.expand({ device.variable($0) }) {
                case .failure(let f):
                    throw SimulatorError("device \(spec.id): security.passkey: \(f.message)", file: inventoryFile, at: spec.overrides?.mark)
                case .success(let text) where text.utf8.count != 6 || Passkey(text) == nil:
                    throw SimulatorError("device \(spec.id): security.passkey is not six digits", file: inventoryFile, at: spec.overrides?.mark)
                default:
                    break
                }
            }
            guard byID[device.id] == nil else {
                throw SimulatorError("device id `\(device.id)` appears twice", file: inventoryFile, at: spec.overrides?.mark)
            }
            guard byAddress[device.address.value] == nil else {
                throw SimulatorError("device \(device.id): address \(device.address) is already used by \(byAddress[device.address.value]?.id ?? "?")",
                                     file: inventoryFile, at: spec.overrides?.mark)
            }
            byID[device.id] = device
            byAddress[device.address.value] = device
            byName[device.advertisedName, default: []].append(device)
            all.append(device)
            maxInterval = max(maxInterval, model.advertising.interval.upper.scaled(options.latencyScale * faults.slow))
        }
        all.sort { ($0.firstAdvertisement, $0.id) < ($1.firstAdvertisement, $1.id) }
        self.devices = all
        self.byAddress = byAddress
        self.byName = byName
        self.byID = byID
        self.scanPeriod = max(options.reportPeriod, maxInterval)
        for (id, event) in replay {
            byID[id]?.restore(event)
        }
    }

    /// A model named by its file instead of its name (`models/sensor-v2.yaml`), if exactly one matches.
    private static func model(byFile path: String, in models: [String: DeviceModel]) -> DeviceModel? {
        guard path.hasSuffix(".yaml") || path.hasSuffix(".yml") else { return nil }
        let base = path.split(separator: "/").last.map(String.init) ?? path
        let matches = models.values.filter { $0.file == path || $0.file.hasSuffix("/" + base) || $0.file == base }
        return matches.count == 1 ? matches.first : nil
    }

    /// A fleet of one model.
    public convenience init(model: DeviceModel, devices specs: [SimulatedDeviceSpec], inventoryFile: String = "inventory",
                            options: SimulatorOptions = SimulatorOptions()) throws(SimulatorError) {
        try self.init(models: [model.name: model], devices: specs, defaultModel: model.name, inventoryFile: inventoryFile,
                      options: options)
    }

    /// How many virtual devices the fleet has.
    public var deviceCount: Int { devices.count }

    /// The address of a device (given, or derived from its id).
    public func address(of deviceID: String) -> BluetoothAddress? { byID[deviceID]?.address }

    /// How many links are up.
    public var activeLinkCount: Int { state.withLock { $0.activeLinks } }

    /// The most links held at once since the adapter was created (measured on the device side).
    public var peakLinkCount: Int { state.withLock { $0.peakLinks } }

    // MARK: - Scan

    public func scan(_ filter: ScanFilter) -> AsyncThrowingStream<Advertisement, any Error> {
        var candidates: [VirtualDevice]
        if !filter.addresses.isEmpty {
            candidates = filter.addresses.compactMap { byAddress[$0.value] }
        } else if !filter.names.isEmpty {
            candidates = filter.names.flatMap { byName[$0] ?? [] }
        } else {
            candidates = devices
        }
        if candidates.count != devices.count {
            candidates.sort { ($0.firstAdvertisement, $0.id) < ($1.firstAdvertisement, $1.id) }
        }
        let cursor = ScanCursor(candidates: candidates, filter: filter, scale: options.latencyScale, period: scanPeriod,
                                seed: options.seed, adapterID: id)
        let closed = state.withLock { s -> Bool in
            if s.closed { return true }
            s.nextScan += 1
            if s.nextScan % 64 == 0 { s.scans = s.scans.filter { $0.value.cursor != nil } }
            s.scans[s.nextScan] = WeakCursor(cursor: cursor)
            return false
        }
        if closed { cursor.close() }
        return AsyncThrowingStream(unfolding: { await cursor.next() })
    }

    // MARK: - Connect

    public func connect(to peer: BluetoothAddress, options o: ConnectOptions) async throws -> any Link {
        let deadline = ContinuousClock.now + o.timeout
        let timeout = BLEError.timeout(operation: "connect to \(peer)", limit: o.timeout)
        guard !state.withLock({ $0.closed }) else { throw BLEError.adapterFailure("simulated adapter \(id) is closed") }
        guard let device = byAddress[peer.value] else {
            // Nobody answers at that address.
            try await Self.sleep(until: deadline)
            throw timeout
        }
        guard await acquireConnectGate(until: deadline) else {
            if Task.isCancelled { throw BLEError.cancelled }
            throw timeout
        }
        do {
            let link = try await establish(device, deadline: deadline, timeout: timeout)
            connectGate.release()
            return link
        } catch {
            connectGate.release()
            throw error
        }
    }

    /// Takes the adapter's single connect slot, or gives up at the deadline / on cancellation.
    private func acquireConnectGate(until deadline: ContinuousClock.Instant) async -> Bool {
        let gate = connectGate
        if !Task.isCancelled, gate.tryAcquire() { return true }
        // Wait for it under the deadline (a `Timeouts` entry, not a sleeping task per connect: a
        // cancelled sleep keeps its Dispatch timer until the deadline). A permit taken just as the
        // deadline won is kept, as before: the connect goes ahead.
        let got = GateTaken()
        do {
            try await withDeadline(max(.zero, deadline - .now), operation: "connect slot") {
                try await gate.acquire()
                got.set()
            }
            return true
        } catch {
            return got.value
        }
    }

    private func establish(_ device: VirtualDevice, deadline: ContinuousClock.Instant, timeout: BLEError) async throws -> any Link {
        if device.isConnected {
            throw BLEError.connectFailed("\(device.address) is already connected (a peripheral takes one central)")
        }
        let attempt = device.recordAttempt()
        var rng = SimulatorRandom(seed: options.seed, device: device.id, stream: UInt64(attempt))
        let factor = options.latencyScale * device.faults.slow
        var latency = rng.duration(in: device.model.latency.connect).scaled(factor)
        let hangs = device.faults.connectTimeout > 0 && rng.chance(device.faults.connectTimeout)
        let fails = device.faults.connectFail > 0 && rng.chance(device.faults.connectFail)
        // A paced link: the connect waits for the device's next advertising event, which anchors the
        // link's connection events.
        var events: ConnectionEvents?
        let modelInterval = device.model.latency.connectionInterval.map { rng.duration(in: $0) }
        if let interval = (options.connectionInterval ?? modelInterval)?.scaled(factor), interval > .zero {
            let advertising = device.advertisingEvents(epoch: epoch, scale: factor).next(after: .now)
            latency = advertising - .now
            events = ConnectionEvents(anchor: advertising, interval: interval)
        }
        if let back = device.offUntil {
            // Rebooting: nobody answers until it is back on the air.
            if back > deadline {
                try await Self.sleep(until: deadline)
                throw timeout
            }
            try await Self.sleep(until: back)
        }
        if device.faults.noAdvertise || !device.model.advertising.connectable || hangs {
            // The controller keeps initiating; nobody answers until the caller's deadline.
            if hangs { device.record(.fault("connect_timeout")) }
            try await Self.sleep(until: deadline)
            throw timeout
        }
        if latency > .zero {
            if ContinuousClock.now + latency > deadline {
                try await Self.sleep(until: deadline)
                throw timeout
            }
            try await Self.sleep(until: .now + latency)
        }
        if fails {
            device.record(.fault("connect_fail"))
            throw BLEError.connectFailed("\(device.address): connection failed to be established (simulated connect_fail)")
        }
        let slot = state.withLock { s -> Bool in
            guard !s.closed, s.activeLinks < connectionSlots else { return false }
            s.activeLinks += 1
            s.peakLinks = max(s.peakLinks, s.activeLinks)
            return true
        }
        guard slot else { throw BLEError.connectFailed("no free connection slot on \(id) (\(connectionSlots) in use)") }
        guard device.beginConnection() else {
            state.withLock { $0.activeLinks -= 1 }
            throw BLEError.connectFailed("\(device.address) is already connected (a peripheral takes one central)")
        }
        device.record(.connected)
        let link = InMemoryLink(peer: device.address, adapterID: id, credits: options.credits, events: events)
        state.withLock { $0.links[ObjectIdentifier(link)] = link }
        // Free the slot and the peripheral as the link closes, before `disconnect()` returns to the
        // central (a controller frees them before Disconnection Complete).
        link.onClose { [weak self] _ in self?.linkClosed(device, link) }
        let security = LinkSecurityBox()
        let connection = DeviceConnection(device: device, link: link, rng: rng, latencyScale: options.latencyScale, security: security)
        Task {
            var connection = connection
            await connection.run()
            self.connectionEnded(device, link)
        }
        let timing = SimulatedLink.Timing(interval: events?.interval, roundTrip: device.model.latency.roundTrip,
                                          slowPairing: device.faults.slowPairing, factor: factor)
        return SimulatedLink(inner: link, device: device, station: stationAddress, bonds: options.bonds, security: security,
                             timing: timing, seed: options.seed)
    }

    private func linkClosed(_ device: VirtualDevice, _ link: InMemoryLink) {
        device.endConnection()
        state.withLock { s in
            if s.links.removeValue(forKey: ObjectIdentifier(link)) != nil { s.activeLinks -= 1 }
        }
    }

    private func connectionEnded(_ device: VirtualDevice, _ link: InMemoryLink) {
        link.device.drop(.remoteUserTerminated)
        let scans = state.withLock { s -> [ScanCursor] in
            s.scans = s.scans.filter { $0.value.cursor != nil }
            return s.scans.values.compactMap(\.cursor)
        }
        if device.isAdvertising {
            for c in scans { c.deviceAppeared(device) }
        }
    }

    static func sleep(until deadline: ContinuousClock.Instant) async throws {
        do {
            try await Task.sleep(until: deadline, clock: .continuous)
        } catch {
            throw BLEError.cancelled
        }
    }

    // MARK: - Close and dump

    public func close() async {
        let (links, scans) = state.withLock { s -> ([InMemoryLink], [ScanCursor]) in
            s.closed = true
            defer { s.scans = [:] }
            return (Array(s.links.values), s.scans.values.compactMap(\.cursor))
        }
        for l in links { l.device.drop(.transportClosed) }
        for c in scans { c.close() }
    }

    /// Every device's state, by id.
    public func dump() async -> SimulatorDump {
        let sorted = devices.sorted { $0.id < $1.id }
        return SimulatorDump(seed: options.seed, devices: sorted.map(SimulatorDump.device))
    }

    /// One device's state.
    public func dump(device deviceID: String) -> SimulatorDump.Device? {
        byID[deviceID].map(SimulatorDump.device)
    }
}

/// Whether the connect slot was taken (read after the wait for it ended).
private final class GateTaken: Sendable {
    private let taken = Mutex(false)
    func set() { taken.withLock { $0 = true } }
    var value: Bool { taken.withLock { $0 } }
}
