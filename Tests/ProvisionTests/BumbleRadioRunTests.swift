import Engine
import EngineTestSupport
import Foundation
import Testing
import TestSupport

/// `provision run workflows/sensor-v2.yaml` over `hci:tcp:` against Bumble fleets with radio timing
/// (advertising intervals, link latency) and station controllers that behave like real ones (Filter
/// Accept List, supported states, link limits): what issue #8 asks a line to survive. Every test checks
/// the report and what each device received; none measures time (docs/benchmarks.md does).
@Suite(.serialized, .timeLimit(.minutes(3)),
       .enabled(if: BumbleFleet.available, "needs Python with Bumble: run `make test`, or set PROVISION_PYTHON"))
struct BumbleRadioRunTests {
    static let workflow = ChildProcess.packageRoot + "/workflows/sensor-v2.yaml"

    /// Runs the shipped sensor-v2 workflow on `fleet` (inventory from `BumbleRunTests.inventory`, which
    /// gives every device its address unless `nameOnly` says otherwise); returns the exit status, the
    /// report and stderr (with the HCI host's log when `verbose`).
    static func run(_ fleet: BumbleFleet, in line: TestLine, concurrency: Int, slots: Int? = nil, nameOnly: Set<Int> = [],
                    verbose: Bool = false) async throws -> (status: Int32, report: RunReport, stderr: String) {
        let inventory = try BumbleRunTests.inventory(for: fleet, in: line, nameOnly: nameOnly)
        var arguments = ["run", workflow, "--inventory", inventory, "--adapter", fleet.spec, "--quiet",
                         "--concurrency", "\(concurrency)", "--report", "r.json"]
        if let slots { arguments += ["--slots", "\(slots)"] }
        if verbose { arguments.append("--verbose") }
        let child = try ChildProcess(arguments, directory: line.directory)
        let status = await child.wait()
        let stderr = await child.stderr()
        let report = try RunReport.read(from: line.directory + "/r.json")
        return (status, report, stderr)
    }

    /// Every device of the fleet succeeded, and the device itself holds its configuration, the whole
    /// blob, exactly one commit and the provisioned state.
    static func expectProvisioned(_ fleet: BumbleFleet, _ report: RunReport, in line: TestLine,
                                  sourceLocation: SourceLocation = #_sourceLocation) throws {
        let blobSHA = try TestLine.sha256(ofFile: line.directory + "/blob.bin")
        #expect(report.summary.outcomes[.succeeded] == fleet.devices.count, "\(report.summary.errors)", sourceLocation: sourceLocation)
        for (i, device) in fleet.devices.enumerated() {
            let record = try #require(report.devices.first { $0.id == device.id }, sourceLocation: sourceLocation)
            #expect(record.outcome == .succeeded, "\(device.id): \(record.error?.message ?? "")", sourceLocation: sourceLocation)
            let state = try fleet.state(device.id)
            #expect(state["config"] as? String == String(format: "c0ffee%02x", i + 1), "\(device.id)", sourceLocation: sourceLocation)
            #expect(state["blob_sha256"] as? String == blobSHA, "\(device.id)", sourceLocation: sourceLocation)
            #expect(state["blob_ended"] as? Bool == true, "\(device.id)", sourceLocation: sourceLocation)
            #expect(state["commits"] as? Int == 1, "\(device.id)", sourceLocation: sourceLocation)
            #expect(state["state"] as? Int == 2, "\(device.id)", sourceLocation: sourceLocation)
        }
    }

    @Test func aFleetAdvertisingOnceASecondIsProvisionedWholeSixteenAtATime() async throws {
        // Issue #8: with 1 s advertising and a paced link, devices that advertise throughout ended
        // `not_found` when scanning paused around every connection; they are now connected through the
        // Filter Accept List while the others' links run.
        let options = BumbleFleet.Options(devices: 20, advertisingInterval: .seconds(1),
                                          linkLatency: .microseconds(7500)...(.milliseconds(25)), seed: 3)
        try await BumbleFleet.with(options) { fleet in
            let line = try TestLine()
            defer { line.remove() }
            let (status, report, stderr) = try await Self.run(fleet, in: line, concurrency: 16, slots: 16)
            #expect(status == 0, "\(stderr)")
            try Self.expectProvisioned(fleet, report, in: line)
            #expect(report.summary.errors["not_found"] == nil)
            #expect(report.devices.allSatisfy { $0.rssi != nil && $0.adapter == fleet.spec })
            // Sixteen links were held at once at some point: the line did run sixteen wide.
            #expect(report.run.adapters.first?.peakLinks == 16)
        }
    }

    @Test func aFleetDeclaringSIGUUIDsInTheir128BitFormIsProvisioned() async throws {
        // 180A, 2A25, FFF0, FFF1 ... declared as 0000xxxx-0000-1000-8000-00805F9B34FB: discovery by the
        // 16-bit value finds nothing, by the 128-bit value finds them.
        let options = BumbleFleet.Options(devices: 6, quirks: [.uuid128], advertisingInterval: .milliseconds(100),
                                          linkLatency: .microseconds(7500)...(.microseconds(7500)))
        try await BumbleFleet.with(options) { fleet in
            #expect(fleet.devices.allSatisfy { $0.quirks == ["uuid128"] })
            let line = try TestLine()
            defer { line.remove() }
            let (status, report, stderr) = try await Self.run(fleet, in: line, concurrency: 4)
            #expect(status == 0, "\(stderr)")
            try Self.expectProvisioned(fleet, report, in: line)
            #expect(report.summary.errors["attribute_not_found"] == nil)
            #expect(report.devices.allSatisfy { $0.captured["serial"] == .string($0.id) && $0.captured["state"] == .string("02") })
        }
    }

    @Test func withThirtyPercentOfAcksLostEveryDeviceEndsProvisionedWithOneCommit() async throws {
        // Issue #9 item 12: a lost `04 00` is recovered by streaming the blob again from `begin blob`
        // (a re-sent `04` would answer `04 01`), a lost `02 00` by reading the state (FFF2) instead of
        // committing again. Seed 5 loses acks of every kind across these eight devices.
        let options = BumbleFleet.Options(devices: 8, ackLossRate: 0.3, advertisingInterval: .milliseconds(100),
                                          linkLatency: .microseconds(7500)...(.microseconds(7500)), seed: 5)
        try await BumbleFleet.with(options) { fleet in
            let line = try TestLine()
            defer { line.remove() }
            let (status, report, stderr) = try await Self.run(fleet, in: line, concurrency: 8)
            #expect(status == 0, "\(stderr)")
            try Self.expectProvisioned(fleet, report, in: line)
            var lost: [String] = []
            var restreamed = 0
            for device in fleet.devices {
                let state = try fleet.state(device.id)
                lost += state["acks_lost"] as? [String] ?? []
                let writes = state["fff1_writes"] as? [String] ?? []
                if writes.filter({ $0.hasPrefix("03") }).count > 1 { restreamed += 1 }
                // The commit went out once: a lost `02 00` is settled by reading FFF2, which says it took effect.
                #expect(writes.filter { $0 == "02" }.count == 1, "\(device.id): \(writes)")
            }
            // The fixture lost acks of every command, so each recovery path ran.
            #expect(Set(lost.map { String($0.prefix(2)) }).isSuperset(of: ["01", "03", "04", "02"]), "\(lost)")
            #expect(restreamed > 0, "a lost 04 ack streams the blob again from begin blob")
        }
    }

    @Test func onAControllerThatCannotScanWhileConnectingNamedDevicesAreStillFound() async throws {
        // Half the inventory gives names only (found by scanning), half addresses (connected through the
        // accept list): the controller refuses to scan while it initiates, so the host pauses the scan
        // around each connection, gives scanning its slices, and says so once in --verbose output.
        let options = BumbleFleet.Options(devices: 8, advertisingInterval: .milliseconds(500),
                                          linkLatency: .microseconds(7500)...(.milliseconds(25)), scanWhileInitiating: false)
        try await BumbleFleet.with(options) { fleet in
            #expect(fleet.stations?.scan_while_initiating == false)
            let line = try TestLine()
            defer { line.remove() }
            let (status, report, stderr) = try await Self.run(fleet, in: line, concurrency: 8, slots: 8, nameOnly: [1, 3, 5, 7],
                                                              verbose: true)
            #expect(status == 0, "\(stderr)")
            try Self.expectProvisioned(fleet, report, in: line)
            #expect(stderr.contains("pauses scanning to connect"))
            #expect(stderr.components(separatedBy: "cannot scan while it creates a connection").count == 2, "said once")
            #expect(!stderr.contains("command disallowed"), "the host never asked for both at once")
        }
    }

    @Test(arguments: [BumbleFleet.Options.LinkRefusal.create, .complete])
    func aControllerHoldingFewerLinksThanTheSlotsLowersThemAndEveryDeviceIsProvisioned(
        refusal: BumbleFleet.Options.LinkRefusal) async throws {
        // `--slots 4` on a controller that holds 2 links: the first Connection Limit Exceeded lowers the
        // adapter to the links it holds, for the rest of the run, and the devices it refused are retried.
        let options = BumbleFleet.Options(devices: 6, advertisingInterval: .milliseconds(100), maxLinks: 2, refuseLinksAt: refusal)
        try await BumbleFleet.with(options) { fleet in
            let line = try TestLine()
            defer { line.remove() }
            let (status, report, stderr) = try await Self.run(fleet, in: line, concurrency: 4, slots: 4, verbose: true)
            #expect(status == 0, "\(stderr)")
            try Self.expectProvisioned(fleet, report, in: line)
            #expect(stderr.contains("using 2 connection slot(s) from now on"))
            #expect(stderr.components(separatedBy: "Connection Limit Exceeded").count == 2, "lowered once, for good")
            #expect(report.run.adapters.first?.failure == nil)
        }
    }
}
