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
struct ScanTests {
    @Test func withLatencyAScanRepeatsEveryDeviceInOrderOfItsFirstAdvertisement() async throws {
        let specs = (0..<3).map { SimulatedDeviceSpec(id: "L-\($0)") }
        let central = try SimulatedCentral(model: try Fixtures.model(), devices: specs,
                                           options: SimulatorOptions(seed: 5, latencyScale: 0.05, reportPeriod: .milliseconds(10)))
        let order = central.devices.map(\.address)
        var heard: [BluetoothAddress] = []
        for try await ad in central.scan(ScanFilter()) {
            heard.append(ad.address)
            #expect((-75 ... -45).contains(ad.rssi))
            #expect(ad.adapter == "sim")
            if heard.count == 6 { break }
        }
        #expect(heard == order + order)
    }

    @Test func withoutDuplicatesADeviceIsReportedOnceAndAgainOnlyIfNew() async throws {
        let central = try Fixtures.central([try Fixtures.spec("U-1"), try Fixtures.spec("U-2")])
        var it = central.scan(ScanFilter(allowDuplicates: false)).makeAsyncIterator()
        let first = try await it.next()
        let second = try await it.next()
        #expect(Set([first?.name, second?.name]) == ["SNS-U-1", "SNS-U-2"])
    }

    @Test func aDeviceThatDisconnectsIsReportedAgainToARunningScan() async throws {
        let central = try Fixtures.central([try Fixtures.spec("R-1")])
        let address = try #require(central.address(of: "R-1"))
        var it = central.scan(ScanFilter(names: ["SNS-R-1"])).makeAsyncIterator()
        #expect(try await it.next()?.address == address)
        let link = try await central.connect(to: address, options: ConnectOptions())
        await link.disconnect()
        // The scan was waiting (zero latency: no repeats); the device's return wakes it.
        #expect(try await it.next()?.address == address)
    }

    @Test func closingTheAdapterEndsScansAndDropsLinks() async throws {
        let central = try Fixtures.central([try Fixtures.spec("Z-1")])
        let address = try #require(central.address(of: "Z-1"))
        let link = try await central.connect(to: address, options: ConnectOptions())
        var it = central.scan(ScanFilter()).makeAsyncIterator()
        await central.close()
        #expect(try await it.next() == nil)
        #expect(await link.waitForDisconnect() == .transportClosed)
        await #expect(throws: BLEError.self) { _ = try await central.connect(to: address, options: ConnectOptions()) }
    }
}
