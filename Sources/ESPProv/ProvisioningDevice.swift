import BLE

/// The device's side of ESP-IDF unified provisioning as a value, for the simulator's ESP model and for
/// tests that run the host's machine against a device: proto-ver, prov-session (`SecurityResponder`),
/// prov-config (set, apply, status), prov-scan, prov-ctrl and custom endpoints, over a virtual list of
/// access points. Time is given by the caller (`now`), so a slow join is a value too.
///
/// What it keeps of a passphrase is its SHA-256 (hex), never the passphrase.
package struct ProvisioningDevice: Sendable {
    /// An access point the virtual station can see.
    package struct AccessPoint: Sendable, Equatable {
        package var ssid: String
        /// Nil for an open network.
        package var passphrase: String?
        package var channel: Int
        package var rssi: Int
        package var bssid: [UInt8]

        package init(ssid: String, passphrase: String?, channel: Int = 6, rssi: Int = -52, bssid: [UInt8] = [0x24, 0x0A, 0xC4, 0, 0, 1]) {
            self.ssid = ssid
            self.passphrase = passphrase
            self.channel = channel
            self.rssi = rssi
            self.bssid = bssid
        }
    }

    package struct Settings: Sendable {
        package var security: SecurityResponder.Parameters
        package var patchVersion: Int
        package var version: String
        package var accessPoints: [AccessPoint]
        /// How long the station takes to join (or to give up) after apply.
        package var joinTime: Duration
        /// The IPv4 address the station gets.
        package var ip: String
        /// Custom endpoints the application registers.
        package var customEndpoints: [String]

        package init(security: SecurityResponder.Parameters, patchVersion: Int = 1, version: String = "v1.1",
                     accessPoints: [AccessPoint] = [], joinTime: Duration = .milliseconds(300), ip: String = "192.168.4.23",
                     customEndpoints: [String] = ["custom-data"]) {
            self.security = security
            self.patchVersion = patchVersion
            self.version = version
            self.accessPoints = accessPoints
            self.joinTime = joinTime
            self.ip = ip
            self.customEndpoints = customEndpoints
        }
    }

    /// What the device does with a request.
    package enum Answer: Sendable, Equatable {
        /// The bytes the next read of the endpoint returns.
        case answer([UInt8])
        /// An ATT error (ESP-IDF's NimBLE transport refuses a request its handler failed).
        case refuse(String)
    }

    package let settings: Settings
    private var responder: SecurityResponder
    private var cipher: ProtocommCipher?
    /// The SSID set, and the SHA-256 of the passphrase set (hex).
    package private(set) var ssid: String?
    package private(set) var passphraseHash: String?
    private var pendingPassphraseMatch: AccessPointMatch?
    /// When apply was received, and how it will end.
    package private(set) var appliedAt: Duration?
    private var joinOutcome: AccessPointMatch?
    package private(set) var applyCount = 0
    package private(set) var sessions = 0
    package private(set) var failedProofs = 0
    /// What custom endpoints received (decrypted), in order.
    package private(set) var customReceived: [(endpoint: String, data: [UInt8])] = []

    private enum AccessPointMatch: Sendable, Equatable {
        case joins(AccessPoint)
        case wrongPassphrase
        case notFound
    }

    package init(settings: Settings) {
        self.settings = settings
        responder = SecurityResponder(parameters: settings.security, patchVersion: settings.patchVersion)
    }

    /// The station's state now: `idle` before apply, then `connecting`, `connected` or `connection_failed`.
    package func stationState(now: Duration) -> String {
        guard let at = appliedAt, let outcome = joinOutcome else { return "idle" }
        guard now >= at + settings.joinTime else { return "connecting" }
        if case .joins = outcome { return "connected" }
        return "connection_failed"
    }

    /// proto-ver's answer.
    package var versionAnswer: [UInt8] {
        var caps = ["wifi_scan"]
        if case .none = settings.security { caps.append("no_sec") }
        let list = caps.map { "\"\($0)\"" }.joined(separator: ",")
        return Array("{\"prov\":{\"ver\":\"\(settings.version)\",\"sec_ver\":\(settings.security.scheme),\"sec_patch_ver\":\(settings.patchVersion),\"cap\":[\(list)]}}".utf8)
    }

    /// The link closed: the session ends (a new link needs a new handshake).
    package mutating func linkClosed() {
        cipher = nil
        responder = SecurityResponder(parameters: settings.security, patchVersion: settings.patchVersion)
    }

    /// Handles one request written to `endpoint`.
    package mutating func handle(endpoint: String, request: [UInt8], now: Duration) -> Answer {
        switch endpoint {
        case Endpoint.version:
            return .answer(versionAnswer)
        case Endpoint.session:
            do {
                let (response, established) = try responder.handle(request: request)
                if let established {
                    cipher = established
                    sessions += 1
                }
                return .answer(response)
            } catch {
                if error.kind == .securityFailed { failedProofs += 1 }
                cipher = nil
                return .refuse("\(error.kind)")
            }
        default:
            guard var c = cipher else { return .refuse("no session") }
            let plain: [UInt8]
            do {
                plain = try c.decrypt(request)
            } catch {
                return .refuse("undecryptable")
            }
            let reply: [UInt8]?
            switch endpoint {
            case Endpoint.config: reply = config(plain, now: now)
            case Endpoint.scan: reply = scan(plain)
            case Endpoint.control: reply = control(plain)
            default:
                guard settings.customEndpoints.contains(endpoint) else { return .refuse("no endpoint") }
                customReceived.append((endpoint, plain))
                reply = custom(plain, now: now)
            }
            guard let reply, let sealed = try? c.encrypt(reply) else { return .refuse("bad request") }
            cipher = c
            return .answer(sealed)
        }
    }

    private mutating func config(_ plain: [UInt8], now: Duration) -> [UInt8]? {
        guard let request = try? WiFiConfigPayload(protobuf: plain) else { return nil }
        switch request.payload {
        case .cmdSetConfig(let c)?:
            guard let s = String(validating: c.ssid, as: UTF8.self), !s.isEmpty, c.ssid.count <= 32, c.passphrase.count <= 64 else {
                return WiFiConfigPayload(.respSetConfig(StatusMessage(status: .invalidArgument))).encoded
            }
            ssid = s
            passphraseHash = (try? ESPCrypto.sha256(c.passphrase))?.hexString
            let pass = String(decoding: c.passphrase, as: UTF8.self)
            if let ap = settings.accessPoints.first(where: { $0.ssid == s }) {
                pendingPassphraseMatch = (ap.passphrase ?? "") == pass ? .joins(ap) : .wrongPassphrase
            } else {
                pendingPassphraseMatch = .notFound
            }
            return WiFiConfigPayload(.respSetConfig(StatusMessage(status: .success))).encoded
        case .cmdApplyConfig?:
            guard let match = pendingPassphraseMatch else {
                return WiFiConfigPayload(.respApplyConfig(StatusMessage(status: .invalidArgument))).encoded
            }
            appliedAt = now
            joinOutcome = match
            applyCount += 1
            return WiFiConfigPayload(.respApplyConfig(StatusMessage(status: .success))).encoded
        case .cmdGetStatus?:
            var r = WiFiStatusResponse()
            switch (stationState(now: now), joinOutcome) {
            case ("connected", .joins(let ap)?):
                r.staState = .connected
                r.state = .connected(WiFiConnectedState(ip4Addr: settings.ip, authMode: ap.passphrase == nil ? .open : .wpa2PSK,
                                                        ssid: Array(ap.ssid.utf8), bssid: ap.bssid, channel: Int32(ap.channel)))
            case ("connection_failed", .notFound?):
                r.staState = .connectionFailed
                r.state = .failReason(.networkNotFound)
            case ("connection_failed", _):
                r.staState = .connectionFailed
                r.state = .failReason(.authError)
            case ("connecting", _):
                r.staState = .connecting
            default:
                r.staState = .disconnected
            }
            return WiFiConfigPayload(.respGetStatus(r)).encoded
        default:
            return nil
        }
    }

    private func scan(_ plain: [UInt8]) -> [UInt8]? {
        guard let request = try? WiFiScanPayload(protobuf: plain) else { return nil }
        switch request.payload {
        case .cmdScanStart?:
            return WiFiScanPayload(.respScanStart).encoded
        case .cmdScanStatus?:
            return WiFiScanPayload(.respScanStatus(WiFiScanStatusResponse(scanFinished: true, resultCount: UInt32(settings.accessPoints.count)))).encoded
        case .cmdScanResult(let c)?:
            let start = Int(c.startIndex), count = Int(c.count)
            guard start >= 0, start < settings.accessPoints.count, count > 0 else {
                return WiFiScanPayload(.respScanResult(WiFiScanResultResponse()), status: .invalidArgument).encoded
            }
            let entries = settings.accessPoints[start..<min(settings.accessPoints.count, start + count)].map { ap in
                WiFiScanResult(ssid: Array(ap.ssid.utf8), channel: UInt32(ap.channel), rssi: Int32(ap.rssi), bssid: ap.bssid,
                               auth: ap.passphrase == nil ? .open : .wpa2PSK)
            }
            return WiFiScanPayload(.respScanResult(WiFiScanResultResponse(entries: entries))).encoded
        default:
            return nil
        }
    }

    private mutating func control(_ plain: [UInt8]) -> [UInt8]? {
        guard let request = try? WiFiCtrlPayload(protobuf: plain) else { return nil }
        switch request.payload {
        case .cmdCtrlReset?:
            appliedAt = nil
            joinOutcome = nil
            return WiFiCtrlPayload(.respCtrlReset).encoded
        case .cmdCtrlReprov?:
            appliedAt = nil
            joinOutcome = nil
            ssid = nil
            passphraseHash = nil
            return WiFiCtrlPayload(.respCtrlReprov).encoded
        default:
            return nil
        }
    }

    /// A custom endpoint answers `wifi?` with the station's state and IP (`connected 192.168.4.23`), and
    /// anything else with `SUCCESS` (as ESP-IDF's example custom handler does).
    private func custom(_ plain: [UInt8], now: Duration) -> [UInt8] {
        guard plain == Array("wifi?".utf8) else { return Array("SUCCESS".utf8) }
        let state = stationState(now: now)
        return Array((state == "connected" ? "connected \(settings.ip)" : state).utf8)
    }
}

