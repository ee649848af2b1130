import BLE
import HCI
import Testing

private func hex(_ s: String) -> [UInt8] { [UInt8](hex: s) ?? [] }
private let device = BluetoothAddress("F0:00:00:00:00:07", kind: .random)!

private func isScanEnable(_ enable: Bool) -> @Sendable (H4Packet) -> Bool {
    { $0.type == .command && $0.bytes == [0x0C, 0x20, 0x02, enable ? 0x01 : 0x00, 0x00] }
}

private func report(_ type: UInt8, _ data: [UInt8], rssi: Int8 = -40) -> HCIEvent {
    .leAdvertisingReport(LEAdvertisingReportEvent(reports: [.init(eventType: type, address: device, data: data, rssi: rssi)]))
}

/// Flags + incomplete 16-bit UUIDs FFF0 (the advertisement) and a complete name (the scan response).
private let advertisement = hex("020106 0302f0ff")
private let scanResponse = hex("0909534e532d30303037")

@Suite struct HCIAdapterScanTests {
    @Test func scanResponsesAreMergedWithTheirAdvertisement() async throws {
        let fake = FakeController()
        let adapter = try await HCIAdapter.open(transport: fake, id: "fake", options: HCIAdapter.Options(log: { _ in }))
        let stream = adapter.scan(ScanFilter(names: ["SNS-0007"], services: [BluetoothUUID(0xFFF0)]))
        _ = try await firstWritten(fake, where: isScanEnable(true))
        fake.inject(event: report(0x00, advertisement))
        fake.inject(event: report(0x04, scanResponse, rssi: -42))
        let ad = try #require(try await first(stream))
        #expect(ad.name == "SNS-0007")
        #expect(ad.data.serviceUUIDs == [BluetoothUUID(0xFFF0)])
        #expect(ad.rssi == -42)
        #expect(ad.address == device)
        #expect(ad.adapter == "fake")
        await adapter.close()
    }

    @Test func consumersShareOneScanAndTheLastOneLeavingStopsIt() async throws {
        let fake = FakeController()
        let adapter = try await HCIAdapter.open(transport: fake, id: "fake", options: HCIAdapter.Options(log: { _ in }))
        let everything = Task { () -> Int in
            var seen = 0
            for try await _ in adapter.scan(ScanFilter()) {
                seen += 1
                if seen == 3 { break }
            }
            return seen
        }
        _ = try await firstWritten(fake, where: isScanEnable(true))
        // A second consumer that wants each device once.
        let once = adapter.scan(ScanFilter(allowDuplicates: false))
        var iterator = once.makeAsyncIterator()
        for _ in 0..<3 { fake.inject(event: report(0x00, advertisement)) }
        #expect(try await everything.value == 3)
        let firstOnce = try await iterator.next()
        #expect(firstOnce?.address == device)
        // The first consumer left; the second still scans. Nothing disabled scanning yet, so the
        // next scan-enable command the controller sees must be the disable sent when the last leaves.
        _ = consume iterator
        _ = consume once
        let disable = try await firstWritten(fake) { $0.type == .command && Array($0.bytes.prefix(2)) == [0x0C, 0x20] }
        #expect(disable.bytes == [0x0C, 0x20, 0x02, 0x00, 0x00])
        await adapter.close()
    }

    @Test func scanningPausesWhileConnectingAndResumesAfter() async throws {
        let fake = FakeController()
        let adapter = try await HCIAdapter.open(transport: fake, id: "fake", options: HCIAdapter.Options(log: { _ in }))
        let stream = adapter.scan(ScanFilter())
        _ = try await firstWritten(fake, where: isScanEnable(true))
        _ = try await adapter.connect(to: device, options: ConnectOptions(timeout: .seconds(2)))
        // Observed order on the wire: scan disable, create connection, then scan enable again.
        let order = try await withThrowingTaskGroup(of: [String].self) { group in
            group.addTask {
                var seen: [String] = []
                for await p in fake.written where p.type == .command {
                    switch Array(p.bytes.prefix(2)) {
                    case [0x0C, 0x20]: seen.append(p.bytes[3] == 1 ? "scan on" : "scan off")
                    case [0x0D, 0x20]: seen.append("create connection")
                    case [0x0B, 0x20]: seen.append("scan parameters")
                    default: seen.append("other")
                    }
                    if seen.last == "scan on" { return seen }
                }
                return seen
            }
            return try await group.next() ?? []
        }
        // The parameters were written once, before the first enable; they hold across the pause.
        #expect(order == ["scan off", "create connection", "scan on"])
        fake.inject(event: report(0x00, advertisement))
        var it = stream.makeAsyncIterator()
        #expect(try await it.next()?.address == device)
        await adapter.close()
    }
}
