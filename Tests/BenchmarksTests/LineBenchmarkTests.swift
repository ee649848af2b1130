import Benchmarks
import Foundation
import LineDatabase
import PostgresClient
import TestSupport
import Testing

/// The line database's benchmark, run on demand (a benchmark, not a test: nothing here is asserted
/// about speed). `PROVISION_LINE_BENCH=1` runs it on a throwaway cluster with fsync on;
/// `PROVISION_LINE_BENCH_URL` runs it against that database instead. `PROVISION_LINE_BENCH_DEVICES`,
/// `…_STATIONS`, `…_IN_FLIGHT`, `…_CLAIM_BATCH`, `…_WRITERS` (group-commit connections per station) and
/// `…_WORK_MS` (simulated device work before the intent and again before the outcome) change the shape.
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["PROVISION_LINE_BENCH"] == "1"
                                 || ProcessInfo.processInfo.environment["PROVISION_LINE_BENCH_URL"] != nil,
                             "benchmark: set PROVISION_LINE_BENCH=1 (or PROVISION_LINE_BENCH_URL) to run"))
struct LineBenchmarkTests {
    static func setting(_ name: String, _ fallback: Int) -> Int {
        ProcessInfo.processInfo.environment["PROVISION_LINE_BENCH_\(name)"].flatMap(Int.init) ?? fallback
    }

    @Test func claimsAndOutcomesPerSecondWithEightStations() async throws {
        let devices = Self.setting("DEVICES", 4_000)
        let stations = Self.setting("STATIONS", 8)
        let inFlight = Self.setting("IN_FLIGHT", 16)
        let claimBatch = Self.setting("CLAIM_BATCH", 8)
        let work = Duration.milliseconds(Self.setting("WORK_MS", 0))
        let writers = Self.setting("WRITERS", 1)
        func bench(_ cs: ConnectionString) async throws {
            for round in 1...3 {
                let r = try await LineBenchmarks.run(cs, stations: stations, devices: devices, inFlight: inFlight, claimBatch: claimBatch,
                                                  deviceWork: work, writers: writers)
                print("round \(round): \(r)")
                #expect(r.devices == devices)
            }
        }
        if let url = ProcessInfo.processInfo.environment["PROVISION_LINE_BENCH_URL"] {
            try await bench(ConnectionString(url))
        } else {
            try await PostgresCluster.with(fsync: true) { cluster in
                try await bench(ConnectionString(cluster.connectionString()))
            }
        }
    }
}
