import BLE
import Testing
@testable import BLESimulator

@Suite struct SimulatorRandomTests {
    @Test func theSameSeedDeviceAndStreamGiveTheSameDraws() {
        var a = SimulatorRandom(seed: 1, device: "SN-1", stream: 3)
        var b = SimulatorRandom(seed: 1, device: "SN-1", stream: 3)
        var c = SimulatorRandom(seed: 1, device: "SN-1", stream: 4)
        var d = SimulatorRandom(seed: 2, device: "SN-1", stream: 3)
        let xs = (0..<8).map { _ in a.next() }
        #expect(xs == (0..<8).map { _ in b.next() })
        #expect(xs != (0..<8).map { _ in c.next() })
        #expect(xs != (0..<8).map { _ in d.next() })
    }

    @Test func drawsStayInTheirRanges() {
        var r = SimulatorRandom(seed: 9)
        let range = LatencyRange(.milliseconds(5), .milliseconds(50))
        for _ in 0..<1_000 {
            let d = r.duration(in: range)
            #expect(d >= .milliseconds(5) && d <= .milliseconds(50))
            #expect((-75 ... -45).contains(r.int(in: -75, -45)))
        }
        #expect(!(0..<100).contains { _ in r.chance(0) })
        #expect((0..<100).allSatisfy { _ in r.chance(1) })
        #expect(Duration.milliseconds(20).scaled(0.5) == .milliseconds(10))
        #expect(Duration.milliseconds(20).scaled(0) == .zero)
    }

    @Test func aSlowDeviceTakesAtLeastItsMultipliedConnectLatency() async throws {
        // connect latency [20ms, 80ms] x 0.01 x slow 10: at least 2 ms (a lower bound: sleeps never end early).
        let central = try SimulatedCentral(model: try Fixtures.model(), devices: [try Fixtures.spec("SL-1", "faults: { slow: 10 }")],
                                           options: SimulatorOptions(latencyScale: 0.01))
        let address = try #require(central.address(of: "SL-1"))
        let clock = ContinuousClock()
        let start = clock.now
        let link = try await central.connect(to: address, options: ConnectOptions())
        #expect(clock.now - start >= .milliseconds(2))
        await link.disconnect()
    }
}
