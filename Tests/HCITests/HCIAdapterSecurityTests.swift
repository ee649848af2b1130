import BLE
import BLESecurity
import Foundation
import HCI
import Testing

private let identity = BluetoothAddress("F0:00:00:00:00:09", kind: .random)!
private let irk = Key128(0x0F0E_0D0C_0B0A_0908_0706_0504_0302_0100)

/// The executor's side of security against `FakeController`: the station's identity, bonds found behind
/// resolvable private addresses, and the connect that goes to the address a bonded device advertises with.
@Suite(.timeLimit(.minutes(1))) struct HCIAdapterSecurityTests {
    private func store(with bond: Bond, station: BluetoothAddress) async throws -> (BondStore, String) {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("bonds-\(UUID().uuidString).json").path
        let store = try BondStore(path: path)
        try await store.save(bond, station: station)
        return (store, path)
    }

    @Test func theStationIsAStaticRandomAddressDerivedFromTheControllersAddress() throws {
        let a = try #require(HCIAdapter.stationAddress(for: BluetoothAddress(value: 0x00AA_0000_0001)))
        #expect(a.isStaticRandom)
        #expect(HCIAdapter.stationAddress(for: BluetoothAddress(value: 0x00AA_0000_0001)) == a)
        #expect(HCIAdapter.stationAddress(for: BluetoothAddress(value: 0x00AA_0000_0002)) != a)
        #expect(HCIAdapter.stationAddress(for: BluetoothAddress(value: 0)) == nil)
    }

    @Test func aBondedDeviceBehindAResolvablePrivateAddressIsHeardConnectedAndEncrypted() async throws {
        let station = try #require(HCIAdapter.stationAddress(for: BluetoothAddress(value: 0x00AA_0000_0001)))
        let ltk = Key128(0x1111_2222_3333_4444_5555_6666_7777_8888)
        let bond = Bond(peer: identity, ltk: ltk, keySize: 16, authenticated: true, secureConnections: true, peerIRK: irk,
                        usesPrivateAddress: true)
        let (bonds, path) = try await store(with: bond, station: station)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let rpa = try BluetoothAddress.resolvablePrivate(irk: irk, prand: 0x12_3456)
        #expect(try rpa.isResolved(by: irk) && rpa != identity)

        let fake = FakeController()
        var options = HCIAdapter.Options(log: { _ in })
        options.bonds = bonds
        let adapter = try await HCIAdapter.open(transport: fake, id: "fake", options: options)
        #expect(adapter.stationIdentity == station)

        // A connect to the identity address: the adapter listens for it first.
        async let connecting = adapter.connect(to: identity, options: ConnectOptions(timeout: .seconds(5)))
        _ = try await firstWritten(fake) { $0.isCommand(.leSetScanEnable) }
        fake.inject(event: .leAdvertisingReport(LEAdvertisingReportEvent(reports: [
            .init(eventType: 0, address: BluetoothAddress(value: 0x4000_0000_0001, kind: .random), data: [], rssi: -60),
            .init(eventType: 0, address: rpa, data: [0x02, 0x01, 0x06], rssi: -50),
        ])))
        let link = try await connecting
        #expect(link.peer == rpa)
        #expect(fake.observed.creates.map(\.peer) == [rpa])

        // The bond is found through the IRK: encryption with the stored key, no pairing.
        async let securing = link.secure(SecurityRequest(level: .authenticated))
        let enable = try await firstWritten(fake) { $0.isCommand(.leEnableEncryption) }
        let command = try LEEnableEncryptionCommand(parameters: Array(enable.bytes.dropFirst(3)))
        #expect(command.ltk == ltk && command.ediv == 0 && command.rand == 0)
        fake.inject(event: .commandStatus(CommandStatusEvent(status: .success, opcode: .leEnableEncryption)))
        fake.inject(event: .encryptionChange(EncryptionChangeEvent(handle: command.handle, enabled: 1)))
        let outcome = try await securing
        #expect(outcome == SecurityOutcome(security: bond.linkSecurity, bond: .used))
        await adapter.close()
    }

    @Test func aBondedDeviceThatDoesNotUsePrivateAddressesIsConnectedAtOnce() async throws {
        let station = try #require(HCIAdapter.stationAddress(for: BluetoothAddress(value: 0x00AA_0000_0001)))
        let bond = Bond(peer: identity, ltk: Key128(1), keySize: 16, authenticated: false, secureConnections: true, peerIRK: irk)
        let (bonds, path) = try await store(with: bond, station: station)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fake = FakeController()
        var options = HCIAdapter.Options(log: { _ in })
        options.bonds = bonds
        let adapter = try await HCIAdapter.open(transport: fake, id: "fake", options: options)
        let link = try await adapter.connect(to: identity, options: ConnectOptions(timeout: .seconds(5)))
        #expect(link.peer == identity)
        #expect(fake.observed.commands[.leSetScanEnable] == nil, "no listening before the connect")
        await adapter.close()
    }

    @Test func aScanKnowsTheDeviceBehindAResolvablePrivateAddress() async throws {
        let station = try #require(HCIAdapter.stationAddress(for: BluetoothAddress(value: 0x00AA_0000_0001)))
        let bond = Bond(peer: identity, ltk: Key128(1), keySize: 16, authenticated: false, secureConnections: true, peerIRK: irk)
        let (bonds, path) = try await store(with: bond, station: station)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fake = FakeController()
        var options = HCIAdapter.Options(log: { _ in })
        options.bonds = bonds
        let adapter = try await HCIAdapter.open(transport: fake, id: "fake", options: options)
        let rpa = try BluetoothAddress.resolvablePrivate(irk: irk, prand: 0x2A_BCDE)
        let other = try BluetoothAddress.resolvablePrivate(irk: Key128(99), prand: 0x2A_BCDE)
        let stream = adapter.scan(ScanFilter(addresses: [identity]))
        _ = try await firstWritten(fake) { $0.isCommand(.leSetScanEnable) }
        fake.inject(event: .leAdvertisingReport(LEAdvertisingReportEvent(reports: [
            .init(eventType: 0, address: other, data: [], rssi: -40),
            .init(eventType: 0, address: rpa, data: [], rssi: -50),
        ])))
        let heard: Advertisement? = try await withDeadline(.seconds(5), operation: "the advertisement") {
            for try await ad in stream { return ad }
            return nil
        }
        let ad = try #require(heard)
        #expect(ad.address == rpa && ad.identity == identity)
        #expect(ad.isFrom(identity) && !ad.isFrom(other))
        await adapter.close()
    }
}
