import BLE
import Testing
@testable import BLESimulator

@Suite(.timeLimit(.minutes(2)))
struct ScaleTests {
    @Test func tenThousandDevicesAreScannedOnceEachAndAThousandConnectAtOnce() async throws {
        let specs = (0..<10_000).map { SimulatedDeviceSpec(id: "SC-\($0)", name: "SNS-\($0)") }
        let central = try SimulatedCentral(model: try Fixtures.model(), devices: specs,
                                           options: SimulatorOptions(seed: 9, latencyScale: 0, connectionSlots: 1_000))
        #expect(central.deviceCount == 10_000)
        var seen = Set<BluetoothAddress>()
        var reports = 0
        for try await ad in central.scan(ScanFilter(services: [BluetoothUUID(0xFFF0)])) {
            seen.insert(ad.address)
            reports += 1
            if reports == 10_000 { break }
        }
        #expect(seen.count == 10_000)

        // A scan by name looks the device up directly.
        var byName = central.scan(ScanFilter(names: ["SNS-4242"])).makeAsyncIterator()
        #expect(try await byName.next()?.address == central.address(of: "SC-4242"))

        let ids = (0..<1_000).map { "SC-\($0 * 10)" }
        let links = try await withThrowingTaskGroup(of: (any Link).self) { group in
            for id in ids {
                group.addTask {
                    var client = try await Fixtures.connect(central, id)
                    client.assumeSensorV2Layout()
                    guard try await client.read(0x2A25) == Array(id.utf8) else { throw BLEError.protocolError("serial of \(id)") }
                    return client.link
                }
            }
            var out: [any Link] = []
            for try await l in group { out.append(l) }
            return out
        }
        #expect(links.count == 1_000)
        #expect(central.activeLinkCount == 1_000)
        for l in links { await l.disconnect() }
        let dump = await central.dump()
        #expect(dump.devices.count == 10_000)
        #expect(dump.devices.filter { $0.connections == 1 }.count == 1_000)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct SimulatorBenchmarksTests {
    @Test func theBenchmarkRunsAndReportsEveryMeasure() async throws {
        let r = try await SimulatorBenchmarks.measure(model: try Fixtures.model(), fleetSize: 50, connections: 10, operations: 200)
        #expect(r.readsPerSecondOneLink > 0)
        #expect(r.writeCommandsPerSecondOneLink > 0)
        #expect(r.readsPerSecondAllLinks > 0)
        #expect(r.connections == 10)
        #expect(SimulatorBenchmarks.report(r).contains("10 links"))
    }
}
