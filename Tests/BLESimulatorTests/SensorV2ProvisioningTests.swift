import BLE
import Digests
import Testing
@testable import BLESimulator

@Suite(.timeLimit(.minutes(1)))
struct SensorV2ProvisioningTests {
    @Test func aWholeProvisioningSequenceByRawPDUsLeavesTheDeviceProvisioned() async throws {
        let central = try Fixtures.central([try Fixtures.spec("SN-0001")])
        var client = try await Fixtures.connect(central, "SN-0001")
        let mtu = try await client.request(.exchangeMTURequest(.init(mtu: 247)))
        #expect(mtu == .exchangeMTUResponse(.init(mtu: 247)))
        try await client.discover()
        #expect(try await client.read(0x2A25) == Array("SN-0001".utf8))
        #expect(try await client.read(0x2A26) == Array("2.4.1".utf8))
        #expect(try await client.read(0x2A29) == Array("Acme".utf8))
        #expect(try await client.read(0x2A19) == [87])
        #expect(try await client.read(0xFFF2) == [0x00])
        #expect(try await client.subscribe(0xFFF3) == .writeResponse)

        #expect(try await client.control([0x01, 0x0A, 0x0B, 0x0C]) == [0x01, 0x00])
        #expect(try await client.read(0xFFF2) == [0x01])
        #expect(try await client.control([0x03, 0xDC, 0x05, 0x00, 0x00]) == [0x03, 0x00])
        var i = 0
        while i < Fixtures.blob.count {
            try await client.command(.writeCommand(.init(handle: try client.handle(0xFFF4),
                                                         value: Array(Fixtures.blob[i..<min(i + 244, Fixtures.blob.count)]))))
            i += 244
        }
        #expect(try await client.control([0x04]) == [0x04, 0x00])
        #expect(try await client.control([0x02]) == [0x02, 0x00])
        #expect(try await client.read(0xFFF2) == [0x02])
        // A commit is idempotent.
        #expect(try await client.control([0x02]) == [0x02, 0x00])
        await client.link.disconnect()

        let d = try #require(await central.dump().device("SN-0001"))
        #expect(d.config == "0a0b0c")
        #expect(d.blob == SimulatorDump.Blob(expected: 1500, received: 1500, ended: true, sha256: SHA256.hexDigest(Fixtures.blob)))
        #expect(d.state == "02")
        #expect(d.commits == 2)
        #expect(d.connections == 1)
        #expect(d.commands.map { "\($0.opcode ?? "-")\($0.status ?? "-")" } == ["0100", "0300", "0400", "0200", "0200"])
        #expect(d.faults.isEmpty)
    }

    @Test func commandsOutOfOrderOrMalformedGetTheirErrorStatus() async throws {
        let central = try Fixtures.central([try Fixtures.spec("SN-0002")])
        var client = try await Fixtures.connect(central, "SN-0002")
        try await client.discover()
        _ = try await client.subscribe(0xFFF3)
        #expect(try await client.control([0x02]) == [0x02, 0x01])              // commit before config
        #expect(try await client.control([0x01]) == [0x01, 0x01])              // empty config
        #expect(try await client.control([0x01] + [UInt8](repeating: 1, count: 201)) == [0x01, 0x01])
        #expect(try await client.control([0x04]) == [0x04, 0x01])              // end without begin
        #expect(try await client.control([0x7E, 0x01]) == [0x7E, 0xFF])        // unknown
        // Blob bytes with no blob begun are dropped.
        try await client.command(.writeCommand(.init(handle: try client.handle(0xFFF4), value: [1, 2, 3])))
        #expect(try await client.control([0x01, 0x55]) == [0x01, 0x00])
        #expect(try await client.control([0x03, 0x04, 0x00, 0x00, 0x00]) == [0x03, 0x00])
        // A begun blob must be ended before a commit.
        #expect(try await client.control([0x02]) == [0x02, 0x01])
        try await client.command(.writeCommand(.init(handle: try client.handle(0xFFF4), value: [9, 9, 9])))
        #expect(try await client.control([0x04]) == [0x04, 0x01])              // 3 of 4 bytes
        #expect(try await client.read(0xFFF2) == [0x01])
        await client.link.disconnect()
        let d = try #require(await central.dump().device("SN-0002"))
        #expect(d.state == "01")
        #expect(d.commits == 0)
        #expect(d.blobBytesDropped == 3)
        #expect(d.blob?.received == 3)
        #expect(d.blob?.ended == false)
    }

    @Test func anUnsubscribedClientStillGetsTheCommandExecuted() async throws {
        let central = try Fixtures.central([try Fixtures.spec("SN-0003")])
        var client = try await Fixtures.connect(central, "SN-0003")
        try await client.discover()
        #expect(try await client.write(0xFFF1, [0x01, 0x42]) == .writeResponse)
        #expect(try await client.read(0xFFF2) == [0x01])
        #expect(client.notifications.isEmpty)
        await client.link.disconnect()
        #expect(central.dump(device: "SN-0003")?.config == "42")
    }

    @Test func aReconnectSeesTheSameDeviceStateButFreshSubscriptions() async throws {
        let central = try Fixtures.central([try Fixtures.spec("SN-0004")])
        var first = try await Fixtures.connect(central, "SN-0004")
        try await first.discover()
        _ = try await first.subscribe(0xFFF3)
        #expect(try await first.control([0x01, 0x01]) == [0x01, 0x00])
        #expect(try await first.control([0x03, 0x02, 0x00, 0x00, 0x00]) == [0x03, 0x00])
        try await first.command(.writeCommand(.init(handle: try first.handle(0xFFF4), value: [7])))
        await first.link.disconnect()
        #expect(await first.link.waitForDisconnect() == .localHostTerminated)

        var second = try await Fixtures.connect(central, "SN-0004")
        try await second.discover()
        #expect(try await second.read(0xFFF2) == [0x01])
        // Not subscribed on this link: the command runs, no ack arrives.
        #expect(try await second.write(0xFFF1, [0x04]) == .writeResponse)
        _ = try await second.subscribe(0xFFF3)
        try await second.command(.writeCommand(.init(handle: try second.handle(0xFFF4), value: [8])))
        #expect(try await second.control([0x04]) == [0x04, 0x00])
        #expect(try await second.control([0x02]) == [0x02, 0x00])
        #expect(second.notifications.isEmpty)
        await second.link.disconnect()
        let d = try #require(central.dump(device: "SN-0004"))
        #expect(d.connections == 2)
        #expect(d.blob == SimulatorDump.Blob(expected: 2, received: 2, ended: true, sha256: SHA256.hexDigest([7, 8])))
        #expect(d.commands.map(\.status) == ["00", "00", "01", "00", "00"])
    }

    @Test func latenciesFromTheModelDelayAcksButKeepThemAfterTheWriteResponse() async throws {
        let central = try SimulatedCentral(model: try Fixtures.model(), devices: [try Fixtures.spec("SN-0005")],
                                           options: SimulatorOptions(seed: 3, latencyScale: 0.1))
        var client = try await Fixtures.connect(central, "SN-0005")
        try await client.discover()
        _ = try await client.subscribe(0xFFF3)
        let response = try await client.write(0xFFF1, [0x01, 0x0A])
        #expect(response == .writeResponse)
        #expect(client.notifications.isEmpty)
        #expect(try await client.notification()?.value == [0x01, 0x00])
        await client.link.disconnect()
    }
}
