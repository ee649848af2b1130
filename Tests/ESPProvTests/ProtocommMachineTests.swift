import BLE
import BLESecurity
import Testing
@testable import ESPProv

/// The host's provisioning machine against the device model, with no radio and no clock: a `wait` moves
/// the device's time on by its duration.
@Suite struct ProtocommMachineTests {
    static let username = Array("wifiprov".utf8)
    static let pop = Array("abcd1234".utf8)
    static let salt: [UInt8] = Array(0..<16)

    static func device(scheme: Int, pop: [UInt8] = pop, joinTime: Duration = .milliseconds(600),
                       accessPoints: [ProvisioningDevice.AccessPoint] = [.init(ssid: "line-5", passphrase: "correct horse")]) throws -> ProvisioningDevice {
        let security: SecurityResponder.Parameters
        switch scheme {
        case 0: security = .none
        case 1: security = .proofOfPossession(pop)
        default: security = .srp(salt: salt, verifier: try SRP6a.verifier(username: username, password: pop, salt: salt))
        }
        return ProvisioningDevice(settings: .init(security: security, accessPoints: accessPoints, joinTime: joinTime))
    }

    static func credentials(_ scheme: Int, pop: [UInt8] = pop) -> SecurityCredentials {
        switch scheme {
        case 0: .none
        case 1: .proofOfPossession(pop)
        default: .srp(username: username, password: pop)
        }
    }

    /// Runs one operation: every request to the device, every wait moving its clock. Returns the endpoints
    /// asked, in order, and the last action.
    static func run(_ op: ProtocommMachine.Operation, _ machine: inout ProtocommMachine, _ device: inout ProvisioningDevice,
                    now: inout Duration) -> (endpoints: [String], end: ProtocommMachine.Action?) {
        var endpoints: [String] = []
        var actions = machine.handle(.begin(op))
        for _ in 0..<200 {
            guard let a = actions.first else { return (endpoints, nil) }
            switch a {
            case .send(let endpoint, let data):
                endpoints.append(endpoint)
                switch device.handle(endpoint: endpoint, request: data, now: now) {
                case .answer(let bytes): actions = machine.handle(.answered(bytes))
                case .refuse(let why): actions = machine.handle(.refused(why))
                }
            case .wait(let d):
                now += d
                actions = machine.handle(.pollDue)
            case .completed, .failed:
                return (endpoints, a)
            }
        }
        return (endpoints, nil)
    }

    @Test(arguments: [1, 2])
    func eachSchemeProvisionsAndTheDeviceKeepsOnlyTheHash(scheme: Int) throws {
        var device = try Self.device(scheme: scheme)
        var machine = ProtocommMachine(configuration: .init(credentials: Self.credentials(scheme), pollInterval: .milliseconds(250)))
        var now = Duration.zero
        let (endpoints, end) = Self.run(.provision(ssid: Array("line-5".utf8), passphrase: Array("correct horse".utf8)), &machine, &device, now: &now)
        guard case .completed(.joined(let join))? = end else { Issue.record("\(String(describing: end))"); return }
        #expect(join.state == "connected" && join.ip == "192.168.4.23" && join.ssid == Array("line-5".utf8) && join.channel == 6)
        // proto-ver, two session round trips, set, apply, then status until the 600 ms join is over (250 ms apart).
        #expect(endpoints == ["proto-ver", "prov-session", "prov-session", "prov-config", "prov-config", "prov-config", "prov-config", "prov-config", "prov-config"])
        #expect(join.statusRequests == 4)
        #expect(device.ssid == "line-5" && device.applyCount == 1)
        #expect(device.passphraseHash == (try ESPCrypto.sha256(Array("correct horse".utf8))).hexString)
        #expect(machine.isReady)

        // The session stays for the next operation: a custom endpoint, encrypted, with no new handshake.
        let (more, custom) = Self.run(.custom(endpoint: "custom-data", data: Array("wifi?".utf8)), &machine, &device, now: &now)
        #expect(more == ["custom-data"])
        #expect(custom == .completed(.custom(Array("connected 192.168.4.23".utf8))))
        #expect(device.customReceived.map(\.data) == [Array("wifi?".utf8)])
        #expect(device.sessions == 1)
    }

    @Test(arguments: [1, 2])
    func aWrongProofOfPossessionFailsTheSessionAndNothingIsApplied(scheme: Int) throws {
        var device = try Self.device(scheme: scheme)
        var machine = ProtocommMachine(configuration: .init(credentials: Self.credentials(scheme, pop: Array("wrong-pop".utf8))))
        var now = Duration.zero
        let (endpoints, end) = Self.run(.provision(ssid: Array("line-5".utf8), passphrase: Array("correct horse".utf8)), &machine, &device, now: &now)
        guard case .failed(let e)? = end else { Issue.record("\(String(describing: end))"); return }
        #expect(e.kind == .securityFailed)
        #expect(!endpoints.contains("prov-config"))
        #expect(device.applyCount == 0 && device.ssid == nil && device.passphraseHash == nil && device.failedProofs == 1)
        #expect(!machine.isReady)
    }

    @Test func aMissingAccessPointAndAWrongPassphraseFailWithTheirKinds() throws {
        var device = try Self.device(scheme: 2)
        var machine = ProtocommMachine(configuration: .init(credentials: Self.credentials(2)))
        var now = Duration.zero
        let (_, missing) = Self.run(.provision(ssid: Array("nowhere".utf8), passphrase: Array("x".utf8)), &machine, &device, now: &now)
        guard case .failed(let e1)? = missing else { Issue.record("\(String(describing: missing))"); return }
        #expect(e1.kind == .wifiAPNotFound && e1.message.contains("network_not_found"))

        var device2 = try Self.device(scheme: 1)
        var machine2 = ProtocommMachine(configuration: .init(credentials: Self.credentials(1)))
        let (_, wrong) = Self.run(.provision(ssid: Array("line-5".utf8), passphrase: Array("battery staple".utf8)), &machine2, &device2, now: &now)
        guard case .failed(let e2)? = wrong else { Issue.record("\(String(describing: wrong))"); return }
        #expect(e2.kind == .wifiAuthFailed && e2.message.contains("auth_error"))
        #expect(!e2.message.contains("battery") && !e2.message.contains("horse"))
    }

    @Test func securityZeroRunsOnlyWhenAllowed() throws {
        var device = try Self.device(scheme: 0)
        var now = Duration.zero
        var refused = ProtocommMachine(configuration: .init(credentials: .none))
        let (endpoints, end) = Self.run(.scan, &refused, &device, now: &now)
        guard case .failed(let e)? = end else { Issue.record("\(String(describing: end))"); return }
        #expect(e.kind == .securityFailed && endpoints.isEmpty)

        var allowed = ProtocommMachine(configuration: .init(credentials: .none, allowInsecure: true))
        let (_, scanned) = Self.run(.scan, &allowed, &device, now: &now)
        guard case .completed(.scanned(let aps))? = scanned else { Issue.record("\(String(describing: scanned))"); return }
        #expect(aps.map(\.ssid) == [Array("line-5".utf8)])
    }

    @Test func aSchemeTheDeviceDoesNotRunIsASecurityFailureBeforeAnyHandshake() throws {
        var device = try Self.device(scheme: 2)
        var machine = ProtocommMachine(configuration: .init(credentials: Self.credentials(1)))
        var now = Duration.zero
        let (endpoints, end) = Self.run(.session, &machine, &device, now: &now)
        guard case .failed(let e)? = end else { Issue.record("\(String(describing: end))"); return }
        #expect(e.kind == .securityFailed && e.message.contains("runs security 2"))
        #expect(endpoints == ["proto-ver"])
    }

    @Test func aScanReadsEveryAccessPointFourAtATime() throws {
        let aps = (0..<9).map { ProvisioningDevice.AccessPoint(ssid: "ap-\($0)", passphrase: "p", channel: 1 + $0, rssi: -40 - $0) }
        var device = try Self.device(scheme: 1, accessPoints: aps)
        var machine = ProtocommMachine(configuration: .init(credentials: Self.credentials(1)))
        var now = Duration.zero
        let (endpoints, end) = Self.run(.scan, &machine, &device, now: &now)
        guard case .completed(.scanned(let found))? = end else { Issue.record("\(String(describing: end))"); return }
        #expect(found.map { String(decoding: $0.ssid, as: UTF8.self) } == aps.map(\.ssid))
        #expect(found.map(\.rssi) == aps.map { Int32($0.rssi) })
        // start, status, then results 0-3, 4-7, 8.
        #expect(endpoints.filter { $0 == "prov-scan" }.count == 5)
    }

    @Test func hostileAnswersFailWithoutTrapping() throws {
        var now = Duration.zero
        for junk in [[], [0xFF], [0x08, 0x80], Array(repeating: 0x0A, count: 40), Array("{\"prov\":1}".utf8)] as [[UInt8]] {
            var machine = ProtocommMachine(configuration: .init(credentials: Self.credentials(1)))
            _ = machine.handle(.begin(.session))
            let versionAnswer = machine.handle(.answered(junk))
            if case .failed = versionAnswer.first {} else {
                // A short version text is accepted; the session's answer then is junk.
                let next = machine.handle(.answered(junk))
                guard case .failed(let e)? = next.first else { Issue.record("accepted \(junk)"); continue }
                #expect(e.kind == .protocolError || e.kind == .securityFailed)
            }
            now += .milliseconds(1)
        }
        // An answer where none is awaited.
        var idle = ProtocommMachine(configuration: .init(credentials: Self.credentials(1)))
        guard case .failed(let e)? = idle.handle(.answered([1, 2, 3])).first else { Issue.record("no failure"); return }
        #expect(e.kind == .protocolError)
    }

    @Test func printingTheMachineOrItsOperationShowsNoSecret() {
        let machine = ProtocommMachine(configuration: .init(credentials: .srp(username: Self.username, password: Self.pop)))
        let op = ProtocommMachine.Operation.provision(ssid: Array("line-5".utf8), passphrase: Array("correct horse".utf8))
        for text in [String(describing: machine), String(reflecting: machine), String(describing: op), String(reflecting: op), "\(machine.configuration)"] {
            #expect(!text.contains("abcd1234") && !text.contains("correct horse"), "\(text)")
        }
    }

    /// The driver over a transport: the same device behind an actor, a link that fails mid-way.
    actor DeviceTransport: ProtocommTransport {
        var device: ProvisioningDevice
        let start = ContinuousClock.now
        var dropOn: String?
        init(_ device: ProvisioningDevice, dropOn: String? = nil) {
            self.device = device
            self.dropOn = dropOn
        }
        func exchange(_ endpoint: String, _ data: [UInt8], timeout: Duration) async throws -> [UInt8] {
            if endpoint == dropOn {
                dropOn = nil
                device.linkClosed()
                throw BLEError.disconnected(.remoteUserTerminated)
            }
            switch device.handle(endpoint: endpoint, request: data, now: ContinuousClock.now - start) {
            case .answer(let b): return b
            case .refuse(let why): throw ProtocommTransportRefusal(why)
            }
        }
        var applied: Int { device.applyCount }
    }

    @Test func theClientRunsOperationsOverATransportAndStartsOverAfterALostLink() async throws {
        let transport = DeviceTransport(try Self.device(scheme: 1, joinTime: .milliseconds(20)), dropOn: "prov-config")
        var machine = ProtocommMachine(configuration: .init(credentials: Self.credentials(1), pollInterval: .milliseconds(5)))
        let op = ProtocommMachine.Operation.provision(ssid: Array("line-5".utf8), passphrase: Array("correct horse".utf8))
        await #expect(throws: BLEError.self) {
            try await ProtocommClient.run(op, on: &machine, over: transport, deadline: .now + .seconds(10), timeout: .seconds(10))
        }
        #expect(!machine.isReady)
        let outcome = try await ProtocommClient.run(op, on: &machine, over: transport, deadline: .now + .seconds(10), timeout: .seconds(10))
        guard case .joined(let join) = outcome else { Issue.record("\(outcome)"); return }
        #expect(join.ip == "192.168.4.23")
        #expect(await transport.applied == 1)
    }
}
