import BLE
import Digests
import ESPProv
import Synchronization
import YAML

/// An ESP32 unit's unified provisioning (`esp_prov:` in a model; docs/simulator.md): the protocomm
/// service and its endpoints (found by their User Description), the security scheme and the unit's
/// credentials, the access points it can see, and how long it takes to join.
///
/// ```yaml
/// esp_prov:
///   security: 2                     # 0, 1 or 2
///   username: wifiprov              # security 2
///   pop: "${pop}"                   # the unit's proof of possession (a template)
///   access_points:
///     - { ssid: "${ssid}", passphrase: "${wifi_passphrase}", channel: 6, rssi: -48 }
///   join_time: [300ms, 900ms]       # apply → connected (or failed)
///   ip: "10.40.0.${unit}"
///   custom_endpoints: [custom-data]
/// ```
///
/// Faults (`faults:`, per model or per device): `esp_wrong_pop` (the unit holds another PoP than the
/// inventory's), `esp_no_ap` (no access point has the SSID), `esp_wrong_passphrase` (the access point
/// refuses the passphrase), `esp_slow_join` (a join time instead of `join_time`), `esp_drop_on_apply`
/// (the unit drops the link when it first receives apply, after applying).
public struct ESPProvConfig: Sendable, Equatable {
    public struct AccessPoint: Sendable, Equatable {
        public var ssid: String
        public var passphrase: String?
        public var channel: Int
        public var rssi: Int
    }

    public var service = GATTProtocommTransport.defaultService
    public var security = 2
    public var username = "wifiprov"
    public var pop = "${pop}"
    public var version = "v1.1"
    public var patchVersion = 1
    public var accessPoints: [AccessPoint] = []
    public var joinTime = LatencyRange(.milliseconds(300), .milliseconds(900))
    public var ip = "192.168.4.23"
    public var customEndpoints = ["custom-data"]

    static let keys = ["service", "security", "username", "pop", "version", "patch_version", "access_points", "join_time", "ip", "custom_endpoints"]

    /// The endpoints in the order ESP-IDF's BLE transport lays them out, each with the 16-bit value that
    /// replaces bytes 12–13 of the service UUID to make its characteristic's UUID.
    var endpoints: [(name: String, uuid: BluetoothUUID)] {
        let names = [Endpoint.scan, Endpoint.session, Endpoint.config, Endpoint.version, Endpoint.control] + customEndpoints
        return names.enumerated().map { i, name in (name, Self.characteristicUUID(service, UInt16(0xFF50 + i))) }
    }

    static func characteristicUUID(_ service: BluetoothUUID, _ value: UInt16) -> BluetoothUUID {
        var bytes = service.uuid128
        bytes[2] = UInt8(value >> 8)
        bytes[3] = UInt8(truncatingIfNeeded: value)
        return BluetoothUUID(bytes128: bytes) ?? service
    }

    static func parse(_ node: YAMLNode, _ r: ModelReader) throws(SimulatorError) -> ESPProvConfig {
        var c = ESPProvConfig()
        for (key, value) in try r.mapping(node, "esp_prov", allowed: keys) {
            switch key {
            case "service": c.service = try r.uuid(value, "esp_prov.service")
            case "security": c.security = try r.int(value, "esp_prov.security", in: 0...2)
            case "username": c.username = try r.string(value, "esp_prov.username")
            case "pop": c.pop = try r.string(value, "esp_prov.pop")
            case "version": c.version = try r.string(value, "esp_prov.version")
            case "patch_version": c.patchVersion = try r.int(value, "esp_prov.patch_version", in: 0...1)
            case "join_time": c.joinTime = try r.latency(value, "esp_prov.join_time")
            case "ip": c.ip = try r.string(value, "esp_prov.ip")
            case "custom_endpoints":
                c.customEndpoints = try r.list(value, "esp_prov.custom_endpoints").map { (n) throws(SimulatorError) in try r.string(n, "an endpoint name") }
                for (i, n) in c.customEndpoints.enumerated() where Endpoint.reserved.contains(n) || n.isEmpty || n.utf8.count > 64 {
                    throw r.fail("`\(n)` cannot be a custom endpoint's name", try r.list(value, "esp_prov.custom_endpoints")[i])
                }
            case "access_points":
                for item in try r.list(value, "esp_prov.access_points") {
                    var ap = AccessPoint(ssid: "", passphrase: nil, channel: 6, rssi: -50)
                    for (k, v) in try r.mapping(item, "an access point", allowed: ["ssid", "passphrase", "channel", "rssi"]) {
                        switch k {
                        case "ssid": ap.ssid = try r.string(v, "ssid")
                        case "passphrase": ap.passphrase = try r.string(v, "passphrase")
                        case "channel": ap.channel = try r.int(v, "channel", in: 1...14)
                        case "rssi": ap.rssi = try r.int(v, "rssi", in: -127...0)
                        default: break
                        }
                    }
                    guard !ap.ssid.isEmpty else { throw r.fail("an access point needs `ssid`", item) }
                    c.accessPoints.append(ap)
                }
            default: break
            }
        }
        if c.customEndpoints.count > 16 { throw r.fail("at most 16 custom endpoints", node) }
        return c
    }

    /// The protocomm service, laid out after the model's own services.
    var serviceSpec: GATTDatabase.ServiceSpec {
        GATTDatabase.ServiceSpec(uuid: service, characteristics: endpoints.map { e in
            GATTDatabase.CharacteristicSpec(uuid: e.uuid, properties: [.read, .write], descriptors: [(BluetoothUUID(0x2901), Array(e.name.utf8))])
        })
    }
}

/// The ESP faults of a device (`FaultSettings`).
public struct ESPFaults: Sendable, Equatable {
    public var wrongPoP = false
    public var noAccessPoint = false
    public var wrongPassphrase = false
    public var slowJoin: LatencyRange?
    public var dropOnApply = false
    public init() {}
}

/// One unit's provisioning side: the device value and the endpoint handles of the connection.
final class ESPUnit: Sendable {
    private struct State {
        var device: ProvisioningDevice?
        var droppedOnApply = false
    }

    let config: ESPProvConfig
    private let state = Mutex(State())
    private let epoch = ContinuousClock.now

    init(config: ESPProvConfig) {
        self.config = config
    }

    /// The device value, made on first use from the unit's variables and faults (SRP's verifier is
    /// computed then, from the PoP: the unit keeps only salt and verifier).
    private func make(_ device: VirtualDevice, scale: Double) -> ProvisioningDevice {
        let faults = device.faults.esp
        func expand(_ t: String) -> String {
            guard let template = try? Template(parsing: t, at: SourceMark(line: 1, column: 1)) else { return t }
            return (try? template.expand { device.variable($0) }.get()) ?? t
        }
        var pop = expand(config.pop)
        if faults.wrongPoP { pop += "-other" }
        let security: SecurityResponder.Parameters
        switch config.security {
        case 0: security = .none
        case 1: security = .proofOfPossession(Array(pop.utf8))
        default:
            let salt = Array(SHA256.hash(Array("salt:\(device.id)".utf8)).prefix(16))
            let verifier = (try? SRP6a.verifier(username: Array(expand(config.username).utf8), password: Array(pop.utf8), salt: salt)) ?? []
            security = .srp(salt: salt, verifier: verifier)
        }
        let aps = config.accessPoints.enumerated().map { i, ap in
            ProvisioningDevice.AccessPoint(ssid: faults.noAccessPoint ? expand(ap.ssid) + "-elsewhere" : expand(ap.ssid),
                                           passphrase: ap.passphrase.map { faults.wrongPassphrase ? expand($0) + "-changed" : expand($0) },
                                           channel: ap.channel, rssi: ap.rssi, bssid: [0x24, 0x0A, 0xC4, 0, 0, UInt8(i + 1)])
        }
        var r = SimulatorRandom(seed: 0, device: device.id, stream: 0xE5B0_0000)
        let join = r.duration(in: faults.slowJoin ?? config.joinTime).scaled(scale)
        return ProvisioningDevice(settings: .init(security: security, patchVersion: config.patchVersion, version: config.version,
                                                  accessPoints: aps, joinTime: join, ip: expand(config.ip), customEndpoints: config.customEndpoints))
    }

    /// What a connection's write to endpoint `name` gets: the answer for the next read, a refusal, or a
    /// dropped link (`esp_drop_on_apply`).
    enum Reply { case answer([UInt8]), refuse, drop }

    func serve(_ name: String, _ request: [UInt8], device: VirtualDevice, scale: Double) -> Reply {
        state.withLock { s in
            var d = s.device ?? make(device, scale: scale)
            defer { s.device = d }
            let before = d.applyCount
            let answer = d.handle(endpoint: name, request: request, now: ContinuousClock.now - epoch)
            if d.applyCount > before, device.faults.esp.dropOnApply, !s.droppedOnApply {
                s.droppedOnApply = true
                return .drop
            }
            switch answer {
            case .answer(let bytes): return .answer(bytes)
            case .refuse: return .refuse
            }
        }
    }

    /// The value handles of a connection's protocomm endpoints, by handle.
    static func handles(_ db: GATTDatabase, _ config: ESPProvConfig?) -> [UInt16: String] {
        guard let config else { return [:] }
        var out: [UInt16: String] = [:]
        for e in config.endpoints {
            if let h = db.valueHandle(service: config.service, characteristic: e.uuid) { out[h] = e.name }
        }
        return out
    }

    /// The Error Response a refused request gets (ESP-IDF's NimBLE transport answers a failed handler so).
    static func refusal(_ request: [UInt8], handle: UInt16) -> [UInt8] {
        ATTPDU.errorResponse(ATTErrorResponse(requestOpcode: ATTOpcode(request.first ?? 0x12), handle: handle, code: .unlikelyError)).bytes
    }

    /// A new link: the session of the last one is gone.
    func linkOpened() {
        state.withLock { $0.device?.linkClosed() }
    }

    /// What the dump shows: the SSID set, the passphrase's SHA-256 (never the passphrase), applies,
    /// sessions, failed proofs, the station's state, what custom endpoints received.
    var summary: SimulatorDump.ESP? {
        state.withLock { s in
            guard let d = s.device else { return nil }
            return SimulatorDump.ESP(ssid: d.ssid, passphraseSHA256: d.passphraseHash, applies: d.applyCount, sessions: d.sessions,
                                     failedProofs: d.failedProofs, station: d.stationState(now: ContinuousClock.now - epoch),
                                     custom: d.customReceived.map { "\($0.endpoint): \(String(decoding: $0.data, as: UTF8.self))" })
        }
    }
}
