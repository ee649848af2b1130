import BLE
import BLESimulator
import Engine
import Synchronization
import Testing
import EngineTestSupport
import TestSupport

/// An adapter over the simulated fleet whose controller can be down (being brought up again, as an HCI
/// adapter's is after a reset or a vanished transport): its connects then wait until their deadline.
/// One that does not `hear` scans nothing (so that a device is heard only on the other).
private final class OutageCentral: Central {
    let base: SimulatedCentral
    let id: String
    let down: Mutex<String?>
    let hears: Bool

    init(_ base: SimulatedCentral, id: String, down: String?, hears: Bool = true) {
        self.base = base
        self.id = id
        self.down = Mutex(down)
        self.hears = hears
    }

    var connectionSlots: Int { base.connectionSlots }
    var isSimulated: Bool { base.isSimulated }
    var outage: String? { down.withLock { $0 } }

    func scan(_ filter: ScanFilter) -> AsyncThrowingStream<Advertisement, any Error> {
        hears ? base.scan(filter) : AsyncThrowingStream { _ in }
    }

    func connect(to peer: BluetoothAddress, options: ConnectOptions) async throws -> any Link {
        if outage != nil {
            try await Task.sleep(for: options.timeout)
            throw BLEError.timeout(operation: "connect", limit: options.timeout)
        }
        return try await base.connect(to: peer, options: options)
    }

    func close() async {}
}

@Suite struct AdapterOutageTests {
    @Test func aDeviceHeardOnAnAdapterWhoseControllerIsDownConnectsOnOneThatIsUpAndTheReportSaysWhy() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let loaded = try line.load(try line.write(count: 6))
        let sim = try line.simulator(loaded)
        let why = "the controller went away (peer closed); it is being brought up again"
        let down = OutageCentral(sim, id: "hci:down", down: why)
        // Every device is heard on the adapter that is down, none on the other.
        let up = OutageCentral(sim, id: "hci:up", down: nil, hears: false)
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [down, up], options: line.options())
        for device in report.devices {
            #expect(device.outcome == .succeeded, "\(device.id): \(device.error?.message ?? "")")
            #expect(device.adapter == up.id)
        }
        #expect(report.run.adapters.first { $0.id == down.id }?.failure == why)
        #expect(report.run.adapters.first { $0.id == up.id }?.failure == nil)
        await sim.close()
    }

    @Test func theOnlyAdapterIsWaitedForWhileItsControllerComesBack() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let loaded = try line.load(try line.write(count: 2))
        let sim = try line.simulator(loaded)
        let only = OutageCentral(sim, id: "hci:only", down: "the controller reset; it is being brought up again")
        Task {
            try await Task.sleep(for: .milliseconds(300))
            only.down.withLock { $0 = nil }
        }
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [only], options: line.options())
        #expect(report.devices.allSatisfy { $0.outcome == .succeeded && $0.adapter == only.id })
        #expect(report.run.adapters.first?.failure == nil)
        await sim.close()
    }
}
