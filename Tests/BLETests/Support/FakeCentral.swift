import AsyncSupport
import Synchronization
@testable import BLE

/// What a test peripheral saw, per link (1-based link number).
struct DeviceEvent: Sendable, Equatable {
    var link: Int
    var event: ATTServer.Event
}

/// A peripheral for whole-stack tests: the lead's `ATTServer` over the device end of an `InMemoryLink`.
/// Records every event (writes, CCCD changes, confirmations) so tests assert on what the device received.
actor TestPeripheral {
    nonisolated let address: BluetoothAddress
    nonisolated let events = Recorder<DeviceEvent>()
    /// Every PDU the device received, all links.
    nonisolated let received = Recorder<[UInt8]>()
    private var database: GATTDatabase
    /// The database the device started with (before any `replaceDatabase`).
    nonisolated let initialDatabase: GATTDatabase
    private let maxMTU: Int
    private let supportsFindByTypeValue: Bool
    private let supportsReadMultipleVariable: Bool
    private var server: ATTServer?
    private var peer: InMemoryLink.Peer?
    private(set) var linkCount = 0
    /// When false, requests are swallowed (a device that never answers).
    var answers = true
    /// When true, received PDUs keep their credit until `releaseCredits()`.
    var holdCredits = false
    private var heldCredits = 0
    /// Drops the link right after answering a CCCD write on this link number (a restore that lands
    /// and is lost at once).
    private var dropAfterCCCDWriteOnLink: Int?

    init(address: BluetoothAddress = BluetoothAddress(value: 0xC0FFEE000001), database: GATTDatabase = TestPeripheral.sensorV2(),
         maxMTU: Int = 247, supportsFindByTypeValue: Bool = true, supportsReadMultipleVariable: Bool = true) {
        self.address = address
        self.database = database
        self.initialDatabase = database
        self.maxMTU = maxMTU
        self.supportsFindByTypeValue = supportsFindByTypeValue
        self.supportsReadMultipleVariable = supportsReadMultipleVariable
    }

    func setAnswers(_ value: Bool) { answers = value }
    /// The current link is now protected this well (its server refuses values that need more).
    func setLinkSecurity(_ value: LinkSecurity) { server?.linkSecurity = value }
    func setHoldCredits(_ value: Bool) { holdCredits = value }
    func setDropAfterCCCDWrite(onLink n: Int?) { dropAfterCCCDWriteOnLink = n }

    func attach(_ device: InMemoryLink.Peer) {
        linkCount += 1
        let n = linkCount
        server = ATTServer(database: database, maxMTU: maxMTU, supportsFindByTypeValue: supportsFindByTypeValue,
                           supportsReadMultipleVariable: supportsReadMultipleVariable)
        peer = device
        Task {
            for await pdu in device.incoming {
                self.handle(pdu, link: n, device: device)
            }
        }
    }

    private func handle(_ pdu: [UInt8], link n: Int, device: InMemoryLink.Peer) {
        guard n == linkCount, var s = server else { return }
        received.append(pdu)
        let (response, events) = s.receive(pdu)
        server = s
        for e in events { self.events.append(DeviceEvent(link: n, event: e)) }
        if let response, answers { device.send(response) }
        if holdCredits { heldCredits += 1 } else { device.consumed() }
        if n == dropAfterCCCDWriteOnLink, events.contains(where: { if case .subscriptionChanged = $0 { return true } else { return false } }) {
            device.drop(.supervisionTimeout)
        }
    }

    func releaseCredits() {
        for _ in 0..<heldCredits { peer?.consumed() }
        heldCredits = 0
    }

    /// Notifies a characteristic if the client enabled it (or it has no CCCD). Returns whether it was sent.
    @discardableResult
    func notify(service: BluetoothUUID, characteristic: BluetoothUUID, _ value: [UInt8]) -> Bool {
        guard let s = server, let peer, let h = database.valueHandle(service: service, characteristic: characteristic),
              let pdu = s.notification(valueHandle: h, value: value) else { return false }
        return peer.send(pdu)
    }

    @discardableResult
    func indicate(service: BluetoothUUID, characteristic: BluetoothUUID, _ value: [UInt8]) -> Bool {
        guard let s = server, let peer, let h = database.valueHandle(service: service, characteristic: characteristic),
              let pdu = s.indication(valueHandle: h, value: value) else { return false }
        return peer.send(pdu)
    }

    /// The device lays out its database again while connected (as after a firmware update): robust
    /// caching and Service Changed as `ATTServer.replaceDatabase` says. Returns whether a Service Changed
    /// indication went out.
    @discardableResult
    func replaceDatabase(_ new: GATTDatabase, indicate: Bool = true) -> Bool {
        database = new
        guard var s = server else { return false }
        let indication = s.replaceDatabase(new)
        server = s
        guard indicate, let indication, let peer else { return false }
        return peer.send(indication)
    }

    /// Sends a Service Changed indication for the whole range whatever the client configured (as a
    /// server does for a bonded client). Returns whether it went out.
    @discardableResult
    func indicateServiceChanged() -> Bool {
        guard let peer, let h = database.valueHandle(service: .genericAttribute, characteristic: .serviceChanged) else { return false }
        return peer.send([0x1D, UInt8(h & 0xFF), UInt8(h >> 8), 0x01, 0x00, 0xFF, 0xFF])
    }

    /// The value the device's server now holds at a handle (what writes left there).
    func value(at handle: UInt16) -> [UInt8]? { server?.database.value(handle) }

    /// The link drops from the device's side (out of range).
    func drop(_ reason: DisconnectReason = .supervisionTimeout) { peer?.drop(reason) }

    /// A value handle in the database the device started with.
    nonisolated func valueHandle(_ service: BluetoothUUID, _ characteristic: BluetoothUUID) -> UInt16? {
        initialDatabase.valueHandle(service: service, characteristic: characteristic)
    }

    /// CCCD writes the device received for a characteristic: (link, configuration).
    nonisolated func cccdWrites(_ service: BluetoothUUID, _ characteristic: BluetoothUUID) -> [(link: Int, value: UInt16)] {
        guard let h = valueHandle(service, characteristic) else { return [] }
        return Self.cccdWrites(events.items, valueHandle: h)
    }

    /// CCCD writes in `items` for a value handle (usable inside a `Recorder.wait` condition).
    static func cccdWrites(_ items: [DeviceEvent], valueHandle h: UInt16) -> [(link: Int, value: UInt16)] {
        items.compactMap { e in
            if case .subscriptionChanged(let v, let c) = e.event, v == h { return (e.link, c) }
            return nil
        }
    }

    /// The Generic Attribute service a server with robust caching exposes (Vol 3 Part G 7).
    static let genericAttribute = GATTDatabase.ServiceSpec(uuid: .genericAttribute, characteristics: [
        .init(uuid: .serviceChanged, properties: [.indicate]),
        .init(uuid: .clientSupportedFeatures, properties: [.read, .write], value: [0x00]),
        .init(uuid: .databaseHash, properties: [.read]),
        .init(uuid: .serverSupportedFeatures, properties: [.read], value: [0x00]),
    ])

    /// `sensorV2` behind a Generic Attribute service (Database Hash, robust caching, Service Changed).
    /// `insertFirst` puts an extra characteristic FFF9 with those properties first in FFF0, so every FFF0
    /// handle moves by two (FFF1's old value handle becomes FFF9's value).
    static func sensorV2WithHash(serial: String = "SN-0001", longUUIDs: Bool = false, insertFirst: GATTProperties? = nil,
                                 serverFeatures: UInt8 = 0) -> GATTDatabase {
        var gatt = genericAttribute
        gatt.characteristics[3].value = [serverFeatures]
        var services = [gatt] + sensorV2Services(serial: serial)
        if let insertFirst {
            services[3].characteristics.insert(.init(uuid: BluetoothUUID(0xFFF9), properties: insertFirst), at: 0)
        }
        return GATTDatabase(services: services, longUUIDs: longUUIDs)
    }

    /// The reference device `sensor-v2` (docs/devices/sensor-v2.md), plus an indicate characteristic
    /// and a notifier that lies (FFF5 notifies without declaring it, and has no CCCD).
    static func sensorV2(firmware: String = "2.4.1", serial: String = "SN-0001", longUUIDs: Bool = false) -> GATTDatabase {
        GATTDatabase(services: sensorV2Services(firmware: firmware, serial: serial), longUUIDs: longUUIDs)
    }

    static func sensorV2Services(firmware: String = "2.4.1", serial: String = "SN-0001") -> [GATTDatabase.ServiceSpec] {
        [
            .init(uuid: BluetoothUUID(0x180A), characteristics: [
                .init(uuid: BluetoothUUID(0x2A29), properties: [.read], value: Array("Acme".utf8)),
                .init(uuid: BluetoothUUID(0x2A24), properties: [.read], value: Array("sensor-v2".utf8)),
                .init(uuid: BluetoothUUID(0x2A25), properties: [.read], value: Array(serial.utf8)),
                .init(uuid: BluetoothUUID(0x2A26), properties: [.read], value: Array(firmware.utf8)),
            ]),
            .init(uuid: BluetoothUUID(0x180F), characteristics: [
                .init(uuid: BluetoothUUID(0x2A19), properties: [.read, .notify], value: [87]),
            ]),
            .init(uuid: BluetoothUUID(0xFFF0), characteristics: [
                .init(uuid: BluetoothUUID(0xFFF1), properties: [.write]),
                .init(uuid: BluetoothUUID(0xFFF2), properties: [.read], value: [0]),
                .init(uuid: BluetoothUUID(0xFFF3), properties: [.notify]),
                .init(uuid: BluetoothUUID(0xFFF4), properties: [.writeWithoutResponse]),
                .init(uuid: BluetoothUUID(0xFFF5), properties: [.read], value: [], hasCCCD: false),
                .init(uuid: BluetoothUUID(0xFFF6), properties: [.indicate]),
                .init(uuid: BluetoothUUID(0xFFF7), properties: [.read, .write], value: Array(repeating: 0x5A, count: 300)),
            ]),
        ]
    }
}

/// A `Central` for tests: connects to `TestPeripheral`s over in-memory links, can refuse connections.
final class FakeCentral: Central {
    let id = "fake"
    let connectionSlots = 1000
    let isSimulated = true
    private let peripherals: [BluetoothAddress: TestPeripheral]
    private let state = Mutex<(refuse: Bool, hang: Bool, attempts: Int, links: [InMemoryLink])>((false, false, 0, []))
    /// When set, a connect waits until it is cancelled and then completes anyway: a controller whose
    /// Connection Complete comes just as the host gave up.
    private let lateCompletion = Mutex(false)
    let credits: Int

    init(_ peripherals: [TestPeripheral], credits: Int = 8) {
        var map: [BluetoothAddress: TestPeripheral] = [:]
        for p in peripherals { map[p.address] = p }
        self.peripherals = map
        self.credits = credits
    }

    /// From now on, connects complete only once cancelled (see `lateCompletion`).
    func completeConnectionsLate(_ on: Bool) { lateCompletion.withLock { $0 = on } }

    /// From now on, connection attempts fail (or succeed again).
    func refuseConnections(_ refuse: Bool) { state.withLock { $0.refuse = refuse } }
    /// From now on, connection attempts never complete (until cancelled), like a device that stopped advertising.
    func hangConnections(_ hang: Bool) { state.withLock { $0.hang = hang } }
    var connectAttempts: Int { state.withLock { $0.attempts } }
    /// Every link handed out, in order.
    var links: [InMemoryLink] { state.withLock { $0.links } }

    func scan(_ filter: ScanFilter) -> AsyncThrowingStream<Advertisement, any Error> {
        AsyncThrowingStream { $0.finish() }
    }

    func connect(to peer: BluetoothAddress, options: ConnectOptions) async throws -> any Link {
        let (refuse, hang) = state.withLock { s -> (Bool, Bool) in
            s.attempts += 1
            return (s.refuse, s.hang)
        }
        if refuse { throw BLEError.connectFailed("refused by the test") }
        if hang {
            // Pending until the caller's deadline cancels it: a value that is never set.
            _ = await OneShot<Bool>().wait()
            throw BLEError.cancelled
        }
        if lateCompletion.withLock({ $0 }) {
            _ = await OneShot<Bool>().wait()   // returns when the caller's deadline cancels the connect
        }
        guard let p = peripherals[peer] else { throw BLEError.connectFailed("no device \(peer)") }
        let link = InMemoryLink(peer: peer, adapterID: id, credits: credits)
        await p.attach(link.device)
        state.withLock { $0.links.append(link) }
        return link
    }

    func close() async {
        let links = state.withLock { $0.links }
        for l in links { await l.disconnect() }
    }
}
