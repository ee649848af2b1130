import Testing
@testable import BLE

@Suite struct ATTServerTests {
    static func database() -> GATTDatabase {
        GATTDatabase(services: [
            .init(uuid: BluetoothUUID(0x180A), characteristics: [
                .init(uuid: BluetoothUUID(0x2A26), properties: [.read], value: Array("2.4.1".utf8)),
            ]),
            .init(uuid: BluetoothUUID(0xFFF0), characteristics: [
                .init(uuid: BluetoothUUID(0xFFF1), properties: [.write]),
                .init(uuid: BluetoothUUID(0xFFF3), properties: [.notify]),
                .init(uuid: BluetoothUUID(0xFFF4), properties: [.writeWithoutResponse]),
            ]),
        ])
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
}
