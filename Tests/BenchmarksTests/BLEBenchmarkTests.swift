import Benchmarks
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// Small by default; `BLE_BENCH=1` runs the sizes recorded in docs/benchmarks.md (use a release build:
/// `BLE_BENCH=1 swift test -c release --filter BLEBenchmarkTests`).
@Suite(.serialized) struct BLEBenchmarkTests {
    static var full: Bool { getenv("BLE_BENCH") != nil }

    @Test func attOperationsOnOneConnection() async throws {
        let reads = Self.full ? 100_000 : 500
        let r = try await BLEBenchmarks.attOpsPerSecond(connections: 1, readsPerConnection: reads)
        print("BENCH one connection: \(r)")
        #expect(r.roundTrips == reads)
    }

    @Test func attOperationsAcrossManyConnections() async throws {
        let connections = Self.full ? 1_000 : 20
        let reads = Self.full ? 100 : 10
        let r = try await BLEBenchmarks.attOpsPerSecond(connections: connections, readsPerConnection: reads)
        print("BENCH \(connections) connections: \(r)")
        #expect(r.roundTrips == connections * reads)
    }
}
