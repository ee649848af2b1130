import BLE
import BLESimulator
import Engine
import EngineTestSupport
import Synchronization
import Testing

/// A central that connects by address, as the HCI adapter does (here over the simulated fleet), and
/// whose scans never hear anything: a device that gets through the `scan` step on it was found by
/// connecting to its inventory address, not by a scan.
private final class AddressOnlyCentral: Central {
    let base: SimulatedCentral
    private let scans = Mutex<[UInt64: AsyncThrowingStream<Advertisement, any Error>.Continuation]>([:])
    private let nextScan = Mutex<UInt64>(0)

    init(_ base: SimulatedCentral) { self.base = base }

    var id: String { base.id }
    var connectionSlots: Int { base.connectionSlots }
    var isSimulated: Bool { base.isSimulated }
    var connectsByAddress: Bool { true }

    func scan(_ filter: ScanFilter) -> AsyncThrowingStream<Advertisement, any Error> {
        let (stream, continuation) = AsyncThrowingStream<Advertisement, any Error>.makeStream()
        let id = nextScan.withLock { n -> UInt64 in
            n += 1
            return n
        }
        scans.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in self?.scans.withLock { _ = $0.removeValue(forKey: id) } }
        return stream
    }

    func connect(to peer: BluetoothAddress, options: ConnectOptions) async throws -> any Link {
        try await base.connect(to: peer, options: options)
    }

    func close() async {
        for c in scans.withLock({ s in defer { s = [:] }; return Array(s.values) }) { c.finish() }
        await base.close()
    }
}

@Suite struct ScanByConnectingTests {
    @Test func aScanForAKnownAddressIsSatisfiedByConnectingAndAnAbsentDeviceIsNotFound() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let faults: [Int: String] = [
            3: "{ faults: { connect_fail: 1.0 } }",
            5: "{ faults: { no_advertise: true } }",
        ]
        let loaded = try line.load(try line.write(count: 5, faults: faults))
        let sim = try line.simulator(loaded)
        var options = line.options()
        // One at a time: the simulator serializes connects, so a silent device's connect holds the line.
        options.concurrency = 1
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [AddressOnlyCentral(sim)], options: options)
        func record(_ n: Int) throws -> DeviceRecord {
            try #require(report.devices.first { $0.id == String(format: "SN-%04d", n) })
        }
        for n in [1, 2, 4] {
            let r = try record(n)
            #expect(r.outcome == .succeeded, "\(r.error?.message ?? "")")
            #expect(r.steps.first { $0.kind == "scan" }?.outcome == .succeeded)
        }
        // A device that answers the controller but whose links fail was found; the connect step fails it.
        #expect(try record(3).error?.kind == .connectFailed)
        #expect(try record(3).error?.step == "connect")
        // A device that never advertises is not found within the scan's timeout.
        #expect(try record(5).error?.kind == .notFound)
        #expect(try record(5).error?.step == "scan")
        let dump = await sim.dump()
        for d in dump.devices where ["SN-0001", "SN-0002", "SN-0004"].contains(d.id) {
            #expect(d.commits == 1, "\(d.id)")
        }
    }
}
