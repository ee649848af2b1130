import Digests
import Testing
@testable import BLE

@Suite struct ATTServerTests {
    static func database() -> GATTDatabase { GATTDatabase(services: specs()) }

    static func specs() -> [GATTDatabase.ServiceSpec] {
        [
            .init(uuid: BluetoothUUID(0x180A), characteristics: [
                .init(uuid: BluetoothUUID(0x2A26), properties: [.read], value: Array("2.4.1".utf8)),
            ]),
            .init(uuid: BluetoothUUID(0xFFF0), characteristics: [
                .init(uuid: BluetoothUUID(0xFFF1), properties: [.write]),
                .init(uuid: BluetoothUUID(0xFFF3), properties: [.notify]),
                .init(uuid: BluetoothUUID(0xFFF4), properties: [.writeWithoutResponse]),
            ]),
        ]
    }

    @Test func laysOutHandlesInOrder() throws {
        let db = Self.database()
        #expect(db.attributes.map(\.handle) == Array(1...11))
        #expect(db.valueHandle(service: BluetoothUUID(0xFFF0), characteristic: BluetoothUUID(0xFFF3)) == 8)
        #expect(db.cccdHandle(forValue: 8) == 9)
        #expect(db.attribute(1)?.groupEnd == 3)
        #expect(db.attribute(4)?.groupEnd == 11)
    }

    @Test func answersDiscoveryAndReads() throws {
        var server = ATTServer(database: Self.database())
        #expect(server.receive([0x02, 0xF7, 0x00]).response == [0x03, 0xF7, 0x00])
        #expect(server.mtu == 247)
        // Read By Group Type, primary services.
        #expect(server.receive([0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28]).response?.hexString
                == "1106" + "01000300" + "0a18" + "04000b00" + "f0ff")
        // Find By Type Value for FFF0.
        #expect(server.receive([0x06, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28, 0xF0, 0xFF]).response?.hexString == "0704000b00")
        // Read By Type characteristic declarations in FFF0.
        #expect(server.receive([0x08, 0x04, 0x00, 0x0A, 0x00, 0x03, 0x28]).response?.hexString
                == "0907" + "0500" + "080600f1ff" + "0700" + "100800f3ff" + "0a00" + "040b00f4ff")
        #expect(server.receive([0x0A, 0x03, 0x00]).response == [0x0B] + Array("2.4.1".utf8))
        // Reading a write-only value is refused.
        #expect(server.receive([0x0A, 0x06, 0x00]).response?.hexString == "010a060002")
        // Unknown handle.
        #expect(server.receive([0x0A, 0x99, 0x00]).response?.hexString == "010a990001")
    }

    @Test func writesAndSubscriptionsProduceEvents() throws {
        var server = ATTServer(database: Self.database())
        #expect(server.notification(valueHandle: 8, value: [1, 0]) == nil)
        let sub = server.receive([0x12, 0x09, 0x00, 0x01, 0x00])
        #expect(sub.response == [0x13])
        #expect(sub.events == [.subscriptionChanged(valueHandle: 8, configuration: 1)])
        #expect(server.notification(valueHandle: 8, value: [1, 0]) == [0x1B, 0x08, 0x00, 0x01, 0x00])
        let w = server.receive([0x12, 0x06, 0x00, 0x01, 0x0A])
        #expect(w.events == [.wrote(handle: 6, value: [1, 10], withResponse: true)])
        let cmd = server.receive([0x52, 0x0B, 0x00, 0xAA, 0xBB])
        #expect(cmd.response == nil)
        #expect(cmd.events == [.wrote(handle: 11, value: [0xAA, 0xBB], withResponse: false)])
        // A command to a characteristic without write-without-response is ignored.
        #expect(server.receive([0x52, 0x06, 0x00, 0x01]).events.isEmpty)
    }

    @Test func preparedWritesAssembleInOrder() throws {
        var server = ATTServer(database: Self.database())
        _ = server.receive(ATTPDU.prepareWriteRequest(.init(handle: 6, offset: 0, value: [1, 2])).bytes)
        _ = server.receive(ATTPDU.prepareWriteRequest(.init(handle: 6, offset: 2, value: [3])).bytes)
        let r = server.receive(ATTPDU.executeWriteRequest(.init(commit: true)).bytes)
        #expect(r.response == [0x19])
        #expect(r.events == [.wrote(handle: 6, value: [1, 2, 3], withResponse: true)])
    }

    @Test func malformedRequestsGetInvalidPDU() {
        var server = ATTServer(database: Self.database())
        #expect(server.receive([0x0A, 0x01]).response?.hexString == "010a000004")
        #expect(server.receive([]).response == nil)
        #expect(server.receive([0x3F]).response?.hexString == "013f000006")
        // An unknown command (bit 6 set) is ignored, as the spec says.
        #expect(server.receive([0x7F]).response == nil)
    }

    // MARK: - Read Multiple Variable Length, the Generic Attribute service, 128-bit declarations

    /// The test database with a Generic Attribute service in front: Service Changed (indicate, CCCD),
    /// Client Supported Features, Database Hash, Server Supported Features.
    static func databaseWithGATTService(longUUIDs: Bool = false, extra: Bool = false) -> GATTDatabase {
        var services: [GATTDatabase.ServiceSpec] = [
            .init(uuid: .genericAttribute, characteristics: [
                .init(uuid: .serviceChanged, properties: [.indicate]),
                .init(uuid: .clientSupportedFeatures, properties: [.read, .write], value: [0x00]),
                .init(uuid: .databaseHash, properties: [.read]),
                .init(uuid: .serverSupportedFeatures, properties: [.read], value: [0x00]),
            ]),
        ]
        services += specs()
        if extra {
            services[2].characteristics.insert(.init(uuid: BluetoothUUID(0xFFF9), properties: [.read, .write]), at: 0)
        }
        return GATTDatabase(services: services, longUUIDs: longUUIDs)
    }

    @Test func readMultipleVariableAnswersEveryValueWithItsLengthInOrder() {
        var server = ATTServer(database: Self.database())
        // 2A26 (handle 3) and FFF3's CCCD (handle 9).
        #expect(server.receive(b("20 0300 0900")).response?.hexString == "21" + "0500" + "322e342e31" + "0200" + "0000")
        // A write-only value among them refuses the whole request, naming its handle.
        #expect(server.receive(b("20 0300 0600")).response?.hexString == "0120060002")
        #expect(server.receive(b("20 0300 9900")).response?.hexString == "0120990001")
        // One handle is not a Read Multiple Variable Length Request.
        #expect(server.receive(b("20 0300")).response?.hexString == "0120000004")
    }

    @Test func readMultipleVariableStopsAtTheMTUEvenInsideALength() {
        let long = [UInt8](repeating: 0x41, count: 30)
        let db = GATTDatabase(services: [.init(uuid: BluetoothUUID(0xFFF0), characteristics: [
            .init(uuid: BluetoothUUID(0xFFF1), properties: [.read], value: long),
            .init(uuid: BluetoothUUID(0xFFF2), properties: [.read], value: Array(1...19)),
        ])])
        var server = ATTServer(database: db)
        // MTU 23: 22 bytes of list, the first value is cut after 20 of its 30 bytes.
        let cut = server.receive(b("20 0300 0500")).response
        #expect(cut == [0x21, 30, 0] + Array(long.prefix(20)))
        // Value 2 first: its 19 bytes fit (21 of 22), then one byte of the next length.
        #expect(server.receive(b("20 0500 0300")).response?.hexString
                == "21" + "1300" + "0102030405060708090a0b0c0d0e0f10111213" + "1e")
    }

    @Test func firmwareWithoutReadMultipleVariableSaysRequestNotSupported() {
        var server = ATTServer(database: Self.database(), supportsReadMultipleVariable: false)
        #expect(server.receive(b("20 0300 0900")).response?.hexString == "0120030006")
    }

    @Test func theDatabaseHashCoversDeclarationsAndDescriptorsAsTheSpecLists() {
        let db = Self.database()
        #expect(db.databaseHashInput.hexString == "0100" + "0028" + "0a18"
                + "0200" + "0328" + "020300262a"
                + "0400" + "0028" + "f0ff"
                + "0500" + "0328" + "080600f1ff"
                + "0700" + "0328" + "100800f3ff"
                + "0900" + "0229"
                + "0a00" + "0328" + "040b00f4ff")
        #expect(db.databaseHash == Array(SHA256.hash(db.databaseHashInput).prefix(16)))
    }

    @Test func theHashChangesWithTheLayoutAndNotWithValues() {
        let base = Self.databaseWithGATTService()
        var valuesChanged = base
        valuesChanged.setValue(Array("9.9.9".utf8), at: base.valueHandle(service: BluetoothUUID(0x180A), characteristic: BluetoothUUID(0x2A26)) ?? 0)
        #expect(valuesChanged.value(base.valueHandle(service: BluetoothUUID(0x180A), characteristic: BluetoothUUID(0x2A26)) ?? 0) == Array("9.9.9".utf8))
        #expect(valuesChanged.databaseHash == base.databaseHash)
        #expect(Self.databaseWithGATTService(extra: true).databaseHash != base.databaseHash)
        #expect(Self.databaseWithGATTService(longUUIDs: true).databaseHash != base.databaseHash)
        // The Database Hash characteristic carries it.
        var server = ATTServer(database: base)
        let r = server.receive(b("08 0100 ffff 2a2b")).response ?? []
        #expect(r.count == 2 + 2 + 16)
        #expect(Array(r.suffix(16)) == base.databaseHash)
    }

    @Test func sigUUIDsDeclaredInTheir128BitFormAreFoundOnlyByTheirLongValue() {
        var server = ATTServer(database: Self.databaseWithGATTService(longUUIDs: true))
        _ = server.receive(b("02 f700"))
        // Find By Type Value with the 16-bit 180A: nothing; with its 128-bit form: the group.
        #expect(server.receive(b("06 0100 ffff 0028 0a18")).response?.hexString == "010601000a")
        let long180A = BluetoothUUID(0x180A).uuid128.reversed().map { $0 }
        #expect(server.receive([0x06, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28] + long180A).response?.count == 5)
        // Characteristic declarations carry 19 bytes; Find Information lists values in the 128-bit format.
        let decl = server.receive(b("08 0100 ffff 0328")).response ?? []
        #expect(decl.count > 2 && decl[1] == 2 + 19)
        let info = server.receive(b("04 0300 0300")).response ?? []
        #expect(info.first == 0x05 && info.count > 1 && info[1] == 0x02)
        // Read By Type compares types in 128-bit form: the 16-bit 2B2A finds the long-declared hash.
        #expect(server.receive(b("08 0100 ffff 2a2b")).response?.count == 20)
    }

    @Test func clientSupportedFeaturesBitsCanBeSetButNotCleared() {
        var server = ATTServer(database: Self.databaseWithGATTService())
        let csf = Self.databaseWithGATTService().valueHandle(service: .genericAttribute, characteristic: .clientSupportedFeatures) ?? 0
        let h = [UInt8(csf & 0xFF), UInt8(csf >> 8)]
        #expect(server.receive([0x12] + h + [0x01]).response == [0x13])
        #expect(server.clientFeatures == 0x01)
        #expect(server.receive([0x12] + h + [0x00]).response == [0x01, 0x12] + h + [0x13])
        #expect(server.receive([0x12] + h + [0x05]).response == [0x13])
        #expect(server.clientFeatures == 0x05)
    }

    @Test func aRobustCachingClientIsRefusedAfterAChangeUntilItReadsTheHash() {
        let old = Self.databaseWithGATTService()
        let new = Self.databaseWithGATTService(extra: true)
        var server = ATTServer(database: old)
        let csf = old.valueHandle(service: .genericAttribute, characteristic: .clientSupportedFeatures) ?? 0
        let sc = old.valueHandle(service: .genericAttribute, characteristic: .serviceChanged) ?? 0
        let scCCCD = old.cccdHandle(forValue: sc) ?? 0
        #expect(server.receive([0x12, UInt8(csf), 0x00, 0x01]).response == [0x13])
        #expect(server.receive([0x12, UInt8(scCCCD), 0x00, 0x02, 0x00]).response == [0x13])
        let indication = server.replaceDatabase(new)
        #expect(indication == [0x1D, UInt8(sc), 0x00, 0x01, 0x00, 0xFF, 0xFF])
        #expect(!server.isChangeAware)
        // Handle requests are refused, not executed.
        #expect(server.receive(b("12 1000 01")).response?.hexString == "0112100012")
        #expect(server.receive(b("0a 0700")).response?.hexString == "010a070012")
        #expect(server.receive(b("52 1000 01")).response == nil)
        // Discovery of declarations still works; reading the hash makes the client aware.
        #expect(server.receive(b("08 0100 ffff 0328")).response?.first == 0x09)
        let hash = server.receive(b("08 0100 ffff 2a2b")).response ?? []
        #expect(Array(hash.suffix(16)) == new.databaseHash)
        #expect(server.isChangeAware)
        #expect(server.receive(b("0a 0700")).response?.first == 0x0B)
    }

    @Test func aClientWithoutRobustCachingIsNotRefused() {
        var server = ATTServer(database: Self.databaseWithGATTService())
        #expect(server.replaceDatabase(Self.databaseWithGATTService(extra: true)) == nil)
        #expect(server.isChangeAware)
        #expect(server.receive(b("0a 0700")).response?.first == 0x0B)
    }
}

private func b(_ hex: String) -> [UInt8] {
    guard let v = [UInt8](hex: hex) else { preconditionFailure("bad hex in the test itself: \(hex)") }
    return v
}
