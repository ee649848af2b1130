/// The host's side of ESP-IDF unified provisioning as a value: proto-ver, the session handshake, then
/// one operation at a time on the secured session — Wi-Fi provisioning (set config, apply, status until
/// connected or failed), a Wi-Fi scan, or one request to a custom endpoint.
///
/// The owner feeds it events and carries out its actions: `send` is a write of the bytes to the named
/// endpoint followed by a read of its answer (`answered`), or a refusal (`refused`: an ATT error, the
/// link closed in answer); `wait` asks for `pollDue` after the duration (the device has no event for
/// "joined", so its status is asked again); `completed` and `failed` end the operation. After a
/// completed operation the machine keeps its session (`isReady`) for the next one; after a failure it
/// starts over with a new session.
///
/// | phase | request (endpoint) | answer |
/// |---|---|---|
/// | version | `---` (proto-ver) | JSON or text (`ProtoVersionInfo`) |
/// | session | `SecurityHandshake`'s requests (prov-session) | its answers |
/// | set config | CmdSetConfig (prov-config) | RespSetConfig |
/// | apply | CmdApplyConfig (prov-config) | RespApplyConfig |
/// | status | CmdGetStatus (prov-config), again after `pollInterval` while connecting | RespGetStatus |
/// | scan | CmdScanStart, CmdScanStatus until finished, CmdScanResult by 4 (prov-scan) | their answers |
/// | custom | the value (the endpoint named) | the device's answer |
///
/// A wrong proof of possession ends in `security_failed` before any Wi-Fi request is sent: nothing is
/// applied. A station that fails to join ends in `wifi_auth_failed` or `wifi_ap_not_found`.
public struct ProtocommMachine: Sendable, CustomStringConvertible, CustomReflectable {
    /// The security a workflow asks for.
    public struct Configuration: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
        public var credentials: SecurityCredentials
        /// Security 0 runs only when this is true (`allow_insecure: true`).
        public var allowInsecure: Bool
        /// How long to wait between two status (or scan status) requests.
        public var pollInterval: Duration

        public init(credentials: SecurityCredentials, allowInsecure: Bool = false, pollInterval: Duration = .milliseconds(100)) {
            self.credentials = credentials
            self.allowInsecure = allowInsecure
            self.pollInterval = pollInterval
        }

        public var description: String { "\(credentials), poll every \(pollInterval)" }
        public var customMirror: Mirror { Mirror(self, children: [:]) }
    }

    /// One operation on the session.
    public enum Operation: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
        /// Set the station's SSID and passphrase, apply, and wait for the outcome.
        case provision(ssid: [UInt8], passphrase: [UInt8])
        /// Scan for access points and read the list.
        case scan
        /// Send `data` to the custom endpoint `endpoint` (under the session's encryption) and read the answer.
        case custom(endpoint: String, data: [UInt8])
        /// Only set up the session.
        case session

        public var description: String {
            switch self {
            case .provision(let ssid, _): "provision (ssid \(ssid.count) bytes, passphrase hidden)"
            case .scan: "scan"
            case .custom(let e, let d): "custom \(e) (\(d.count) bytes)"
            case .session: "session"
            }
        }
        public var customMirror: Mirror { Mirror(self, children: [:]) }
    }

    public enum Event: Sendable, Equatable {
        case begin(Operation)
        /// The endpoint's answer to the last `send`.
        case answered([UInt8])
        /// The last `send` was refused (an ATT error, or the link closed in answer).
        case refused(String)
        /// The `wait` is over.
        case pollDue
    }

    public enum Action: Sendable, Equatable, CustomStringConvertible {
        /// Write `data` to the endpoint named `endpoint`, then read its answer.
        case send(endpoint: String, data: [UInt8])
        /// Send `pollDue` after this long.
        case wait(Duration)
        case completed(Outcome)
        case failed(ProtocommError)

        public var description: String {
            switch self {
            case .send(let e, let d): "send \(e) \(d.count) bytes"
            case .wait(let d): "wait \(d)"
            case .completed(let o): "completed \(o)"
            case .failed(let e): "failed \(e)"
            }
        }
    }

    /// What an operation produced.
    public enum Outcome: Sendable, Equatable {
        case joined(WiFiJoin)
        case scanned([WiFiScanResult])
        case custom([UInt8])
        case session(ProtoVersionInfo)
    }

    /// A station that joined: its state, IP, and the network it reports. `attempts` counts the status
    /// requests it took.
    public struct WiFiJoin: Sendable, Equatable {
        public var state: String
        public var ip: String
        public var ssid: [UInt8]
        public var channel: Int
        public var authMode: WiFiAuthMode
        public var statusRequests: Int
    }

    private enum Phase: Sendable {
        case idle
        case version(Operation)
        case handshake(SecurityHandshake, ProtoVersionInfo, Operation)
        case ready
        case setConfig(ssid: [UInt8], passphrase: [UInt8])
        case apply
        case status(requests: Int)
        case scanStart
        case scanStatus
        case scanResults(total: Int, entries: [WiFiScanResult])
        case custom(endpoint: String)
    }

    public let configuration: Configuration
    private var phase = Phase.idle
    private var cipher = ProtocommCipher.plaintext
    /// What proto-ver said (once the session is up).
    public private(set) var version: ProtoVersionInfo?

    /// Requests per scan result read (esp_prov reads 4 at a time).
    static let scanBatch = 4
    /// At most this many access points are read from one scan.
    public static let maximumScanResults = 64

    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// True when a session is up and no operation is running.
    public var isReady: Bool {
        if case .ready = phase { return true }
        return false
    }

    public mutating func handle(_ event: Event) -> [Action] {
        do {
            return try step(event)
        } catch {
            phase = .idle
            cipher = .plaintext
            version = nil
            return [.failed(error)]
        }
    }

    private mutating func step(_ event: Event) throws(ProtocommError) -> [Action] {
        switch (phase, event) {
        case (.idle, .begin(let op)):
            if configuration.credentials.scheme == 0 && !configuration.allowInsecure {
                throw ProtocommError(.securityFailed, "security 0 sends the passphrase in the clear; the workflow must say `allow_insecure: true`")
            }
            phase = .version(op)
            return [.send(endpoint: Endpoint.version, data: Array("---".utf8))]
        case (.ready, .begin(let op)):
            return try start(op)

        case (.version(let op), .answered(let bytes)):
            let info = try ProtoVersionInfo(parsing: bytes)
            if let scheme = info.securityScheme, scheme != configuration.credentials.scheme {
                throw ProtocommError(.securityFailed, "the device runs security \(scheme); the workflow asks for security \(configuration.credentials.scheme)")
            }
            var handshake = SecurityHandshake(credentials: configuration.credentials, patchVersion: info.securityPatch)
            let first = try handshake.start()
            phase = .handshake(handshake, info, op)
            return [.send(endpoint: Endpoint.session, data: first)]
        case (.version, .refused(let why)):
            throw ProtocommError(.protocolError, "proto-ver refused the request (\(why))")

        case (.handshake(var handshake, let info, let op), .answered(let bytes)):
            switch try handshake.handle(response: bytes) {
            case .send(let next):
                phase = .handshake(handshake, info, op)
                return [.send(endpoint: Endpoint.session, data: next)]
            case .established(let c):
                cipher = c
                version = info
                phase = .ready
                if op == .session { return [.completed(.session(info))] }
                return try start(op)
            }
        case (.handshake(let handshake, _, _), .refused(let why)):
            throw handshake.refused(why)

        case (.setConfig(let ssid, _), .answered(let bytes)):
            let r = try configAnswer(bytes)
            guard case .respSetConfig(let s)? = r.payload else { throw unexpected("RespSetConfig") }
            guard s.status == .success else {
                throw ProtocommError(.deviceRefused, "the device refused the Wi-Fi configuration for an SSID of \(ssid.count) bytes (status \(s.status))")
            }
            phase = .apply
            return [try sendConfig(.cmdApplyConfig)]
        case (.apply, .answered(let bytes)):
            let r = try configAnswer(bytes)
            guard case .respApplyConfig(let s)? = r.payload else { throw unexpected("RespApplyConfig") }
            guard s.status == .success else { throw ProtocommError(.deviceRefused, "the device refused to apply the configuration (status \(s.status))") }
            phase = .status(requests: 1)
            return [try sendConfig(.cmdGetStatus)]
        case (.status(let n), .answered(let bytes)):
            let r = try configAnswer(bytes)
            guard case .respGetStatus(let s)? = r.payload else { throw unexpected("RespGetStatus") }
            guard s.status == .success else { throw ProtocommError(.deviceRefused, "the device refused the status request (status \(s.status))") }
            return try status(s, requests: n)
        case (.status(let n), .pollDue):
            phase = .status(requests: n + 1)
            return [try sendConfig(.cmdGetStatus)]

        case (.scanStart, .answered(let bytes)):
            let r = try scanAnswer(bytes)
            guard case .respScanStart? = r.payload else { throw unexpected("RespScanStart") }
            phase = .scanStatus
            return [try sendScan(.cmdScanStatus)]
        case (.scanStatus, .answered(let bytes)):
            let r = try scanAnswer(bytes)
            guard case .respScanStatus(let s)? = r.payload else { throw unexpected("RespScanStatus") }
            guard s.scanFinished else { return [.wait(configuration.pollInterval)] }
            let total = min(Int(s.resultCount), Self.maximumScanResults)
            guard total > 0 else {
                phase = .ready
                return [.completed(.scanned([]))]
            }
            phase = .scanResults(total: total, entries: [])
            return [try sendScan(.cmdScanResult(WiFiScanResultCommand(startIndex: 0, count: UInt32(min(Self.scanBatch, total)))))]
        case (.scanStatus, .pollDue):
            return [try sendScan(.cmdScanStatus)]
        case (.scanResults(let total, var entries), .answered(let bytes)):
            let r = try scanAnswer(bytes)
            guard case .respScanResult(let list)? = r.payload else { throw unexpected("RespScanResult") }
            guard !list.entries.isEmpty else { throw ProtocommError(.protocolError, "the device answered no scan results at index \(entries.count) of \(total)") }
            entries.append(contentsOf: list.entries.prefix(total - entries.count))
            guard entries.count < total else {
                phase = .ready
                return [.completed(.scanned(entries))]
            }
            phase = .scanResults(total: total, entries: entries)
            let next = WiFiScanResultCommand(startIndex: UInt32(entries.count), count: UInt32(min(Self.scanBatch, total - entries.count)))
            return [try sendScan(.cmdScanResult(next))]

        case (.custom, .answered(let bytes)):
            let plain = try cipher.decrypt(bytes)
            phase = .ready
            return [.completed(.custom(plain))]

        case (.setConfig, .refused(let why)), (.apply, .refused(let why)), (.status, .refused(let why)):
            throw ProtocommError(.deviceRefused, "prov-config refused the request (\(why))")
        case (.scanStart, .refused(let why)), (.scanStatus, .refused(let why)), (.scanResults, .refused(let why)):
            throw ProtocommError(.deviceRefused, "prov-scan refused the request (\(why))")
        case (.custom(let e), .refused(let why)):
            throw ProtocommError(.deviceRefused, "\(e) refused the request (\(why))")

        default:
            throw ProtocommError(.protocolError, "\(event) is not expected now")
        }
    }

    private mutating func start(_ op: Operation) throws(ProtocommError) -> [Action] {
        switch op {
        case .session:
            guard let version else { throw ProtocommError(.protocolError, "no session") }
            return [.completed(.session(version))]
        case .provision(let ssid, let passphrase):
            guard !ssid.isEmpty, ssid.count <= 32 else { throw ProtocommError(.deviceRefused, "an SSID is 1 to 32 bytes, not \(ssid.count)") }
            guard passphrase.count <= 64 else { throw ProtocommError(.deviceRefused, "a passphrase is at most 64 bytes") }
            phase = .setConfig(ssid: ssid, passphrase: passphrase)
            var command = WiFiSetConfigCommand()
            command.ssid = ssid
            command.passphrase = passphrase
            return [try sendConfig(.cmdSetConfig(command))]
        case .scan:
            phase = .scanStart
            var start = WiFiScanStartCommand()
            start.blocking = true
            start.periodMs = 120
            return [try sendScan(.cmdScanStart(start))]
        case .custom(let endpoint, let data):
            phase = .custom(endpoint: endpoint)
            return [.send(endpoint: endpoint, data: try cipher.encrypt(data))]
        }
    }

    private mutating func status(_ s: WiFiStatusResponse, requests n: Int) throws(ProtocommError) -> [Action] {
        switch s.staState {
        case .connected:
            guard case .connected(let c)? = s.state else {
                throw ProtocommError(.protocolError, "the device says connected without its connected state")
            }
            phase = .ready
            return [.completed(.joined(WiFiJoin(state: "connected", ip: c.ip4Addr, ssid: c.ssid, channel: Int(c.channel),
                                                authMode: c.authMode, statusRequests: n)))]
        case .connectionFailed:
            guard case .failReason(let reason)? = s.state else {
                throw ProtocommError(.wifiAuthFailed, "the station failed to connect (state connection_failed, no reason given)")
            }
            if reason == .networkNotFound {
                throw ProtocommError(.wifiAPNotFound, "the station found no access point with that SSID (state connection_failed, reason network_not_found)")
            }
            if reason == .authError {
                throw ProtocommError(.wifiAuthFailed, "the access point refused the passphrase (state connection_failed, reason auth_error)")
            }
            throw ProtocommError(.wifiAuthFailed, "the station failed to connect (state connection_failed, reason \(reason))")
        default:
            // connecting, disconnected (between attempts), or a state this host does not know: ask again.
            phase = .status(requests: n)
            return [.wait(configuration.pollInterval)]
        }
    }

    private mutating func sendConfig(_ payload: WiFiConfigPayload.Payload) throws(ProtocommError) -> Action {
        .send(endpoint: Endpoint.config, data: try cipher.encrypt(WiFiConfigPayload(payload).encoded))
    }

    private mutating func sendScan(_ payload: WiFiScanPayload.Payload) throws(ProtocommError) -> Action {
        .send(endpoint: Endpoint.scan, data: try cipher.encrypt(WiFiScanPayload(payload).encoded))
    }

    private mutating func configAnswer(_ bytes: [UInt8]) throws(ProtocommError) -> WiFiConfigPayload {
        let plain = try cipher.decrypt(bytes)
        do {
            return try WiFiConfigPayload(protobuf: plain)
        } catch {
            throw ProtocommError(.protocolError, "prov-config answered bytes that are not a WiFiConfigPayload (\(error))")
        }
    }

    private mutating func scanAnswer(_ bytes: [UInt8]) throws(ProtocommError) -> WiFiScanPayload {
        let plain = try cipher.decrypt(bytes)
        let r: WiFiScanPayload
        do {
            r = try WiFiScanPayload(protobuf: plain)
        } catch {
            throw ProtocommError(.protocolError, "prov-scan answered bytes that are not a WiFiScanPayload (\(error))")
        }
        guard r.status == .success else { throw ProtocommError(.deviceRefused, "the device refused the scan request (status \(r.status))") }
        return r
    }

    private func unexpected(_ wanted: String) -> ProtocommError {
        ProtocommError(.protocolError, "the device answered something other than \(wanted)")
    }

    public var description: String { "ProtocommMachine(\(configuration))" }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// The endpoint names ESP-IDF's provisioning manager registers (their characteristics carry them as
/// their User Description).
public enum Endpoint {
    public static let version = "proto-ver"
    public static let session = "prov-session"
    public static let config = "prov-config"
    public static let scan = "prov-scan"
    public static let control = "prov-ctrl"
    /// The names a custom endpoint cannot take.
    public static let reserved: Set<String> = [version, session, config, scan, control]
}
