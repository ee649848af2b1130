import BLE
import BLESecurity
import Foundation
import Testing
@testable import BLESimulator

private let fff0 = BluetoothUUID(0xFFF0)
private let fff1 = BluetoothUUID(0xFFF1)
private let limit = Duration.seconds(5)

private enum Secure {
    static let modelPath = Fixtures.root + "/inventory/models/sensor-v2-secure.yaml"

    static func spec(_ id: String, passkey: String = "123456", faults: String? = nil) throws -> SimulatedDeviceSpec {
        SimulatedDeviceSpec(id: id, name: "SNS-\(id)", variables: ["passkey": passkey],
                            overrides: try faults.flatMap { try Fixtures.yaml("faults: \($0)") })
    }

    static func central(_ specs: [SimulatedDeviceSpec], statePath: String? = nil, bonds: BondStore? = nil,
                        latency: Double = 0) throws -> SimulatedCentral {
        try SimulatedCentral(model: try DeviceModel.load(path: modelPath), devices: specs, inventoryFile: "inventory.yaml",
                             options: SimulatorOptions(seed: 1, latencyScale: latency, statePath: statePath, bonds: bonds))
    }

    static func session(_ central: SimulatedCentral, _ id: String, security: SecurityRequest? = nil) throws -> Session {
        guard let address = central.address(of: id) else { throw BLEError.attributeNotFound(id) }
        return Session(central: central, peer: address,
                       options: SessionOptions(connect: ConnectOptions(timeout: limit), reconnect: .disabled, security: security))
    }

    static func temporaryPath(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)").path
    }
}

@Suite struct SimulatorSecurityTests {
    @Test func theSecureModelReadsItsSecurityManagerAndItsProtectedCharacteristics() throws {
        let model = try DeviceModel.load(path: Secure.modelPath)
        let security = try #require(model.security)
        #expect(security.passkey.source == "${passkey}" && security.passkey.referencedNames == ["passkey"])
        #expect(security == DeviceModel.SecurityConfig(io: .displayOnly, passkey: security.passkey, secureConnections: true,
                                                       requireMITM: true, bond: true))
        let fff0Service = try #require(model.services.first { $0.uuid == fff0 })
        #expect(fff0Service.characteristics.first { $0.uuid == fff1 }?.security == AttributeSecurity(write: .authenticated))
        #expect(fff0Service.characteristics.first { $0.uuid == BluetoothUUID(0xFFF2) }?.security == .open)
    }

    @Test func badSecuritySettingsAreNamedWithTheirPlace() {
        let base = "model: m\nservices:\n  - uuid: FFF0\n    characteristics:\n"
        #expect(throws: SimulatorError.self) {
            try DeviceModel.parse(Array((base + "      - { uuid: FFF1, properties: [write], security: encrypt }\n").utf8), file: "m.yaml")
        }
        do {
            _ = try DeviceModel.parse(Array((base + "      - { uuid: FFF1, properties: [write] }\nsecurity: { io: displays }\n").utf8), file: "m.yaml")
            Issue.record("accepted io: displays")
        } catch {
            #expect(error.description.contains("m.yaml:6:") && error.description.contains("did you mean `display`?"))
        }
    }

    @Test func aPasskeyThatIsNotSixDigitsIsRefusedWhenTheFleetIsBuilt() {
        #expect(throws: SimulatorError.self) { try Secure.central([try Secure.spec("BAD-1", passkey: "12")]) }
    }

    @Test func passkeyEntryWithTheInventoryPasskeyOpensTheDeviceAndItRecordsAuthenticatedWrites() async throws {
        let central = try Secure.central([try Secure.spec("SEC-1")])
        let session = try Secure.session(central, "SEC-1")
        try await session.connect()
        // Unsecured, the control characteristic refuses: Insufficient Authentication.
        await #expect {
            try await session.write(service: fff0, characteristic: fff1, value: [0x01, 0xAA], withResponse: true, timeout: limit)
        } throws: { error in
            guard case BLEError.att(let e) = error else { return false }
            return e.code == .insufficientAuthentication
        }
        let outcome = try await session.secure(SecurityRequest(level: .authenticated, passkey: Passkey("123456")), timeout: limit)
        #expect(outcome == SecurityOutcome(security: LinkSecurity(level: .authenticated, keySize: 16, secureConnections: true),
                                           method: .passkeyEntry, bond: .made))
        try await session.write(service: fff0, characteristic: fff1, value: [0x01, 0xAA], withResponse: true, timeout: limit)
        await session.disconnect()
        let dump = try #require(central.dump(device: "SEC-1"))
        #expect(dump.config == "aa")
        #expect(dump.commands == [SimulatorDump.Command(opcode: "01", status: "00", link: "authenticated")])
        #expect(dump.security?.pairings == [SimulatorDump.Security.Pairing(central: "\(central.stationAddress) random", method: "passkey_entry",
                                                                           level: "authenticated", secureConnections: true, bonded: true)])
        #expect(dump.security?.bonds == ["\(central.stationAddress) random"])
    }

    @Test func aWrongPasskeyFailsAsAPairingFailureOnBothSides() async throws {
        let central = try Secure.central([try Secure.spec("SEC-2", faults: "{ wrong_passkey: true }")])
        let session = try Secure.session(central, "SEC-2", security: SecurityRequest(level: .authenticated, passkey: Passkey("123456")))
        await #expect {
            try await session.connect()
        } throws: { error in
            guard case BLEError.security(let f) = error else { return false }
            return f.category == .pairingFailed && f.reason == "wrong passkey"
        }
        let dump = try #require(central.dump(device: "SEC-2"))
        #expect(dump.security?.pairings == [] && dump.security?.pairingFailures == ["confirm value failed"])
    }

    @Test func aRejectedPairingIsAPairingFailure() async throws {
        let central = try Secure.central([try Secure.spec("SEC-3", faults: "{ pairing_rejected: true }")])
        let session = try Secure.session(central, "SEC-3", security: SecurityRequest(level: .authenticated, passkey: Passkey("123456")))
        await #expect {
            try await session.connect()
        } throws: { error in
            guard case BLEError.security(let f) = error else { return false }
            return f.category == .pairingFailed && f.reason == "pairing not supported"
        }
    }

    @Test func withABondStoreTheNextLinkEncryptsWithoutPairingAndAForgetfulDeviceIsABondLost() async throws {
        let path = Secure.temporaryPath("bonds")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try BondStore(path: path)
        let central = try Secure.central([try Secure.spec("SEC-4"), try Secure.spec("SEC-5", faults: "{ bond_lost: true }")], bonds: store)
        let request = SecurityRequest(level: .authenticated, passkey: Passkey("123456"))
        for id in ["SEC-4", "SEC-5"] {
            let s = try Secure.session(central, id, security: request)
            try await s.connect()
            #expect(await s.security?.bond == .made)
            await s.disconnect()
        }
        let again = try Secure.session(central, "SEC-4", security: request)
        try await again.connect()
        let used = await again.security
        #expect(used?.bond == .used && used?.method == nil)
        try await again.write(service: fff0, characteristic: fff1, value: [0x01, 0x01], withResponse: true, timeout: limit)
        await again.disconnect()
        #expect(central.dump(device: "SEC-4")?.security?.encryptions == 1)
        #expect(central.dump(device: "SEC-4")?.security?.pairings.count == 1)

        let lost = try Secure.session(central, "SEC-5", security: request)
        let address = try #require(central.address(of: "SEC-5"))
        await #expect(throws: BLEError.security(SecurityFailure(.bondLost, reason: "bond lost",
            detail: "encryption with the stored key of \(address) failed with PIN or Key Missing: the device no longer has the bond"))) {
            try await lost.connect()
        }
        #expect(central.dump(device: "SEC-5")?.faults["bond_lost"] == 1)
    }

    @Test func aDeviceRemembersItsBondAcrossRunsInTheStateFileWhichHoldsNoKey() async throws {
        let state = Secure.temporaryPath("state")
        let path = Secure.temporaryPath("bonds")
        defer {
            try? FileManager.default.removeItem(atPath: state)
            try? FileManager.default.removeItem(atPath: path)
        }
        let request = SecurityRequest(level: .authenticated, passkey: Passkey("123456"))
        let first = try Secure.central([try Secure.spec("SEC-6")], statePath: state, bonds: try BondStore(path: path))
        let s1 = try Secure.session(first, "SEC-6", security: request)
        try await s1.connect()
        await s1.disconnect()
        await first.close()

        // A new fleet (a later run) from the same state file and bond store: encrypted, not paired.
        let store = try BondStore(path: path)
        let second = try Secure.central([try Secure.spec("SEC-6")], statePath: state, bonds: store)
        let s2 = try Secure.session(second, "SEC-6", security: request)
        try await s2.connect()
        #expect(await s2.security?.bond == .used)
        await s2.disconnect()
        #expect(second.dump(device: "SEC-6")?.security?.pairings.count == 1)
        #expect(second.dump(device: "SEC-6")?.security?.encryptions == 1)

        // Neither the state file nor the dump holds the key, in any case or as base64.
        let device = try #require(second.address(of: "SEC-6"))
        let bond = try #require(store.bond(station: second.stationAddress, peer: device))
        let renderings = [bond.ltk.value.bigEndianBytes.hexString, bond.ltk.littleEndianBytes.hexString]
            .flatMap { [$0, $0.uppercased()] } + [Data(bond.ltk.value.bigEndianBytes).base64EncodedString(),
                                                  Data(bond.ltk.littleEndianBytes).base64EncodedString()]
        let stateText = try String(contentsOfFile: state, encoding: .utf8)
        let dumpText = await second.dump().json()
        for r in renderings {
            #expect(!stateText.contains(r) && !dumpText.contains(r))
        }
        #expect(stateText.contains("\"paired\"") && stateText.contains("key_sha256"))
    }

    @Test func pairingOnAPacedLinkTakesAConnectionEventPerTurn() async throws {
        var model = try DeviceModel.load(path: Secure.modelPath)
        model.latency.connectionInterval = LatencyRange(.milliseconds(10), .milliseconds(10))
        let central = try SimulatedCentral(model: model, devices: [try Secure.spec("SEC-7")],
                                           options: SimulatorOptions(seed: 1, latencyScale: 1))
        let session = try Secure.session(central, "SEC-7")
        try await session.connect()
        let started = ContinuousClock.now
        _ = try await session.secure(SecurityRequest(level: .authenticated, passkey: Passkey("123456")), timeout: .seconds(30))
        // Passkey Entry: about 47 turns (20 rounds of Confirm and Random each way, then checks and keys).
        #expect(ContinuousClock.now - started >= .milliseconds(400))
        await session.disconnect()
    }

    @Test func theStateFileLinesOfSecurityEventsReadBack() throws {
        let events: [DeviceEvent] = [
            .control([0x01], busy: false, link: .authenticated),
            .paired(PairingRecord(central: "C1:02:03:04:05:06 random", method: .passkeyEntry, level: .authenticated,
                                  secureConnections: true, keySize: 16, keyDigest: "ab")),
            .paired(PairingRecord(central: "x", method: .justWorks, level: .encrypted, secureConnections: false, keySize: 7, keyDigest: nil)),
            .pairingFailed("confirm value failed"), .encrypted(central: "x"), .forgotBond(central: "x"),
        ]
        for e in events {
            let line = StateJournal.line(id: "SN-1", e)
            #expect(StateJournal.decode(Array(line.utf8.dropLast()))?.1 == e)
        }
    }

    @Test func theDatabaseHashIsAESCMACWithAZeroKey() throws {
        // Values computed independently with Bumble 0.0.236's crypto (bumble.crypto.aes_cmac, key 0),
        // written least significant octet first as the characteristic carries them.
        #expect(SMPCrypto.databaseHash([UInt8](hex: "01000028011802000328030203002a2b") ?? []).hexString == "f08c0918f630297342a0b553663077a6")
        #expect(SMPCrypto.databaseHash((0..<40).map { UInt8($0) }).hexString == "0d3039ea8240833e1e764a5045d7a612")
        // The simulated devices' Database Hash characteristic carries it.
        let db = DeviceConnection.database(for: try Secure.central([try Secure.spec("H-1")]).devices[0])
        let h = db.valueHandle(service: .genericAttribute, characteristic: .databaseHash) ?? 0
        #expect(db.value(h) == SMPCrypto.databaseHash(db.databaseHashInput))
    }
}
