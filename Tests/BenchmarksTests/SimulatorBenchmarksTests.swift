import Benchmarks
import BLESimulator
import Testing

@Suite(.timeLimit(.minutes(1)))
struct SimulatorBenchmarksTests {
    @Test func theBenchmarkRunsAndReportsEveryMeasure() async throws {
        let r = try await SimulatorBenchmarks.measure(model: try BenchmarkFixtures.model(), fleetSize: 50, connections: 10, operations: 200)
        #expect(r.readsPerSecondOneLink > 0)
        #expect(r.writeCommandsPerSecondOneLink > 0)
        #expect(r.readsPerSecondAllLinks > 0)
        #expect(r.connections == 10)
        #expect(SimulatorBenchmarks.report(r).contains("10 links"))
    }

    @Test func thePacedBoundAddsRoundTripsAcknowledgementsAndConnectWaits() throws {
        let b = PacedLatencyBound(devices: 1_000, concurrency: 64, connectionInterval: .milliseconds(30), roundTripsPerDevice: 11,
                                  acknowledgementsPerDevice: 4, model: try BenchmarkFixtures.model())
        #expect(abs(b.perRoundTrip - 0.060) < 1e-9)
        // Advertising every 20-100 ms: half of 60 ms on average.
        #expect(abs(b.advertisingWait - 0.030) < 1e-9)
        // Acks 5-50 ms after the write: one interval for 25 of 45 ms, two for the rest; minus the response's one.
        #expect(abs(b.acknowledgementWait - 0.030 * 20 / 45) < 1e-4)
        #expect(abs(b.perDevice - (0.030 + 11 * 0.060 + 4 * 0.030 * 20 / 45)) < 1e-3)
        #expect(abs(b.concurrencyBound - 1_000 / 64 * b.perDevice) < 1e-9)
        #expect(abs(b.serialConnectBound - 30) < 1e-9)
        #expect(b.bound == b.serialConnectBound)
    }
}
