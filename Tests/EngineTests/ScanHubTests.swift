import BLE
@testable import Engine
import Testing

/// A central whose scan yields the advertisements it was given, once each.
private final class ListedCentral: Central {
    let id = "listed"
    let connectionSlots = 1
    let isSimulated = true
    let ads: [Advertisement]

    init(_ ads: [Advertisement]) { self.ads = ads }

    func scan(_ filter: ScanFilter) -> AsyncThrowingStream<Advertisement, any Error> {
        let ads = self.ads.filter(filter.matches)
        return AsyncThrowingStream { c in
            for ad in ads { c.yield(ad) }
        }
    }

    func connect(to peer: BluetoothAddress, options: ConnectOptions) async throws -> any Link {
        throw BLEError.connectFailed("not here")
    }

    func close() async {}
}

@Suite struct ScanHubTests {
    @Test func aDeviceBehindAResolvablePrivateAddressIsFoundByItsIdentity() async throws {
        let identity = BluetoothAddress("F0:00:00:00:00:09", kind: .random)!
        let rpa = BluetoothAddress(value: 0x4A_BCDE_12_3456, kind: .random)
        let stranger = BluetoothAddress(value: 0x4B_0000_00_0001, kind: .random)
        let hub = ScanHub(central: ListedCentral([
            Advertisement(address: stranger, rssi: -40, data: AdvertisingData(), adapter: "listed"),
            Advertisement(address: rpa, rssi: -50, data: AdvertisingData(), adapter: "listed", identity: identity),
        ]))
        let found = await hub.wait(for: ScanHub.Wanted(address: identity, name: nil, filter: ScanFilter()), timeout: .seconds(5))
        #expect(found?.address == rpa && found?.identity == identity)
        // Remembered under the identity: a later wait is answered at once.
        #expect(await hub.cached(ScanHub.Wanted(address: identity, name: nil, filter: ScanFilter()))?.address == rpa)
        #expect(await hub.cached(ScanHub.Wanted(address: rpa, name: nil, filter: ScanFilter())) == nil)
        await hub.stop()
    }
}
