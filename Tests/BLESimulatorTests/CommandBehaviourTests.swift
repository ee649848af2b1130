import BLE
import Digests
import Testing
@testable import BLESimulator

/// The `command-ack` behaviour answers every repeated command as the reference device does
/// (docs/devices/sensor-v2.md: only the commit is idempotent): a repeated `01` replaces the configuration,
/// a repeated `03` clears the blob and starts again, a `04` with no blob open answers `04 01`, a
/// repeated commit answers `02 00` again. The same holds when the acks are lost (`ack_loss`): the
/// commands still run.
@Suite(.timeLimit(.minutes(1)))
struct CommandBehaviourTests {
    static func beginBlob(_ n: Int) -> [UInt8] {
        [0x03, UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 24 & 0xFF)]
    }

    static func stream(_ client: inout RawATTClient, _ bytes: [UInt8]) async throws {
        var i = 0
        while i < bytes.count {
            try await client.command(.writeCommand(.init(handle: try client.handle(0xFFF4), value: Array(bytes[i..<min(i + 200, bytes.count)]))))
            i += 200
        }
    }

    @Test func aRepeatedSetConfigReplacesTheConfiguration() async throws {
        let central = try Fixtures.central([try Fixtures.spec("SN-0101")])
        var client = try await Fixtures.connect(central, "SN-0101")
        try await client.discover()
        _ = try await client.subscribe(0xFFF3)
        #expect(try await client.control([0x01, 0xAA, 0xBB]) == [0x01, 0x00])
        #expect(try await client.control([0x01, 0xCC]) == [0x01, 0x00])
        #expect(try await client.read(0xFFF2) == [0x01])
        await client.link.disconnect()
        #expect(central.dump(device: "SN-0101")?.config == "cc")
    }

    @Test func aRepeatedBeginBlobClearsTheBlobAndStartsAgain() async throws {
        let central = try Fixtures.central([try Fixtures.spec("SN-0102")])
        var client = try await Fixtures.connect(central, "SN-0102")
        try await client.discover()
        _ = try await client.subscribe(0xFFF3)
        #expect(try await client.control([0x01, 0x01]) == [0x01, 0x00])
        #expect(try await client.control(Self.beginBlob(Fixtures.blob.count)) == [0x03, 0x00])
        try await Self.stream(&client, Array(Fixtures.blob.prefix(600)))          // cut short
        #expect(try await client.control(Self.beginBlob(Fixtures.blob.count)) == [0x03, 0x00])
        try await Self.stream(&client, Fixtures.blob)
        #expect(try await client.control([0x04]) == [0x04, 0x00])
        await client.link.disconnect()
        let d = try #require(central.dump(device: "SN-0102"))
        #expect(d.blob == SimulatorDump.Blob(expected: 1500, received: 1500, ended: true, sha256: SHA256.hexDigest(Fixtures.blob)))
    }

    @Test func endBlobWithNoBlobOpenAnswersInvalidAndChangesNothing() async throws {
        let central = try Fixtures.central([try Fixtures.spec("SN-0103")])
        var client = try await Fixtures.connect(central, "SN-0103")
        try await client.discover()
        _ = try await client.subscribe(0xFFF3)
        #expect(try await client.control([0x01, 0x01]) == [0x01, 0x00])
        #expect(try await client.control(Self.beginBlob(Fixtures.blob.count)) == [0x03, 0x00])
        try await Self.stream(&client, Fixtures.blob)
        #expect(try await client.control([0x04]) == [0x04, 0x00])
        // The host lost that ack and sends `04` again: the blob is already closed.
        #expect(try await client.control([0x04]) == [0x04, 0x01])
        // Nothing was undone: the blob stays ended and the commit goes through.
        #expect(try await client.control([0x02]) == [0x02, 0x00])
        await client.link.disconnect()
        let d = try #require(central.dump(device: "SN-0103"))
        #expect(d.blob?.ended == true && d.blob?.received == 1500)
        #expect(d.commands.map { "\($0.opcode ?? "-")\($0.status ?? "-")" } == ["0100", "0300", "0400", "0401", "0200"])
        #expect(d.commits == 1)
    }

    @Test func aRepeatedCommitAnswersOkAgainAndLeavesTheDeviceAsOneCommitDoes() async throws {
        let central = try Fixtures.central([try Fixtures.spec("SN-0104")])
        var client = try await Fixtures.connect(central, "SN-0104")
        try await client.discover()
        _ = try await client.subscribe(0xFFF3)
        #expect(try await client.control([0x01, 0x0A]) == [0x01, 0x00])
        #expect(try await client.control([0x02]) == [0x02, 0x00])
        #expect(try await client.control([0x02]) == [0x02, 0x00])
        #expect(try await client.read(0xFFF2) == [0x02])
        await client.link.disconnect()
        let d = try #require(central.dump(device: "SN-0104"))
        #expect(d.state == "02" && d.config == "0a")
    }

    @Test func withEveryAckLostTheCommandsStillRunAndTheStateShowsIt() async throws {
        let central = try Fixtures.central([try Fixtures.spec("SN-0105", "faults: { ack_loss: 1.0 }")])
        var client = try await Fixtures.connect(central, "SN-0105")
        try await client.discover()
        _ = try await client.subscribe(0xFFF3)
        let set = try await client.controlChecked([0x01, 0x42])
        #expect(set.ack == nil && set.state == 0x01)
        #expect(try await client.controlChecked(Self.beginBlob(Fixtures.blob.count)).ack == nil)
        try await Self.stream(&client, Fixtures.blob)
        #expect(try await client.controlChecked([0x04]).ack == nil)
        // A host that re-sent the `04` after the lost ack would be told `04 01` — if it could hear it.
        let commit = try await client.controlChecked([0x02])
        #expect(commit.ack == nil)
        #expect(commit.state == 0x02, "the commit ran although its ack was lost: reading the state tells")
        await client.link.disconnect()
        let d = try #require(central.dump(device: "SN-0105"))
        #expect(d.commits == 1)
        #expect(d.faults["ack_loss"] == 4)
        #expect(d.commands.map { "\($0.opcode ?? "-")\($0.status ?? "-")" } == ["0100", "0300", "0400", "0200"])
    }
}
