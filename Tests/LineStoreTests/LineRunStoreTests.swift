import BLESimulator
import Engine
import Foundation
import LineDatabase
import LineStore
import PostgresClient
import Synchronization
import TestSupport
import Testing

/// Stations in one process, each a full engine run over its own simulated radio, on one line database:
/// every device worked by exactly one station, the device side showing no device committed twice.
@Suite(.serialized, .enabled(if: PostgresCluster.shouldRun, "needs PostgreSQL: run `make test`, or apt-get install postgresql"))
struct LineRunStoreTests {
    @Test func twoStationsHearingOverlappingHalvesWorkEveryDeviceOnce() async throws {
        let bench = try await LineBench.make(devices: 24)
        defer { bench.close() }
        let ids = bench.loaded.devices.map(\.id)
        // Station a hears devices 1-16, b hears 9-24: 9-16 are heard by both.
        let a = try bench.store("a"), b = try bench.store("b")
        let radioA = try bench.radio(hears: Array(ids[0..<16]), seed: 1)
        let radioB = try bench.radio(hears: Array(ids[8..<24]), seed: 2)
        async let reportA = bench.run(a, radio: radioA, name: "a")
        async let reportB = bench.run(b, radio: radioB, name: "b")
        let (ra, rb) = try await (reportA, reportB)
        let workedA = Set(ra.devices.map(\.id)), workedB = Set(rb.devices.map(\.id))
        #expect(workedA.isDisjoint(with: workedB), "no device worked by both: \(workedA.intersection(workedB).sorted())")
        #expect(workedA.union(workedB) == Set(ids))
        #expect(workedA.allSatisfy { ids.firstIndex(of: $0)! < 16 }, "a worked only what it hears")
        #expect(workedB.allSatisfy { ids.firstIndex(of: $0)! >= 8 }, "b worked only what it hears")
        #expect(ra.devices.allSatisfy { $0.outcome == .succeeded } && rb.devices.allSatisfy { $0.outcome == .succeeded })
        #expect(ra.run.id == bench.runID && rb.run.id == bench.runID)
        // The line: one succeeded outcome per device, nothing left claimed.
        let line = try await bench.outcomes()
        #expect(line.count == 24)
        for (id, d) in line {
            #expect(d.state == "succeeded" && d.rows == ["succeeded"], "\(id): \(d)")
        }
        // The device side: each device committed exactly once.
        let side = try await bench.deviceSide()
        for id in ids { #expect(side.device(id)?.commits == 1, "\(id) committed \(side.device(id)?.commits ?? -1) times") }
        // The merged report: every device once, in inventory order, as the stations recorded them.
        let merged = try await LineReport.load(ConnectionString(bench.connectionString), run: bench.runID)
        #expect(merged.devices.map(\.id) == ids)
        #expect(merged.summary.outcomes["succeeded"] == 24)
        #expect(merged.run.station == "a, b")
        #expect(merged.devices.first { $0.id == ids[0] } == ra.devices.first { $0.id == ids[0] })
    }
}
