import BLE
import BLESimulator
import Foundation
import YAML

/// A minimal ATT client for tests: raw PDUs over a link's bearer, one request at a time, notifications
/// kept aside in arrival order. Lives in the test's task (the stream iterator is not shared).
struct RawATTClient {
    let link: any Link
    private var iterator: AsyncStream<[UInt8]>.Iterator
    /// Notifications received so far (value handle, value), oldest first.
    var notifications: [(handle: UInt16, value: [UInt8])] = []
    /// Handles found by `discover`, by characteristic UUID.
    var handles: [BluetoothUUID: UInt16] = [:]
    var cccds: [BluetoothUUID: UInt16] = [:]

    init(_ link: any Link) {
        self.link = link
        self.iterator = link.bearer.incoming.makeAsyncIterator()
    }

    /// The next PDU from the device; nil when the link went down.
    mutating func nextPDU() async -> [UInt8]? {
        guard let pdu = await iterator.next() else { return nil }
        return pdu
    }

    /// Sends a request and returns its response; notifications arriving first are kept.
    mutating func request(_ pdu: ATTPDU) async throws -> ATTPDU {
        try await link.bearer.send(pdu.bytes)
        while true {
            guard let bytes = await nextPDU() else { throw BLEError.disconnected(.supervisionTimeout) }
            let response = try ATTPDU(decoding: bytes)
            if case .handleValueNotification(let hv) = response {
                notifications.append((hv.handle, hv.value))
                continue
            }
            return response
        }
    }

    mutating func command(_ pdu: ATTPDU) async throws {
        try await link.bearer.send(pdu.bytes)
    }

    /// Waits for the next notification (or returns one already received).
    mutating func notification() async throws -> (handle: UInt16, value: [UInt8])? {
        if !notifications.isEmpty { return notifications.removeFirst() }
        while let bytes = await nextPDU() {
            if case .handleValueNotification(let hv) = try ATTPDU(decoding: bytes) { return (hv.handle, hv.value) }
        }
        return nil
    }

    /// Full discovery by Read By Group Type and Read By Type; CCCDs assumed right after notify values.
    mutating func discover() async throws {
        var start: UInt16 = 1
        var groups: [(UInt16, UInt16)] = []
        while true {
            let r = try await request(.readByGroupTypeRequest(.init(range: .init(start: start, end: 0xFFFF), type: .primaryService)))
            guard case .readByGroupTypeResponse(let g) = r, let last = g.entries.last else { break }
            groups += g.entries.map { ($0.handle, $0.endGroupHandle) }
            if last.endGroupHandle == 0xFFFF { break }
            start = last.endGroupHandle + 1
        }
        for (s, e) in groups {
            var from = s
            while from <= e {
                let r = try await request(.readByTypeRequest(.init(range: .init(start: from, end: e), type: .characteristic)))
                guard case .readByTypeResponse(let t) = r, let last = t.entries.last else { break }
                for entry in t.entries {
                    let v = entry.value
                    guard v.count >= 5, let uuid = BluetoothUUID(wire: Array(v[3...])) else { continue }
                    let valueHandle = UInt16(v[1]) | UInt16(v[2]) << 8
                    handles[uuid] = valueHandle
                    if v[0] & 0x30 != 0 { cccds[uuid] = valueHandle + 1 }
                }
                from = last.handle + 1
            }
        }
    }

    /// The sensor-v2 handles (what `discover` finds), for tests that must not spend operations on
    /// discovery.
    mutating func assumeSensorV2Layout() {
        let layout: [(UInt16, UInt16)] = [(0x2A29, 3), (0x2A24, 5), (0x2A25, 7), (0x2A26, 9), (0x2A19, 12),
                                          (0xFFF1, 16), (0xFFF2, 18), (0xFFF3, 20), (0xFFF4, 23)]
        for (u, h) in layout { handles[BluetoothUUID(u)] = h }
        cccds[BluetoothUUID(0x2A19)] = 13
        cccds[BluetoothUUID(0xFFF3)] = 21
    }

    func handle(_ uuid: UInt16) throws -> UInt16 {
        guard let h = handles[BluetoothUUID(uuid)] else { throw BLEError.attributeNotFound(String(uuid, radix: 16)) }
        return h
    }

    mutating func read(_ uuid: UInt16) async throws -> [UInt8] {
        let r = try await request(.readRequest(.init(handle: try handle(uuid))))
        guard case .readResponse(let v) = r else { throw BLEError.protocolError("read \(uuid): \(r)") }
        return v
    }

    mutating func write(_ uuid: UInt16, _ value: [UInt8]) async throws -> ATTPDU {
        try await request(.writeRequest(.init(handle: try handle(uuid), value: value)))
    }

    mutating func subscribe(_ uuid: UInt16) async throws -> ATTPDU {
        guard let c = cccds[BluetoothUUID(uuid)] else { throw BLEError.attributeNotFound("CCCD of \(uuid)") }
        return try await request(.writeRequest(.init(handle: c, value: [1, 0])))
    }

    /// Writes a control command and waits for its ack.
    mutating func control(_ value: [UInt8]) async throws -> [UInt8]? {
        _ = try await write(0xFFF1, value)
        return try await notification()?.value
    }

    /// Writes a control command, then reads the state: on the in-memory link an ack is sent before the
    /// next response, so it is here by then if the device sent one (no waiting on a lost ack).
    mutating func controlChecked(_ value: [UInt8]) async throws -> (ack: [UInt8]?, state: UInt8?) {
        let w = try await write(0xFFF1, value)
        guard w == .writeResponse else { throw BLEError.protocolError("write FFF1: \(w)") }
        let state = try await read(0xFFF2).first
        let ack = notifications.isEmpty ? nil : notifications.removeFirst().value
        return (ack, state)
    }

    /// The whole sensor-v2 provisioning sequence of docs/devices/sensor-v2.md.
    mutating func provision(config: [UInt8], blob: [UInt8], chunk: Int = 20) async throws -> [[UInt8]?] {
        var acks: [[UInt8]?] = []
        acks.append(try await control([0x01] + config))
        let n = UInt32(blob.count)
        acks.append(try await control([0x03, UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 24)]))
        var i = 0
        while i < blob.count {
            try await command(.writeCommand(.init(handle: try handle(0xFFF4), value: Array(blob[i..<min(i + chunk, blob.count)]))))
            i += chunk
        }
        acks.append(try await control([0x04]))
        acks.append(try await control([0x02]))
        return acks
    }
}

enum Fixtures {
    /// The repository root (tests run from anywhere).
    static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    static let modelPath = root + "/inventory/models/sensor-v2.yaml"

    static func model() throws -> DeviceModel {
        try DeviceModel.load(path: modelPath)
    }

    static func yaml(_ text: String) throws -> YAMLNode? {
        try YAMLParser().parse(text)
    }

    static func spec(_ id: String, _ overrides: String? = nil) throws -> SimulatedDeviceSpec {
        SimulatedDeviceSpec(id: id, name: "SNS-\(id)", overrides: try overrides.flatMap { try yaml($0) })
    }

    /// A zero-latency fleet of sensor-v2 devices.
    static func central(_ specs: [SimulatedDeviceSpec], seed: UInt64 = 1, statePath: String? = nil) throws -> SimulatedCentral {
        try SimulatedCentral(model: try model(), devices: specs, inventoryFile: "inventory.yaml",
                             options: SimulatorOptions(seed: seed, latencyScale: 0, statePath: statePath))
    }

    static func connect(_ central: SimulatedCentral, _ id: String) async throws -> RawATTClient {
        guard let address = central.address(of: id) else { throw BLEError.attributeNotFound(id) }
        return RawATTClient(try await central.connect(to: address, options: ConnectOptions(timeout: .seconds(5))))
    }

    static let blob: [UInt8] = (0..<1500).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
}
