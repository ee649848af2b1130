import Engine
import Foundation
import Testing
import EngineTestSupport
import TestSupport

/// `provision run` on controllers that behave like the ones a line plugs in (Tests/Fixtures/fleet_radio.py):
/// a Zephyr controller whose BD_ADDR is zero, links tuned from the workflow on a radio paced by
/// connection events, and controllers that reset or restart in the middle of a run. Checked on the
/// device side and in the report.
@Suite(.serialized, .timeLimit(.minutes(5)),
       .enabled(if: BumbleFleet.available, "needs Python with Bumble: run `make test`, or set PROVISION_PYTHON"))
struct BumbleControllerRunTests {
    /// The test workflow, each link encrypted (Just Works) and bonded, with `connect` options added.
    static func workflow(in line: TestLine, connect: String, name: String) throws -> String {
        let text = TestLine.workflow(ackTimeout: "400ms", resend: "[100ms]")
            .replacingOccurrences(of: "  - connect: { mtu: 247, timeout: 1s }", with: "  - connect: { mtu: 247, timeout: 10s\(connect) }")
        let path = line.directory + "/" + name
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    private func run(_ arguments: [String], in line: TestLine, exit: Int32 = 0) async throws -> (RunReport, String) {
        let child = try ChildProcess(["run"] + arguments + ["--quiet"], directory: line.directory)
        let stderr = await child.stderr()
        #expect(await child.wait() == exit, "\(stderr)")
        guard let report = arguments.firstIndex(of: "--report").map({ arguments[$0 + 1] }) else { throw CocoaError(.fileNoSuchFile) }
        return (try RunReport.read(from: line.directory + "/" + report), stderr)
    }

    private func pairings(_ state: [String: Any]) -> Int { (state["pairings"] as? [Any])?.count ?? -1 }

    /// The fleet's devices provisioned twice with one `--bonds` file, every link encrypted: the two
    /// reports, and what each run said on stderr.
    private func twoBondedRuns(_ fleet: BumbleFleet, in line: TestLine) async throws -> (RunReport, String, RunReport, String) {
        let inventory = try BumbleRunTests.inventory(for: fleet, in: line)
        let workflow = try Self.workflow(in: line, connect: ", security: encrypted", name: "secure.yaml")
        let common = [workflow, "--inventory", inventory, "--adapter", fleet.spec, "--bonds", "bonds.json"]
        let (first, one) = try await run(common + ["--report", "one.json"], in: line)
        let (second, two) = try await run(common + ["--report", "two.json"], in: line)
        return (first, one, second, two)
    }

    /// A Zephyr controller (manufacturer 0x05F1, BD_ADDR 00:00:00:00:00:00) that has a static address
    /// (Read Static Addresses): the station is that address on every run, so two runs with one `--bonds`
    /// pair each device once, and the second encrypts with the stored keys.
    @Test func aZephyrControllerIsTheSameStationOnEveryRunAndBondsLast() async throws {
        try await BumbleFleet.with(BumbleFleet.Options(devices: 3, security: .encrypted, extraArguments: ["--controller", "zephyr"])) { fleet in
            let line = try TestLine()
            defer { line.remove() }
            let (first, warnings, second, _) = try await twoBondedRuns(fleet, in: line)
            // The station is the controller's static address; no warning about a missing address.
            #expect(first.run.adapters.map(\.identity) == ["C4:5A:00:00:00:01"])
            #expect(!warnings.contains("has no address of its own"), "\(warnings)")
            #expect(second.run.adapters.map(\.identity) == ["C4:5A:00:00:00:01"])
            for device in fleet.devices {
                let state = try fleet.state(device.id)
                #expect(pairings(state) == 1, "\(device.id) paired once: \(state["pairings"] ?? "")")
                #expect(state["encryptions"] as? Int == 2, "\(device.id): both runs encrypted")
                #expect((state["pairings"] as? [[String: Any]])?.first?["peer"] as? String == "C4:5A:00:00:00:01")
                #expect(first.devices.first { $0.id == device.id }?.security?.bond == .made)
                #expect(second.devices.first { $0.id == device.id }?.security?.bond == .used)
                #expect(state["commits"] as? Int == 2)
            }
        }
    }

    /// A Zephyr controller without Read Static Addresses (what issue #19's line met): BD_ADDR zero and no
    /// address of its own. The first run generates a static address for the adapter, keeps it in the
    /// bonds file and says so naming the adapter; the second run is the same station.
    @Test func aControllerWithoutAnAddressGetsOneKeptWithTheBonds() async throws {
        try await BumbleFleet.with(BumbleFleet.Options(devices: 2, security: .encrypted,
                                                       extraArguments: ["--controller", "zephyr", "--no-static-address"])) { fleet in
            let line = try TestLine()
            defer { line.remove() }
            let (first, warnings, second, again) = try await twoBondedRuns(fleet, in: line)
            let identity = try #require(first.run.adapters.first?.identity)
            #expect(warnings.contains("adapter \(fleet.spec) has no address of its own") && warnings.contains(identity), "\(warnings)")
            let bonds = try String(contentsOfFile: line.directory + "/bonds.json", encoding: .utf8)
            #expect(bonds.contains("\"adapter\" : \"hci:tcp:127.0.0.1:\(fleet.port)\"") && bonds.contains(identity), "\(bonds)")
            #expect(second.run.adapters.first?.identity == identity)
            #expect(!again.contains("has no address of its own"))
            for device in fleet.devices {
                let state = try fleet.state(device.id)
                #expect(pairings(state) == 1, "\(device.id) paired once")
                #expect(state["encryptions"] as? Int == 2)
            }
        }
    }

    /// A radio paced by connection events: the workflow's `interval`, `phy` and `data_length` reach the
    /// controller, the devices run at them, the report records them per device, and the trace shows them
    /// to Wireshark.
    @Test func theWorkflowsLinkSettingsAreWhatEachLinkGetsAndTheReportAndTraceSaySo() async throws {
        try await BumbleFleet.with(BumbleFleet.Options(devices: 3, extraArguments: ["--pace-by-interval"])) { fleet in
            let line = try TestLine()
            defer { line.remove() }
            let inventory = try BumbleRunTests.inventory(for: fleet, in: line)
            let workflow = try Self.workflow(in: line, connect: ", interval: 7.5ms..15ms, phy: 2M, data_length: 251", name: "fast.yaml")
            let (report, _) = try await run([workflow, "--inventory", inventory, "--adapter", fleet.spec, "--report", "r.json",
                                             "--trace", "hci.btsnoop"], in: line)
            for device in fleet.devices {
                let record = try #require(report.devices.first { $0.id == device.id })
                #expect(record.outcome == .succeeded, "\(device.id): \(record.error?.message ?? "")")
                #expect(record.link == LinkRecord(phy: "2M", dataLength: 251, intervalMs: 7.5, latency: 0, supervisionTimeoutMs: 5000, mtu: 247))
                // The device's own controller agrees.
                let link = try fleet.state(device.id)["link"] as? [String: Any] ?? [:]
                #expect(link["interval_ms"] as? Double == 7.5 && link["tx_phy"] as? Int == 2 && link["rx_octets"] as? Int == 251, "\(link)")
            }
            guard let tshark = BumbleTraceTests.tshark else {
                print("skipped the Wireshark half: tshark is not installed (apt-get install tshark)")
                return
            }
            let r = try await ChildProcess.shell(
                "timeout 120 \(tshark) -r hci.btsnoop -Y 'bthci_cmd.opcode == 0x200d || bthci_evt.le_meta_subevent == 0x0a || bthci_evt.le_meta_subevent == 0x07 || bthci_evt.le_meta_subevent == 0x0c' "
                    + "-T fields -E separator='|' -e bthci_cmd.opcode -e bthci_cmd.le_con_interval_min -e bthci_evt.le_meta_subevent "
                    + "-e bthci_evt.le_con_interval -e bthci_evt.max_tx_octets -e bthci_evt.le_tx_phy",
                directory: line.directory)
            #expect(r.status == 0, "\(r.stderr)")
            let rows = r.stdout.split(separator: "\n").map { $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init) }
            // LE Create Connection asks for 7.5 ms (6 × 1.25 ms); the links come up at it; LE Data Length
            // Change says 251; LE PHY Update Complete says LE 2M — for each device.
            #expect(rows.filter { $0.first == "0x200d" }.allSatisfy { $0[1] == "6" } && rows.contains { $0.first == "0x200d" }, "\(rows)")
            #expect(rows.filter { $0[2] == "0x0a" && $0[3] == "6" }.count == 3, "\(rows)")
            #expect(rows.filter { $0[2] == "0x07" && $0[4] == "251" }.count >= 3, "\(rows)")
            #expect(rows.filter { $0[2] == "0x0c" && $0[5] == "0x02" }.count >= 3, "\(rows)")
        }
    }

    /// Peripherals that ask for other connection parameters once connected: a request within the
    /// workflow's interval range is accepted (the link runs at the overlap), one outside it is refused —
    /// over L2CAP and over the link layer — and provisioning goes on either way.
    @Test func peripheralsRequestsAreAnsweredWithinTheLinksLimits() async throws {
        for (request, accepted, interval) in [("10ms-20ms@l2cap", true, 10.0), ("10ms-20ms@ll", true, 10.0),
                                               ("100ms-200ms@l2cap", false, 7.5), ("100ms-200ms@ll", false, 7.5)] {
            try await BumbleFleet.with(BumbleFleet.Options(devices: 2, extraArguments: ["--pace-by-interval", "--param-request", request])) { fleet in
                let line = try TestLine()
                defer { line.remove() }
                let inventory = try BumbleRunTests.inventory(for: fleet, in: line)
                let workflow = try Self.workflow(in: line, connect: ", interval: 7.5ms..15ms", name: "w.yaml")
                let (report, _) = try await run([workflow, "--inventory", inventory, "--adapter", fleet.spec, "--report", "r.json"], in: line)
                for device in fleet.devices {
                    let record = try #require(report.devices.first { $0.id == device.id })
                    #expect(record.outcome == .succeeded, "\(request) \(device.id): \(record.error?.message ?? "")")
                    let asked = try fleet.state(device.id)["param_requests"] as? [[String: Any]] ?? []
                    let result = asked.first?["result"] as? String ?? "none"
                    #expect(accepted ? result == "accepted" : result.hasPrefix("refused"), "\(request): \(asked)")
                    #expect(asked.first?["interval_after_ms"] as? Double == interval, "\(request): \(asked)")
                }
            }
        }
    }

    /// The station's controller fails in the middle of the run — a Hardware Error, or a restart that
    /// closes the host's connection — after its third connection: its links drop, the adapter brings it
    /// up again as the same station, the devices it was working are retried, and every device of the line
    /// is provisioned exactly once (the commit is confirmed, never sent twice into doubt).
    @Test func aControllerThatResetsOrRestartsMidRunLosesNoDevice() async throws {
        for fault in ["hardware-error@3", "restart@3"] {
            try await BumbleFleet.with(BumbleFleet.Options(devices: 8, linkLatency: .milliseconds(5) ... .milliseconds(5),
                                                           extraArguments: ["--station-fault", fault])) { fleet in
                let line = try TestLine()
                defer { line.remove() }
                let inventory = try BumbleRunTests.inventory(for: fleet, in: line)
                let workflow = try Self.workflow(in: line, connect: "", name: "w.yaml")
                let (report, stderr) = try await run([workflow, "--inventory", inventory, "--adapter", fleet.spec, "--concurrency", "4",
                                                      "--report", "r.json"], in: line)
                #expect(stderr.contains("brought up again"), "\(fault): \(stderr)")
                #expect(report.run.adapters.first?.failure == nil)
                #expect(report.summary.outcomes[.succeeded] == 8, "\(fault): \(report.summary)")
                // The third device was connected when its station failed 50 ms later: it was connected again.
                let cut = try fleet.devices.filter { (try fleet.state($0.id)["connections"] as? Int ?? 0) >= 2 }
                #expect(!cut.isEmpty, "\(fault): the controller's failure cut a device's link")
                for device in fleet.devices {
                    let state = try fleet.state(device.id)
                    #expect(state["commits"] as? Int == 1, "\(fault) \(device.id): \(state["commits"] ?? "")")
                    #expect(state["state"] as? Int == 2)
                }
            }
        }
    }
}
