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

    @Test func aDeviceStreamDrawsTheSameNumbersOnEveryMachineAndRelease() {
        // Pinned: a changed draw would move every simulated fault and latency of a seeded run.
        var plain = SimulatorRandom(seed: 0)
        #expect((0..<3).map { _ in plain.next() } == [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F])
        var a = SimulatorRandom(seed: 1, device: "SN-1", stream: 3)
        #expect((0..<4).map { _ in a.next() } == [0x73F8_3C59_F9B1_4B07, 0x98AA_BE9A_5060_1AB5, 0x4748_E7F8_51C0_FCD4, 0x612E_D543_C6F6_DF9A])
        var b = SimulatorRandom(seed: 42, device: "SL-0008", stream: 0)
        #expect((0..<4).map { _ in b.next() } == [0x55A5_4D0A_8229_A482, 0xE543_6D97_981D_1D81, 0x5157_E162_FD92_10A1, 0x00E0_C84E_4FAC_C4C2])
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
