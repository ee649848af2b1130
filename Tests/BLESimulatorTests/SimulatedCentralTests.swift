import AsyncSupport
import BLE
import Synchronization
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

/// The adapter makes one connection at a time: a connect waits for the slot, gives up at its deadline,
/// and leaves at once when cancelled. The test holds the slot itself, as a pending connect would.
@Suite(.timeLimit(.minutes(1)))
struct ConnectSlotTests {
    @Test func aConnectWaitsForTheSlotGivesUpAtItsDeadlineAndLeavesWhenCancelled() async throws {
        let central = try Fixtures.central([try Fixtures.spec("CS-1"), try Fixtures.spec("CS-2"), try Fixtures.spec("CS-3")])
        let waiting = WaitingConnects()
        central.connectGate.observeWaiters { _ in waiting.reached() }
        try await central.connectGate.acquire()
        // Nobody frees the slot: the connect ends at its deadline, as a timeout.
        let a1 = try #require(central.address(of: "CS-1"))
        await #expect(throws: BLEError.timeout(operation: "connect to \(a1)", limit: .milliseconds(30))) {
            _ = try await central.connect(to: a1, options: ConnectOptions(timeout: .milliseconds(30)))
        }
        // A cancelled connect leaves the queue; the slot stays with its holder.
        let a2 = try #require(central.address(of: "CS-2"))
        let cancelled = Task { try await central.connect(to: a2, options: ConnectOptions(timeout: .seconds(30))) }
        await waiting.next()
        cancelled.cancel()
        await #expect(throws: BLEError.cancelled) { _ = try await cancelled.value }
        #expect(central.connectGate.available == 0)
        // A connect waiting when the slot is freed takes it and connects.
        let a3 = try #require(central.address(of: "CS-3"))
        let third = Task { try await central.connect(to: a3, options: ConnectOptions(timeout: .seconds(30))) }
        await waiting.next()
        central.connectGate.release()
        let link = try await third.value
        #expect(link.peer == a3)
        await link.disconnect()
        #expect(central.connectGate.available == 1)
        #expect(central.dump(device: "CS-1")?.connectAttempts == 0)
        #expect(central.dump(device: "CS-2")?.connectAttempts == 0)
    }
}

/// Lets a test wait, in turn, for each time a connect starts waiting for the slot.
private final class WaitingConnects: Sendable {
    private let shots = Mutex<[OneShot<Void>]>([])
    private let seen = Mutex(0)

    func reached() {
        let index = seen.withLock { s -> Int in
            s += 1
            return s - 1
        }
        shot(index).fulfill(())
    }

    private func shot(_ i: Int) -> OneShot<Void> {
        shots.withLock { s in
            while s.count <= i { s.append(OneShot<Void>()) }
            return s[i]
        }
    }

    private let awaited = Mutex(0)

    /// Waits for the next time (after those already waited for) a connect started waiting.
    func next() async {
        let i = awaited.withLock { a -> Int in
            a += 1
            return a - 1
        }
        _ = await shot(i).wait()
    }
}
