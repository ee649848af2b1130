import Engine
import EngineTestSupport
import Foundation
import Testing
import TestSupport

/// `provision run` over `hci:tcp:` against a fleet of Bumble peripherals (a real Bluetooth stack nobody
/// here wrote), checked on the device side.
@Suite(.serialized, .enabled(if: BumbleFleet.available, "needs Python with Bumble: run `make test`, or set PROVISION_PYTHON"))
struct BumbleRunTests {
    /// Writes an inventory for the fleet's devices (their ids, names and addresses) with config and blob;
    /// devices whose 1-based index is in `nameOnly` are listed without their address (found by name).
    static func inventory(for fleet: BumbleFleet, in line: TestLine, nameOnly: Set<Int> = []) throws -> String {
        var bytes = [UInt8](repeating: 0, count: 1500)
        var g: UInt64 = 0xB10B
        for i in bytes.indices {
            g = g &* 6364136223846793005 &+ 1442695040888963407
            bytes[i] = UInt8(truncatingIfNeeded: g >> 33)
        }
        try Data(bytes).write(to: URL(fileURLWithPath: line.directory + "/blob.bin"))
        var text = "devices:\n"
        for (i, d) in fleet.devices.enumerated() {
            let address = nameOnly.contains(i + 1) ? "" : "address: \"\(d.address)\", "
            text += "  - { id: \(d.id), name: \(d.name), \(address)vars: { config: \"c0ffee\(String(format: "%02x", i + 1))\", blob: blob.bin } }\n"
        }
        let path = line.directory + "/bumble-line.yaml"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func aBumbleLineIsProvisionedAndTheReportSaysExactlyWhatFailed() async throws {
        try await BumbleFleet.with(["--devices", "10", "--silent", "9", "--old-firmware", "10", "--ack-loss", "8"]) { fleet in
            let line = try TestLine()
            defer { line.remove() }
            let inventory = try Self.inventory(for: fleet, in: line)
            let workflow = line.directory + "/workflow.yaml"
            try Data(TestLine.workflow(ackTimeout: "400ms", resend: "[100ms]").utf8).write(to: URL(fileURLWithPath: workflow))
            let child = try ChildProcess(["run", workflow, "--inventory", inventory, "--adapter", fleet.spec, "--quiet",
                                          "--concurrency", "4", "--report", "r.json", "--junit", "r.xml"], directory: line.directory)
            #expect(await child.wait() == 1)
            let report = try RunReport.read(from: line.directory + "/r.json")
            #expect(!report.run.simulated)
            #expect(report.run.adapters.map(\.id) == [fleet.spec])
            let blobSHA = try TestLine.sha256(ofFile: line.directory + "/blob.bin")
            for (i, device) in fleet.devices.enumerated() {
                let record = try #require(report.devices.first { $0.id == device.id })
                let state = try fleet.state(device.id)
                switch i + 1 {
                case 9:
                    #expect(record.error?.kind == .notFound, "the silent device")
                    #expect(state["connections"] as? Int == 0)
                case 10:
                    #expect(record.error?.kind == .verifyFailed, "old firmware")
                    #expect(record.captured["fw"] == "1.9.0")
                    #expect(state["commits"] as? Int == 0)
                case 8:
                    #expect(record.error?.kind == .timeout, "lost acks")
                    #expect(record.error?.step == "set configuration")
                    // The command ran on the device although its ack never came.
                    #expect(state["config"] as? String == "c0ffee08")
                    #expect(state["commits"] as? Int == 0)
                default:
                    #expect(record.outcome == .succeeded, "\(device.id): \(record.error?.message ?? "")")
                    #expect(record.adapter == fleet.spec)
                    #expect(record.rssi != nil)
                    #expect(state["config"] as? String == String(format: "c0ffee%02x", i + 1))
                    #expect(state["blob_sha256"] as? String == blobSHA)
                    #expect(state["blob_ended"] as? Bool == true)
                    #expect(state["commits"] as? Int == 1)
                    #expect(state["state"] as? Int == 2)
                }
            }
            #expect(report.summary.outcomes[.succeeded] == 7)
            #expect(report.summary.errors == ["not_found": 1, "verify_failed": 1, "timeout": 1])
        }
    }

    @Test func provisionScanListsTheFleet() async throws {
        try await BumbleFleet.with(["--devices", "4", "--silent", "2"]) { fleet in
            let line = try TestLine()
            defer { line.remove() }
            let child = try ChildProcess(["scan", "--adapter", fleet.spec, "--timeout", "1500ms", "--json"], directory: line.directory)
            var out = ""
            for await l in child.lines { out += l + "\n" }
            #expect(await child.wait() == 0)
            let list = try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [[String: Any]])
            let names = Set(list.compactMap { $0["name"] as? String })
            #expect(names == Set(fleet.devices.enumerated().filter { $0.offset != 1 }.map(\.element.name)))
            #expect(list.allSatisfy { ($0["services"] as? [String])?.contains("FFF0") == true })
        }
    }
}

/// Two adapters on one line: one is cut mid-run; its devices fail over to the other and the run goes on.
@Suite(.serialized, .enabled(if: BumbleFleet.available, "needs Python with Bumble: run `make test`, or set PROVISION_PYTHON"))
struct BumbleFailoverTests {
    @Test func anAdapterCutMidRunFailsOverToTheOtherAndIsReported() async throws {
        try await BumbleFleet.with(["--devices", "12", "--stations", "2"]) { fleet in
            let line = try TestLine()
            defer { line.remove() }
            let inventory = try BumbleRunTests.inventory(for: fleet, in: line)
            let workflow = line.directory + "/workflow.yaml"
            try Data(TestLine.workflow(ackTimeout: "400ms", resend: "[100ms]", retryAttempts: 3).utf8).write(to: URL(fileURLWithPath: workflow))
            let proxy = try TCPProxy(targetPort: fleet.ports[0])
            let cut = "hci:tcp:127.0.0.1:\(proxy.port)"
            let other = "hci:tcp:127.0.0.1:\(fleet.ports[1])"
            let child = try ChildProcess(["run", workflow, "--inventory", inventory, "--adapter", cut, "--adapter", other, "--quiet",
                                          "--concurrency", "4", "--report", "r.json", "--events", "-"], directory: line.directory)
            var finished = 0
            for await l in child.lines where l.contains("\"device_finished\"") {
                finished += 1
                if finished == 3 { proxy.close() }
            }
            let status = await child.wait()
            #expect(status == 0 || status == 1)
            let report = try RunReport.read(from: line.directory + "/r.json")
            let cutAdapter = try #require(report.run.adapters.first { $0.id == cut })
            #expect(cutAdapter.failure != nil, "the cut adapter is reported as failed")
            #expect(report.run.adapters.first { $0.id == other }?.failure == nil)
            // The run went on: every device ended, and those that started after the cut went to the other adapter.
            #expect(report.devices.allSatisfy { $0.outcome == .succeeded || $0.outcome == .failed })
            #expect((report.summary.outcomes[.succeeded]) >= 8, "\(report.summary.outcomes) \(report.summary.errors)")
            #expect(report.devices.filter { $0.adapter == other && $0.outcome == .succeeded }.count >= 5)
            for (i, device) in fleet.devices.enumerated() where report.devices.first(where: { $0.id == device.id })?.outcome == .succeeded {
                let state = try fleet.state(device.id)
                #expect(state["commits"] as? Int == 1, "\(device.id)")
                #expect(state["config"] as? String == String(format: "c0ffee%02x", i + 1))
            }
        }
    }
}
