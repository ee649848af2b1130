import BLE
import HCI
import Testing

private func device(_ n: UInt64) -> BluetoothAddress { BluetoothAddress(value: 0xF000_0000_0000 | n, kind: .random) }

private func open(_ fake: FakeController, _ configure: (inout HCIAdapter.Options) -> Void = { _ in }) async throws -> HCIAdapter {
    var options = HCIAdapter.Options(log: { _ in })
    options.optionalCommandTimeout = .milliseconds(100)
    configure(&options)
    return try await HCIAdapter.open(transport: fake, id: "fake", options: options)
}

/// A controller that keeps a Filter Accept List of 8 and honours it.
private func listController(advertising: [BluetoothAddress]) -> FakeController {
    var script = FakeController.Script()
    script.acceptListSize = 8
    script.advertising = Set(advertising.map(\.value))
    return FakeController(script)
}

@Suite struct HCIAdapterConnectTests {
    @Test func concurrentConnectsShareTheAcceptListAndAnAbsentDeviceBlocksNobody() async throws {
        let (absent, b, c) = (device(1), device(2), device(3))
        let fake = listController(advertising: [])
        let adapter = try await open(fake)
        #expect(await adapter.info?.acceptListSize == 8)
        let waiting = Task { try await adapter.connect(to: absent, options: ConnectOptions(timeout: .seconds(30))) }
        let second = Task { try await adapter.connect(to: b, options: ConnectOptions(timeout: .seconds(30))) }
        let third = Task { try await adapter.connect(to: c, options: ConnectOptions(timeout: .seconds(30))) }
        // Once all three are in the list behind one initiation with filter policy 1, B and C show up.
        try await withDeadline(.seconds(5), operation: "one initiation over all three") {
            var added = 0
            for await p in fake.written {
                if p.isCommand(.leAddDeviceToFilterAcceptList) { added += 1 }
                if added >= 3, p.isCommand(.leCreateConnection),
                   (try? LECreateConnectionCommand(parameters: Array(p.bytes.dropFirst(3))))?.filterPolicy == 1 { return }
            }
        }
        #expect(fake.observed.acceptListPeak.count == 3)
        fake.advertise(c)
        let linkC = try await third.value
        fake.advertise(b)
        let linkB = try await second.value
        #expect(linkB.peer == b && linkC.peer == c)
        // The absent device is still waiting; its caller gives up without disturbing the others.
        waiting.cancel()
        await #expect(throws: BLEError.cancelled) { _ = try await waiting.value }
        #expect((linkB as? HCILink)?.disconnectReason == nil && (linkC as? HCILink)?.disconnectReason == nil)
        #expect(Set(fake.observed.acceptListPeak) == [absent, b, c])
        #expect(fake.observed.disallowedListChanges == 0, "the list was never changed under a pending initiation")
        await adapter.close()
    }

    @Test func aConnectionLimitLowersTheAdaptersSlotsForGood() async throws {
        var script = FakeController.Script()
        script.connectionLimit = 2
        let fake = FakeController(script)
        let adapter = try await open(fake) { $0.connectionSlots = 8 }
        _ = try await adapter.connect(to: device(1), options: ConnectOptions(timeout: .seconds(2)))
        _ = try await adapter.connect(to: device(2), options: ConnectOptions(timeout: .seconds(2)))
        #expect(adapter.connectionSlots == 8)
        await #expect {
            _ = try await adapter.connect(to: device(3), options: ConnectOptions(timeout: .seconds(2)))
        } throws: { error in
            "\(error)".contains("connection limit exceeded")
        }
        #expect(adapter.connectionSlots == 2)
        await #expect {
            _ = try await adapter.connect(to: device(4), options: ConnectOptions(timeout: .seconds(2)))
        } throws: { error in
            "\(error)".contains("all 2 connection slots")
        }
        await adapter.close()
    }

    @Test func aCommandTheControllerIgnoresCostsOnlyItsBringUpProbe() async throws {
        var script = FakeController.Script()
        script.features = LEFeaturesReturn.twoMegabitPHY
        script.silent = [HCIOpcode.leSetPHY.rawValue]
        let fake = FakeController(script)
        let (lines, log) = AsyncStream<String>.makeStream()
        let adapter = try await open(fake) { $0.log = { log.yield($0) } }
        let first = try await adapter.connect(to: device(1), options: ConnectOptions(timeout: .seconds(2)))
        let second = try await adapter.connect(to: device(2), options: ConnectOptions(timeout: .seconds(2)))
        // LE Set PHY went out once, as the bring-up probe: never on a link, where it would have held
        // the command queue for its deadline.
        #expect(fake.observed.commands[.leSetPHY] == 1)
        #expect(first.peer == device(1) && second.peer == device(2))
        log.finish()
        var text: [String] = []
        for await line in lines { text.append(line) }
        #expect(text.contains { $0.contains("does not take LE Set PHY") })
        await adapter.close()
    }

    @Test func theScanStaysOnWhileConnectingWhereTheControllerSaysItCan() async throws {
        var script = FakeController.Script()
        script.supportedStates = LESupportedStatesReturn.activeScanningAndInitiating
        let fake = FakeController(script)
        let adapter = try await open(fake)
        let stream = adapter.scan(ScanFilter())
        _ = try await firstWritten(fake) { $0.type == .command && $0.bytes == [0x0C, 0x20, 0x02, 0x01, 0x00] }
        _ = try await adapter.connect(to: device(7), options: ConnectOptions(timeout: .seconds(2)))
        _ = consume stream
        // On the wire after the scan started: the connection's create, and the scan's disable only
        // when its consumer left.
        let order = try await withDeadline(.seconds(5), operation: "scan disable") { () -> [String] in
            var seen: [String] = []
            for await p in fake.written {
                if p.isCommand(.leCreateConnection) { seen.append("create connection") }
                if p.isCommand(.leSetScanEnable) {
                    seen.append(p.bytes == [0x0C, 0x20, 0x02, 0x00, 0x00] ? "scan off" : "scan on")
                    if seen.last == "scan off" { return seen }
                }
            }
            return seen
        }
        #expect(order == ["create connection", "scan off"])
        await adapter.close()
    }

    @Test func theLinkRSSIComesFromTheControllerOrFromTheAdvertisementHeard() async throws {
        var script = FakeController.Script()
        script.rssi = -55
        let fake = FakeController(script)
        let adapter = try await open(fake)
        let link = try await adapter.connectLink(to: device(1), options: ConnectOptions(timeout: .seconds(2)))
        #expect(await link.readRSSI() == -55)
        // A controller that will not say: the advertisement heard before connecting.
        fake.update { $0.rssi = nil }
        let heard = device(2)
        let scan = adapter.scan(ScanFilter(addresses: [heard]))
        fake.inject(event: .leAdvertisingReport(LEAdvertisingReportEvent(reports: [.init(eventType: 0, address: heard, data: [], rssi: -61)])))
        _ = try await first(scan)
        let other = try await adapter.connectLink(to: heard, options: ConnectOptions(timeout: .seconds(2)))
        #expect(await other.readRSSI() == -61)
        await adapter.close()
    }
}
