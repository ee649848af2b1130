import BLE
import BLESimulator
import EngineTestSupport
import Foundation
import Testing
import Workflow
@testable import Engine

/// ATT round trips per device for the shipped workflows on the shipped sensor-v2 model (a count, not a
/// time): the first device of a model discovers, later ones reuse its layout under the Database Hash,
/// and consecutive read steps go out as one request.
@Suite struct DeviceAgentRoundTripTests {
    /// Runs `workflows/NAME.yaml` over `count` devices of the test line; returns the report.
    private func run(_ name: String, count: Int, concurrency: Int, faults: [Int: String] = [:]) async throws -> (RunReport, SimulatorDump) {
        let line = try TestLine()
        defer { line.remove() }
        let workflow = try String(contentsOfFile: TestLine.packageRoot + "/workflows/\(name).yaml", encoding: .utf8)
        let loaded = try line.load(try line.write(count: count, workflow: workflow, faults: faults))
        let sim = try line.simulator(loaded)
        var options = line.options()
        options.concurrency = concurrency
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [sim], options: options)
        return (report, await sim.dump())
    }

    private func roundTrips(_ report: RunReport) -> [Int] {
        report.devices.sorted { $0.id < $1.id }.map { $0.attRoundTrips ?? -1 }
    }

    @Test func sensorV2TakesAtMost19RoundTripsOnTheFirstDeviceAnd12OnLaterOnes() async throws {
        let (report, dump) = try await run("sensor-v2", count: 6, concurrency: 1)
        #expect(report.summary.outcomes[.succeeded] == 6)
        let counts = roundTrips(report)
        #expect(counts[0] <= 19, "first device: \(counts[0])")
        #expect(counts.dropFirst().allSatisfy { $0 <= 12 }, "later devices: \(counts)")
        #expect(dump.devices.allSatisfy { $0.state == "02" && $0.commits == 1 })
    }

    @Test func devicesInFlightTogetherEachDiscoverAndTheOnesAfterThemDoNot() async throws {
        let (report, _) = try await run("sensor-v2", count: 8, concurrency: 3)
        #expect(report.summary.outcomes[.succeeded] == 8)
        let counts = roundTrips(report)
        #expect(counts.allSatisfy { $0 <= 19 }, "\(counts)")
        #expect(counts.dropFirst(3).allSatisfy { $0 <= 12 }, "\(counts)")
    }

    @Test func consecutiveReadsOfAnAuditGoOutTogetherAndEachStepKeepsItsValue() async throws {
        let (report, _) = try await run("fleet-audit", count: 4, concurrency: 1)
        #expect(report.summary.outcomes[.succeeded] == 4)
        // Later devices: MTU, Database Hash, robust caching, one Read Multiple Variable Length for five reads.
        #expect(roundTrips(report).dropFirst().allSatisfy { $0 == 4 }, "\(roundTrips(report))")
        for d in report.devices {
            #expect(d.captured["manufacturer"] == "Acme")
            #expect(d.captured["model"] == "sensor-v2")
            #expect(d.captured["serial"] == .string(d.id))
            #expect(d.captured["firmware"] == "2.4.1")
            #expect(d.captured["battery"] == 87)
            #expect(d.steps.filter { $0.kind == "read" }.count == 5)
            #expect(d.steps.filter { $0.kind == "read" }.allSatisfy { $0.outcome == .succeeded && $0.attempts == 1 })
        }
    }

    @Test func aFleetThatDeclaresSIGUUIDsIn128BitFormIsProvisioned() async throws {
        let quirk = "{ faults: { long_uuids: true } }"
        let (report, dump) = try await run("sensor-v2", count: 4, concurrency: 2, faults: [1: quirk, 2: quirk, 3: quirk, 4: quirk])
        #expect(report.summary.outcomes[.succeeded] == 4)
        #expect(dump.devices.allSatisfy { $0.state == "02" })
    }
}
