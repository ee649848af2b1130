import BLE
import Digests
import Testing
@testable import BLESimulator

/// The real GATT client (`Session`) against virtual devices: the whole stack, checked on the device side.
@Suite(.timeLimit(.minutes(1)))
struct WholeStackTests {
    static let fff0 = BluetoothUUID(0xFFF0)
    static let t = Duration.seconds(5)

    @Test func aSessionProvisionsASensorV2AndTheDeviceSideAgrees() async throws {
        let central = try Fixtures.central([try Fixtures.spec("WS-1")])
        let address = try #require(central.address(of: "WS-1"))
        let session = Session(central: central, peer: address)
        try await session.connect()
        #expect(try await session.read(service: BluetoothUUID(0x180A), characteristic: BluetoothUUID(0x2A25), timeout: Self.t)
                == Array("WS-1".utf8))
        #expect(try await session.read(service: BluetoothUUID(0x180A), characteristic: BluetoothUUID(0x2A26), timeout: Self.t)
                == Array("2.4.1".utf8))
        var acks = try await session.notifications(service: Self.fff0, characteristic: BluetoothUUID(0xFFF3), timeout: Self.t)
            .makeAsyncIterator()
        func control(_ v: [UInt8]) async throws -> [UInt8]? {
            try await session.write(service: Self.fff0, characteristic: BluetoothUUID(0xFFF1), value: v, withResponse: true, timeout: Self.t)
            return try await acks.next()
        }
        #expect(try await control([0x01, 0x0A, 0x0B, 0x0C]) == [0x01, 0x00])
        let n = UInt32(Fixtures.blob.count)
        #expect(try await control([0x03, UInt8(n & 0xFF), UInt8(n >> 8), 0, 0]) == [0x03, 0x00])
        try await session.writeBlob(service: Self.fff0, characteristic: BluetoothUUID(0xFFF4), data: Fixtures.blob, timeout: Self.t)
        #expect(try await control([0x04]) == [0x04, 0x00])
        #expect(try await control([0x02]) == [0x02, 0x00])
        #expect(try await session.read(service: Self.fff0, characteristic: BluetoothUUID(0xFFF2), timeout: Self.t) == [0x02])
        await session.disconnect()

        let d = try #require(central.dump(device: "WS-1"))
        #expect(d.config == "0a0b0c")
        #expect(d.blob == SimulatorDump.Blob(expected: Fixtures.blob.count, received: Fixtures.blob.count, ended: true,
                                             sha256: SHA256.hexDigest(Fixtures.blob)))
        #expect(d.state == "02")
        #expect(d.commits == 1)
        #expect(d.connections == 1)
    }

    @Test func aDeviceThatNeedsFullDiscoveryWorksWithDiscoveryAll() async throws {
        let central = try Fixtures.central([try Fixtures.spec("WS-2", "faults: { full_discovery_only: true }")])
        let address = try #require(central.address(of: "WS-2"))
        let session = Session(central: central, peer: address, options: SessionOptions(discovery: .all))
        try await session.connect()
        #expect(try await session.read(service: BluetoothUUID(0x180A), characteristic: BluetoothUUID(0x2A25), timeout: Self.t)
                == Array("WS-2".utf8))
        await session.disconnect()
    }

    @Test func aSessionReconnectsAfterADropAndTheDeviceKeepsWhatItReceived() async throws {
        // Seeded: with drop p = 0.1 the device drops somewhere in this sequence; the session reconnects
        // and the sequence completes; the device side shows more than one connection.
        let central = try Fixtures.central([try Fixtures.spec("WS-3", "faults: { drop: 0.1 }")], seed: 11)
        let address = try #require(central.address(of: "WS-3"))
        let session = Session(central: central, peer: address,
                              options: SessionOptions(reconnect: .limited(maxAttempts: 5, delays: [])))
        try await session.connect()
        var reads = 0
        for _ in 0..<40 {
            do {
                _ = try await session.read(service: BluetoothUUID(0x180A), characteristic: BluetoothUUID(0x2A25), timeout: Self.t)
                reads += 1
            } catch BLEError.disconnected {
                continue
            }
        }
        await session.disconnect()
        let d = try #require(central.dump(device: "WS-3"))
        #expect(reads > 0)
        #expect(d.connections >= 2)
        #expect((d.faults["drop"] ?? 0) == d.connections - 1)
    }
}
