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

    @Test func advertisementsTooOldToAnswerAreForgottenSoALargeLineKeepsNoneOfThem() async throws {
        let old = ContinuousClock.now - .seconds(60)
        var ads = (0..<3_000).map { i in
            Advertisement(address: BluetoothAddress(value: 0x4000_0000_0000 | UInt64(i), kind: .random), rssi: -50,
                          data: AdvertisingData(), time: old, adapter: "listed")
        }
        let fresh = BluetoothAddress(value: 0x4F00_0000_0001, kind: .random)
        ads.append(Advertisement(address: fresh, rssi: -40, data: AdvertisingData(), adapter: "listed"))
        let hub = ScanHub(central: ListedCentral(ads), freshness: .seconds(10))
        let found = await hub.wait(for: ScanHub.Wanted(address: fresh, name: nil, filter: ScanFilter()), timeout: .seconds(60))
        #expect(found?.address == fresh)
        #expect(await hub.remembered < 1_100, "stale advertisements are dropped once the memory doubles")
        #expect(await hub.cached(ScanHub.Wanted(address: fresh, name: nil, filter: ScanFilter()))?.address == fresh)
        await hub.stop()
    }
}
