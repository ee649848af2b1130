import Testing
@testable import BLE

@Suite struct GATTSurveyTests {
    /// A peripheral on an in-memory link, answering with a real `ATTServer`.
    static func serve(_ database: GATTDatabase) -> (InMemoryLink, Task<Void, Never>) {
        let link = InMemoryLink(peer: BluetoothAddress(value: 0xC05E_0000_0001), adapterID: "test")
        let device = link.device
        let task = Task {
            var server = ATTServer(database: database)
            for await pdu in device.incoming {
                let (response, _) = server.receive(pdu)
                if let response { device.send(response) }
                device.consumed()
            }
        }
        return (link, task)
    }

    @Test func everyServiceCharacteristicDescriptorAndReadableValueIsListed() async throws {
        let long = (0..<300).map { UInt8(truncatingIfNeeded: $0) }
        let db = GATTDatabase(services: [
            .init(uuid: BluetoothUUID(0x180A), characteristics: [
                .init(uuid: BluetoothUUID(0x2A26), properties: [.read], value: Array("2.4.1".utf8)),
                .init(uuid: BluetoothUUID(0x2A25), properties: [.read], value: long),
            ]),
            .init(uuid: BluetoothUUID(0xFFF0), characteristics: [
                .init(uuid: BluetoothUUID(0xFFF1), properties: [.write]),
                .init(uuid: BluetoothUUID(0xFFF3), properties: [.notify]),
            ]),
        ])
        let (link, server) = Self.serve(db)
        defer { server.cancel() }
        let survey = try await GATTSurvey.run(on: link, preferredMTU: 64)
        await link.disconnect()
        #expect(survey.mtu == 64)
        let services = survey.services.map(\.service.uuid)
        #expect(services.contains(BluetoothUUID(0x180A)) && services.contains(BluetoothUUID(0xFFF0)))
        let info = try #require(survey.services.first { $0.service.uuid == BluetoothUUID(0x180A) })
        #expect(info.characteristics.map(\.characteristic.uuid) == [BluetoothUUID(0x2A26), BluetoothUUID(0x2A25)])
        #expect(info.characteristics[0].value == .success(Array("2.4.1".utf8)))
        // A value longer than the MTU is read to its end with Read Blob.
        #expect(info.characteristics[1].value == .success(long))
        let custom = try #require(survey.services.first { $0.service.uuid == BluetoothUUID(0xFFF0) })
        #expect(custom.characteristics[0].value == nil, "not readable: not read")
        #expect(custom.characteristics[1].descriptors.map(\.uuid) == [.clientCharacteristicConfiguration])
        #expect(custom.characteristics[1].characteristic.properties == [.notify])
    }
}

/// `GATTClient.readByType` (Read Using Characteristic UUID for any type): what a protocomm client uses to
/// find every endpoint's User Description at once.
@Suite struct ReadByTypeTests {
    @Test func everyDescriptionOfAServiceComesBackWithItsHandleLongOnesReadWhole() async throws {
        let long = String(repeating: "x", count: 80)
        let names = ["prov-session", "prov-config", long, "proto-ver"]
        let db = GATTDatabase(services: [
            .init(uuid: BluetoothUUID(0x180A), characteristics: [
                .init(uuid: BluetoothUUID(0x2A26), properties: [.read], value: Array("2.4.1".utf8),
                      descriptors: [(BluetoothUUID(0x2901), Array("elsewhere".utf8))]),
            ]),
            .init(uuid: BluetoothUUID(0xFF00), characteristics: names.enumerated().map { i, name in
                .init(uuid: BluetoothUUID(UInt16(0xFF51 + i)), properties: [.read, .write], descriptors: [(BluetoothUUID(0x2901), Array(name.utf8))])
            } + [.init(uuid: BluetoothUUID(0xFF60), properties: [.notify])]),
        ])
        let (link, server) = GATTSurveyTests.serve(db)
        defer { server.cancel() }
        let att = ATTClient(bearer: link.bearer, transactionTimeout: .seconds(5), disconnectReason: { await link.waitForDisconnect() }) { _ in }
        await att.start()
        _ = try await att.exchangeMTU(preferred: 48)
        let gatt = GATTClient(att: att, discovery: .targeted)
        let service = try await gatt.service(BluetoothUUID(0xFF00))
        let found = try await gatt.readByType(BluetoothUUID(0x2901), in: ATTHandleRange(start: service.startHandle, end: service.endHandle))
        // Only this service's descriptions, in handle order, the 80-byte one whole (MTU 48 cuts it at 44).
        #expect(found.map { String(decoding: $0.value, as: UTF8.self) } == names)
        let characteristics = try await gatt.discoverCharacteristics(of: service)
        for (c, d) in zip(characteristics, found) {
            #expect(d.handle > c.valueHandle && d.handle <= c.endHandle, "each description lies in its characteristic's definition")
        }
        // A range with none: no entries, no error.
        let none = try await gatt.readByType(BluetoothUUID(0x2901), in: ATTHandleRange(start: characteristics[4].valueHandle, end: service.endHandle))
        #expect(none.isEmpty)
        await link.disconnect()
    }
}
