import BLE
import HCI
import Testing

private func hex(_ s: String) -> [UInt8] { [UInt8](hex: s) ?? [] }

private func sent(_ actions: [ScanController.Action]) -> [String] {
    actions.compactMap { if case .send(let c) = $0 { return c.packet.bytes.hexString } else { return nil } }
}

@Suite struct ScanControllerTests {
    @Test func aConsumerStartsTheScanParametersFirstAndTheLastOneStopsIt() {
        var scan = ScanController(scansWhileInitiating: true)
        let start = scan.handle(.wanted(true))
        #expect(sent(start) == ["0b2007016000600001" + "00"])
        let params = ScanController.Command.parameters(ScanController.Parameters().command)
        #expect(sent(scan.handle(.commandFinished(params, .success))) == ["0c20020100"])
        _ = scan.handle(.commandFinished(.enable(true), .success))
        #expect(scan.enabled)
        #expect(sent(scan.handle(.wanted(false))) == ["0c20020000"])
        _ = scan.handle(.commandFinished(.enable(false), .success))
        // Again: the parameters hold, only the enable goes.
        #expect(sent(scan.handle(.wanted(true))) == ["0c20020100"])
    }

    @Test func theScanStaysOnWhileInitiatingWhereTheControllerCan() {
        var scan = ScanController(scansWhileInitiating: true)
        _ = scan.handle(.wanted(true))
        _ = scan.handle(.commandFinished(.parameters(ScanController.Parameters().command), .success))
        _ = scan.handle(.commandFinished(.enable(true), .success))
        // The radio is free at once and scanning is not touched.
        #expect(scan.handle(.initiation(true)) == [.radioFree])
        #expect(scan.enabled && !scan.isWaitingForRadio)
        #expect(scan.handle(.initiation(false)).isEmpty)
    }

    @Test func elseScanningPausesAroundInitiatingAndTheFallbackIsNotedOnce() {
        var scan = ScanController(scansWhileInitiating: false)
        _ = scan.handle(.wanted(true))
        _ = scan.handle(.commandFinished(.parameters(ScanController.Parameters().command), .success))
        _ = scan.handle(.commandFinished(.enable(true), .success))
        let pause = scan.handle(.initiation(true))
        #expect(sent(pause) == ["0c20020000"])
        #expect(pause.contains { if case .note = $0 { return true } else { return false } })
        #expect(!pause.contains(.radioFree))
        #expect(scan.handle(.commandFinished(.enable(false), .success)) == [.radioFree])
        #expect(scan.isWaitingForRadio)
        #expect(sent(scan.handle(.initiation(false))) == ["0c20020100"])
        _ = scan.handle(.commandFinished(.enable(true), .success))
        // The second pause is not noted again.
        let again = scan.handle(.initiation(true))
        #expect(!again.contains { if case .note = $0 { return true } else { return false } })
    }

    @Test func initiatingWithNobodyScanningNeedsNoCommand() {
        var scan = ScanController(scansWhileInitiating: false)
        #expect(scan.handle(.initiation(true)) == [.radioFree])
        // A consumer arriving during the initiation waits for it to end.
        #expect(scan.handle(.wanted(true)).isEmpty)
        #expect(scan.isWaitingForRadio)
        #expect(sent(scan.handle(.initiation(false))).count == 1)
    }

    @Test func aRefusedScanIsReportedAndRefusedParametersAreLivedWith() {
        var scan = ScanController(scansWhileInitiating: false)
        _ = scan.handle(.wanted(true))
        let afterParams = scan.handle(.commandFinished(.parameters(ScanController.Parameters().command), .commandDisallowed))
        #expect(sent(afterParams) == ["0c20020100"])
        let refused = scan.handle(.commandFinished(.enable(true), nil))
        #expect(refused.contains { if case .failed = $0 { return true } else { return false } })
        #expect(!scan.enabled && !scan.wanted)
    }
}

@Suite struct AdvertisementCacheTests {
    private let device = BluetoothAddress("F0:00:00:00:00:07", kind: .random)!

    @Test func scanResponsesMergeWithTheirAdvertisement() throws {
        var cache = AdvertisementCache()
        _ = cache.record(AdvertisingReport(kind: .advertisement(connectable: true), address: device, data: hex("020106 0302f0ff"), rssi: -40))
        let recorded = cache.record(AdvertisingReport(kind: .scanResponse, address: device, data: hex("0909534e532d30303037"), rssi: -42))
        let entry = try #require(recorded)
        #expect(entry.merged.localName == "SNS-0007")
        #expect(entry.merged.serviceUUIDs == [BluetoothUUID(0xFFF0)])
        #expect(entry.rssi == -42 && entry.connectable)
        #expect(cache.entry(for: BluetoothAddress("F0:00:00:00:00:07")!)?.address.kind == .random)
        #expect(cache.record(AdvertisingReport(kind: .scanResponse, address: device, data: [0x05, 0x09], rssi: 0)) == nil)
    }

    @Test func theCacheIsBoundedOldestFirst() {
        var cache = AdvertisementCache(limit: 3)
        for n in 1...5 {
            _ = cache.record(AdvertisingReport(kind: .advertisement(connectable: true), address: BluetoothAddress(value: UInt64(n)), data: [], rssi: -50))
        }
        #expect(cache.count == 3)
        #expect(cache.entry(for: BluetoothAddress(value: 1)) == nil && cache.entry(for: BluetoothAddress(value: 5)) != nil)
    }
}

@Suite struct FixedChannelRouterTests {
    @Test func attGoesToTheBearerAndSignallingIsAnswered() {
        var router = FixedChannelRouter()
        #expect(router.receive(ACLDataPacket(handle: 0x40, boundary: .firstFlushable, data: hex("0300 0400 0a0300"))) == [.att(hex("0a0300"))])
        let signal = router.receive(ACLDataPacket(handle: 0x40, boundary: .firstFlushable,
                                                  data: L2CAPBasicFrame(channel: .leSignaling, payload: hex("12 07 0800 0600 0c00 0000 f401")).bytes))
        #expect(signal == [.reply(.leSignaling, hex("13 07 0200 0000")),
                           .updateParameters(ConnectionParameterUpdateRequest(intervalMin: 6, intervalMax: 12, latency: 0, timeout: 500))])
        #expect(router.receive(ACLDataPacket(handle: 0x40, boundary: .firstFlushable, data: hex("0100 4000 ff"))).count == 1)
    }

    @Test func smpGoesToTheSecurityHandlerOrIsRefused() {
        let pairingRequest = L2CAPBasicFrame(channel: .smp, payload: hex("01 03 00 01 10 07 07"))
        #expect(FixedChannelRouter().route(pairingRequest) == [.reply(.smp, [0x05, 0x05])])
        #expect(FixedChannelRouter(securityHandler: true).route(pairingRequest) == [.smp(hex("01 03 00 01 10 07 07"))])
    }
}
