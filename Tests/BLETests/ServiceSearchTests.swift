import Testing
@testable import BLE

private let battery = BluetoothUUID(0x180F)
private let short = ServiceSearch.Request.findByValue([0x0F, 0x18])
private let long = ServiceSearch.Request.findByValue(BluetoothUUID(0x180F).uuid128.reversed())

/// Runs a search to its end with the given outcomes; returns the requests it made.
private func requests(_ search: ServiceSearch, _ outcomes: [ServiceSearch.Outcome]) -> [ServiceSearch.Request] {
    var search = search
    var out: [ServiceSearch.Request] = []
    var next = search.next(after: nil)
    var i = 0
    while let r = next {
        out.append(r)
        guard i < outcomes.count else { break }
        next = search.next(after: outcomes[i])
        i += 1
    }
    return out
}

@Suite struct ServiceSearchTests {
    @Test func aSIGServiceIsAskedFor16BitThen128BitThenByDiscoveringEverything() {
        let s = ServiceSearch(uuid: battery)
        #expect(requests(s, [.notFound, .notFound, .notFound]) == [short, long, .discoverAll])
        #expect(long == .findByValue([0xFB, 0x34, 0x9B, 0x5F, 0x80, 0x00, 0x00, 0x80, 0x00, 0x10, 0x00, 0x00, 0x0F, 0x18, 0x00, 0x00]))
    }

    @Test func theSearchStopsAtTheFirstFind() {
        #expect(requests(ServiceSearch(uuid: battery), [.found]) == [short])
        #expect(requests(ServiceSearch(uuid: battery), [.notFound, .found]) == [short, long])
        var s = ServiceSearch(uuid: battery)
        _ = s.next(after: nil)
        #expect(s.next(after: .found) == nil)
        #expect(s.next(after: .notFound) == nil)
    }

    @Test func aServerWithoutFindByTypeValueGoesStraightToFullDiscovery() {
        #expect(requests(ServiceSearch(uuid: battery), [.notSupported, .notFound]) == [short, .discoverAll])
        #expect(requests(ServiceSearch(uuid: battery, findByValueUnsupported: true), [.notFound]) == [.discoverAll])
    }

    @Test func aVendor128BitServiceHasNo16BitStep() {
        let vendor = BluetoothUUID("6E400001-B5A3-F393-E0A9-E50E24DCCA9E")!
        #expect(requests(ServiceSearch(uuid: vendor), [.notFound, .notFound]) == [.findByValue(vendor.uuid128.reversed()), .discoverAll])
    }

    @Test func aLearnedLongFormIsTriedFirstAndTheShortFormStillFollows() {
        #expect(requests(ServiceSearch(uuid: battery, longFormFirst: true), [.notFound, .notFound, .notFound])
                == [long, short, .discoverAll])
    }

    @Test func fullDiscoveryModeDiscoversEverythingOnce() {
        #expect(requests(ServiceSearch(uuid: battery, mode: .all), [.notFound]) == [.discoverAll])
        #expect(requests(ServiceSearch(uuid: battery, mode: .all), [.notSupported]) == [.discoverAll])
    }
}
