import BLE
import Testing
@testable import BLESimulator

/// Pacing: a paced fleet's links wait for connection events, and its connects for advertising events.
/// Only lower bounds on time are asserted (a loaded machine makes things later, never earlier).
@Suite(.timeLimit(.minutes(1)))
struct SimulatedCentralTests {
    private func pacedCentral(_ ids: [String], modelInterval: Duration?, runInterval: Duration?) throws -> SimulatedCentral {
        var model = try Fixtures.model()
        model.latency.connectionInterval = modelInterval.map { LatencyRange($0, $0) }
        return try SimulatedCentral(model: model, devices: try ids.map { try Fixtures.spec($0) },
                                    options: SimulatorOptions(seed: 3, latencyScale: 1, connectionInterval: runInterval))
    }

    @Test func aPacedConnectWaitsForTheDevicesNextAdvertisingEventAndAnchorsTheLinkThere() async throws {
        let central = try pacedCentral(["PC-1"], modelInterval: .milliseconds(20), runInterval: nil)
        let device = try #require(central.devices.first)
        let started = ContinuousClock.now
        var client = try await Fixtures.connect(central, "PC-1")
        client.assumeSensorV2Layout()
        let link = try #require((client.link as? SimulatedLink)?.inner)
        let events = try #require(link.events)
        #expect(events.interval == .milliseconds(20))
        #expect(events.anchor >= started)
        // The anchor is one of the device's advertising events, the first after the connect began.
        let advertising = device.advertisingEvents(epoch: central.epoch, scale: 1)
        #expect(events.anchor >= advertising.next(after: started))
        let sinceFirst = events.anchor - advertising.anchor
        let period = device.advertisingInterval
        #expect(period >= .milliseconds(20) && period <= .milliseconds(100))
        #expect(nanoseconds(sinceFirst) % nanoseconds(period) == 0)
        // A request and its response take at least one interval; the value is right.
        let sent = ContinuousClock.now
        #expect(try await client.read(0x2A25) == Array("PC-1".utf8))
        #expect(ContinuousClock.now - sent >= .milliseconds(20))
        await client.link.disconnect()
    }

    @Test func theRunsConnectionIntervalOverridesTheModel() async throws {
        let central = try pacedCentral(["PC-2"], modelInterval: nil, runInterval: .milliseconds(30))
        let client = try await Fixtures.connect(central, "PC-2")
        #expect((client.link as? SimulatedLink)?.inner.events?.interval == .milliseconds(30))
        await client.link.disconnect()
    }

    @Test func withoutAnIntervalOrAtZeroLatencyNothingIsPaced() async throws {
        let unpaced = try pacedCentral(["PC-3"], modelInterval: nil, runInterval: nil)
        let a = try await Fixtures.connect(unpaced, "PC-3")
        #expect(try #require(a.link as? SimulatedLink).inner.events == nil)
        await a.link.disconnect()
        var model = try Fixtures.model()
        model.latency.connectionInterval = LatencyRange(.milliseconds(30), .milliseconds(30))
        let zero = try SimulatedCentral(model: model, devices: [try Fixtures.spec("PC-4")],
                                        options: SimulatorOptions(latencyScale: 0, connectionInterval: .milliseconds(30)))
        let b = try await Fixtures.connect(zero, "PC-4")
        #expect(try #require(b.link as? SimulatedLink).inner.events == nil)
        await b.link.disconnect()
    }
}

private func nanoseconds(_ d: Duration) -> Int64 {
    let (s, atto) = d.components
    return s * 1_000_000_000 + atto / 1_000_000_000
}
