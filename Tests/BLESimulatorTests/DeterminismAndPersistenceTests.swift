import BLE
import Digests
import Foundation
import Testing
@testable import BLESimulator

/// A client that provisions every device sequentially, retrying on busy acks, lost acks and drops,
/// reconnecting up to a limit: its PDUs depend only on what the devices answer.
func provisionFleet(_ central: SimulatedCentral, ids: [String], attempts: Int = 6) async throws {
    for id in ids {
        guard let address = central.address(of: id) else { continue }
        var done = false
        for _ in 0..<attempts where !done {
            guard let link = try? await central.connect(to: address, options: ConnectOptions(timeout: .seconds(5))) else { continue }
            var client = RawATTClient(link)
            client.assumeSensorV2Layout()
            do {
                _ = try await client.subscribe(0xFFF3)
                let steps: [[UInt8]] = [[0x01, 0x0A, 0x0B], [0x03, 0x06, 0x00, 0x00, 0x00], [], [0x04], [0x02]]
                for step in steps {
                    if step.isEmpty {
                        try await client.command(.writeCommand(.init(handle: try client.handle(0xFFF4), value: [1, 2, 3, 4, 5, 6])))
                        continue
                    }
                    for _ in 0..<4 {
                        let r = try await client.controlChecked(step)
                        if r.ack == [step[0], 0x00] { break }
                        if r.ack == nil, step[0] == 0x01, r.state == 0x01 { break }  // ack lost, command applied
                        if r.ack == nil, step[0] == 0x02, r.state == 0x02 { break }
                        if r.ack == nil, step[0] == 0x03 || step[0] == 0x04 { break }  // cannot tell; go on
                    }
                }
                done = try await client.read(0xFFF2) == [0x02]
                await link.disconnect()
            } catch {
                _ = await link.waitForDisconnect()
            }
        }
    }
}

@Suite(.timeLimit(.minutes(1)))
struct DeterminismAndPersistenceTests {
    static let faulty = "faults: { drop: 0.04, ack_loss: 0.2, busy_ack: 0.2, connect_fail: 0.3 }"

    func run(seed: UInt64) async throws -> String {
        let ids = (0..<20).map { String(format: "DT-%02d", $0) }
        let central = try Fixtures.central(try ids.map { try Fixtures.spec($0, Self.faulty) }, seed: seed)
        try await provisionFleet(central, ids: ids)
        return await central.dump().json()
    }

    @Test func twoRunsWithTheSameSeedProduceIdenticalDumps() async throws {
        let a = try await run(seed: 42)
        let b = try await run(seed: 42)
        #expect(a == b)
        let c = try await run(seed: 43)
        #expect(a != c)
        // Faults did strike, so the equality above means something.
        #expect(a.contains("\"busy_ack\""))
        #expect(a.contains("\"connect_fail\""))
    }

    static func tempPath(_ name: String) -> String {
        let dir = FileManager.default.temporaryDirectory.path
        return "\(dir)/sim-\(name)-\(UInt64.random(in: 0...UInt64.max)).jsonl"
    }

    @Test func theStateFileRestoresDevicesAsACrashedRunLeftThem() async throws {
        let path = Self.tempPath("replay")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let specs = [try Fixtures.spec("P-1"), try Fixtures.spec("P-2"), try Fixtures.spec("P-3")]
        let first = try Fixtures.central(specs, statePath: path)
        try await provisionFleet(first, ids: ["P-1"])
        // P-2 gets its config and half a blob, then the tool "crashes".
        var c2 = try await Fixtures.connect(first, "P-2")
        c2.assumeSensorV2Layout()
        _ = try await c2.subscribe(0xFFF3)
        #expect(try await c2.controlChecked([0x01, 0x77]).ack == [0x01, 0x00])
        #expect(try await c2.controlChecked([0x03, 0x04, 0x00, 0x00, 0x00]).ack == [0x03, 0x00])
        try await c2.command(.writeCommand(.init(handle: 23, value: [1, 2])))
        _ = try await c2.read(0xFFF2)  // the blob write has been handled once this answers
        let before = await first.dump()
        await first.close()

        let second = try Fixtures.central(specs, statePath: path)
        #expect(await second.dump() == before)
        #expect(second.dump(device: "P-1")?.state == "02")
        // The resumed run finishes P-2 where it stopped.
        var resumed = try await Fixtures.connect(second, "P-2")
        resumed.assumeSensorV2Layout()
        #expect(try await resumed.read(0xFFF2) == [0x01])
        _ = try await resumed.subscribe(0xFFF3)
        try await resumed.command(.writeCommand(.init(handle: 23, value: [3, 4])))
        #expect(try await resumed.controlChecked([0x04]).ack == [0x04, 0x00])
        #expect(try await resumed.controlChecked([0x02]).ack == [0x02, 0x00])
        await resumed.link.disconnect()
        let p2 = try #require(second.dump(device: "P-2"))
        #expect(p2.blob?.sha256 == SHA256.hexDigest([1, 2, 3, 4]))
        #expect(p2.connections == 2)
        #expect(p2.commits == 1)
    }

    @Test func aTruncatedLastLineIsToleratedAndCut() async throws {
        let path = Self.tempPath("truncated")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let specs = [try Fixtures.spec("T-1")]
        let first = try Fixtures.central(specs, statePath: path)
        try await provisionFleet(first, ids: ["T-1"])
        let before = await first.dump()
        await first.close()
        // The process died in the middle of a line.
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("{\"id\":\"T-1\",\"event\":\"cont".utf8))
        try handle.close()

        let second = try Fixtures.central(specs, statePath: path)
        #expect(await second.dump() == before)
        // New lines start clean: a third open replays the second run's changes too.
        var client = try await Fixtures.connect(second, "T-1")
        client.assumeSensorV2Layout()
        _ = try await client.controlChecked([0x01, 0x99])
        await client.link.disconnect()
        _ = await client.link.waitForDisconnect()
        let after = await second.dump()
        await second.close()
        let third = try Fixtures.central(specs, statePath: path)
        #expect(await third.dump() == after)
        #expect(after.device("T-1")?.config == "99")
    }

    @Test func aCorruptLineInTheMiddleIsAnErrorWithItsLine() throws {
        let path = Self.tempPath("corrupt")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data("{\"id\":\"C-1\",\"event\":\"connected\"}\nnot json\n{\"id\":\"C-1\",\"event\":\"connected\"}\n".utf8)
            .write(to: URL(fileURLWithPath: path))
        #expect(throws: SimulatorError.self) { _ = try Fixtures.central([try Fixtures.spec("C-1")], statePath: path) }
        do {
            _ = try Fixtures.central([try Fixtures.spec("C-1")], statePath: path)
        } catch {
            #expect(String(describing: error).hasPrefix("\(path):2:1: unreadable simulator state line"))
        }
    }
}

@Suite struct SimulatorDumpTests {
    @Test func theDumpJSONHasEveryKeyAndRoundTrips() async throws {
        let central = try Fixtures.central([try Fixtures.spec("J-1")])
        let dump = await central.dump()
        let json = dump.json()
        #expect(json.contains("\"blob\" : null"))
        #expect(json.contains("\"config\" : null"))
        #expect(json.contains("\"connect_attempts\" : 0"))
        let decoded = try JSONDecoder().decode(SimulatorDump.self, from: Data(json.utf8))
        #expect(decoded == dump)
    }
}

@Suite struct StateJournalLineTests {
    @Test func everyLineTheJournalWritesReadsBackByBothPaths() throws {
        let events: [DeviceEvent] = [.connectAttempt, .connected, .control([0x01, 0xAB], busy: false), .control([0x02], busy: true),
                                     .blob([1, 2, 3]), .fault("ack_loss")]
        for e in events {
            let line = StateJournal.line(id: "SN-\"q\"", e)
            #expect(line.hasSuffix("\n"))
            let bytes = Array(line.utf8.dropLast())
            let decoded = try #require(StateJournal.decode(bytes))
            #expect(decoded.0 == "SN-\"q\"")
            #expect(decoded.1 == e)
        }
        // Plain JSON in another key order still reads (the decoder path).
        let other = Array(#"{"event":"control","busy":true,"hex":"0102","id":"X"}"#.utf8)
        #expect(StateJournal.decode(other)?.1 == .control([1, 2], busy: true))
        #expect(StateJournal.decode(Array(#"{"id":"X","event":"teleport"}"#.utf8)) == nil)
    }
}
