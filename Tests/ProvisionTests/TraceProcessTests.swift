import Engine
import EngineTestSupport
import Foundation
import Testing
import TestSupport
import Trace

/// `provision run --trace PATH`: what a protocol trace holds, read back as a user would.
@Suite struct TraceProcessTests {
    /// One JSON line of the simulator's ATT trace.
    struct Line: Decodable {
        var direction: String
        var handle: Int?
        var link: String
        var name: String
        var opcode: Int?
        var time: String
        var value: String
    }

    @Test func aSimulatorRunWritesEveryATTPDUBothWaysPerDevice() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 3)
        let r = try await ChildProcess.shell(
            "$PROVISION run \(paths.workflow) --inventory \(paths.inventory) --adapter sim --sim-latency 0 --quiet --report r.json --trace att.jsonl",
            directory: line.directory)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("note: att.jsonl (--trace) holds the raw traffic both ways, any secret sent to a device included"))
        let path = line.directory + "/att.jsonl"
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let records = try text.split(separator: "\n").map { try JSONDecoder().decode(Line.self, from: Data($0.utf8)) }
        let report = try RunReport.read(from: line.directory + "/r.json")
        for device in report.devices {
            let mine = records.filter { $0.link == device.id }
            // Each request the host sent has its answer, and the first exchange is the MTU.
            #expect(mine.first?.name == "Exchange MTU Request", "\(device.id)")
            #expect(mine.contains { $0.direction == "received" && $0.name == "Exchange MTU Response" })
            // The configuration write went out to one handle, and the device answered it.
            let index = Int(device.id.suffix(4)) ?? 0
            let config = "01" + String(format: "%02x%02x0a0b0c", index >> 8, index & 0xFF)
            let writes = mine.enumerated().filter { $0.element.name == "Write Request" && $0.element.value == config }
            #expect(writes.count == 1, "\(device.id): \(writes.map(\.element.value))")
            if let w = writes.first {
                #expect(w.element.direction == "sent" && w.element.opcode == 0x12 && w.element.handle != nil)
                #expect(mine[(w.offset + 1)...].contains { $0.direction == "received" && $0.name == "Write Response" })
                // The ack notification came back on another handle.
                #expect(mine[(w.offset + 1)...].contains { $0.direction == "received" && $0.name == "Handle Value Notification" && $0.value == "0100" })
            }
        }
        #expect(Set(records.map(\.link)) == Set(report.devices.map(\.id)))
    }

    @Test func textTracesAndSeveralAdaptersGetOneFileEach() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 2)
        // Two simulated adapters over one fleet: each writes its own file, named by its position.
        let r = try await ChildProcess.shell(
            "$PROVISION run \(paths.workflow) --inventory \(paths.inventory) --adapter sim --adapter sim --sim-latency 0 --quiet --report r.json --trace t.txt",
            directory: line.directory)
        let files = try FileManager.default.contentsOfDirectory(atPath: line.directory).filter { $0.hasPrefix("t.") }.sorted()
        #expect(files == ["t.1.txt", "t.2.txt"], "\(r.stderr)")
        let all = try files.map { try String(contentsOfFile: line.directory + "/" + $0, encoding: .utf8) }.joined()
        #expect(all.contains(" SN-0001 sent Exchange MTU Request (0x02) value f700"))
        #expect(all.contains(" SN-0002 received Write Response (0x13)"))
    }

    @Test func anExistingTraceIsReplacedOnlyWithForce() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 1)
        try Data("keep".utf8).write(to: URL(fileURLWithPath: line.directory + "/t.jsonl"))
        let args = "$PROVISION run \(paths.workflow) --inventory \(paths.inventory) --adapter sim --sim-latency 0 --quiet --trace t.jsonl"
        let refused = try await ChildProcess.shell(args + " --report a.json", directory: line.directory)
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("`--trace t.jsonl` already exists; it is not replaced unless you add `--force`"))
        #expect(try String(contentsOfFile: line.directory + "/t.jsonl", encoding: .utf8) == "keep")
        let forced = try await ChildProcess.shell(args + " --report b.json --force", directory: line.directory)
        #expect(forced.status == 0)
        #expect(try String(contentsOfFile: line.directory + "/t.jsonl", encoding: .utf8).contains("Exchange MTU Request"))
    }
}

/// `--trace` on an HCI adapter against Bumble: a btsnoop file that Wireshark reads, holding the writes.
@Suite(.serialized, .enabled(if: BumbleFleet.available, "needs Python with Bumble: run `make test`, or set PROVISION_PYTHON"))
struct BumbleTraceTests {
    static let tshark: String? = ["/usr/bin/tshark", "/usr/local/bin/tshark"].first { FileManager.default.isExecutableFile(atPath: $0) }

    @Test func aBumbleRunWritesABtsnoopLogWiresharkReads() async throws {
        try await BumbleFleet.with(["--devices", "3"]) { fleet in
            let line = try TestLine()
            defer { line.remove() }
            let inventory = try BumbleRunTests.inventory(for: fleet, in: line)
            let workflow = line.directory + "/workflow.yaml"
            try Data(TestLine.workflow(ackTimeout: "400ms", resend: "[100ms]").utf8).write(to: URL(fileURLWithPath: workflow))
            // One device at a time: Wireshark pairs an ATT response with the latest request *of the
            // adapter*, not of its link, so links whose requests interleave in the log can leave a
            // discovery response unread (see below). The log is then read the way Wireshark reads it.
            let child = try ChildProcess(["run", workflow, "--inventory", inventory, "--adapter", fleet.spec, "--quiet",
                                          "--concurrency", "1", "--report", "r.json", "--trace", "hci.btsnoop"],
                                         directory: line.directory)
            #expect(await child.wait() == 0)
            #expect(await child.stderr().contains("note: hci.btsnoop (--trace) holds the raw traffic both ways"))
            let path = line.directory + "/hci.btsnoop"
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? Int) == 0o600)

            // Our own reader: the bring-up's HCI Reset went out first and its Command Complete came back.
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            let records = try BTSnoop.records(in: bytes)
            #expect(records.first?.packet == [0x01, 0x03, 0x0C, 0x00] && records.first?.direction == .sent)
            #expect(records.contains { $0.direction == .received && $0.packet.prefix(6) == [0x04, 0x0E, 0x04, 0x01, 0x03, 0x0C] })
            #expect(records.contains { $0.direction == .received && $0.packet.first == 0x02 }, "ACL data both ways")
            #expect(records.contains { $0.direction == .sent && $0.packet.first == 0x02 })

            guard let tshark = Self.tshark else {
                print("skipped the Wireshark half: tshark is not installed (apt-get install tshark)")
                return
            }
            // Wireshark: every device's configuration (`01` + its config) went out as an ATT Write Request
            // from the host to FFF1. Wireshark learns which characteristic a handle is from a discovery
            // response it can pair with its request, and keeps what it learns per adapter, not per link
            // (epan/dissectors/packet-btatt.c: requests and handles are keyed by interface and adapter,
            // and a response is read against the latest request, or the one before). So the first link's
            // discovery of FFF0 names FFF1's handle for every later link too, including those that took
            // the layout from the GATT cache and discovered nothing. With links running at once, another
            // link's requests between a discovery request and its response leave the response unread,
            // and nothing is named: that, not the order devices connected in, made this fail by chance.
            let r = try await ChildProcess.shell(
                "timeout 120 \(tshark) -r hci.btsnoop -Y 'btatt.opcode == 0x12' -T fields -E separator='|' -e btatt.uuid16 -e btatt.value -e hci_h4.direction",
                directory: line.directory)
            #expect(r.status == 0, "\(r.stderr)")
            let writes = r.stdout.split(separator: "\n").map { $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init) }
            let configs: Set<String> = ["01c0ffee01", "01c0ffee02", "01c0ffee03"]
            let configWrites = writes.filter { $0.count == 3 && configs.contains($0[1]) }
            #expect(Set(configWrites.map { $0[1] }) == configs, "\(writes)")
            #expect(configWrites.allSatisfy { $0[2] == "0x00" }, "written by the host")
            #expect(configWrites.allSatisfy { $0[0] == "0xfff1" }, "Wireshark names FFF1 from the discovery in the log: \(writes)")
        }
    }
}
