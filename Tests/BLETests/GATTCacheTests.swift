import Testing
@testable import BLE

private let dis = BluetoothUUID(0x180A)
private let serialUUID = BluetoothUUID(0x2A25)
private let fwUUID = BluetoothUUID(0x2A26)
private let manufacturer = BluetoothUUID(0x2A29)
private let fff0 = BluetoothUUID(0xFFF0)
private let fff1 = BluetoothUUID(0xFFF1)
private let fff2 = BluetoothUUID(0xFFF2)
private let fff3 = BluetoothUUID(0xFFF3)
private let limit = Duration.seconds(5)

private func address(_ n: UInt64) -> BluetoothAddress { BluetoothAddress(value: 0xC0FFEE000000 + n) }

private func session(_ device: TestPeripheral, _ central: FakeCentral, _ cache: GATTCache?) -> Session {
    Session(central: central, peer: device.address,
            options: SessionOptions(connect: ConnectOptions(timeout: .seconds(2), preferredMTU: 247), reconnect: .disabled,
                                    attTimeout: .seconds(5), gattCache: cache, gattCacheKey: "sensor-v2"))
}

/// The opcodes of the requests a device received (responses, commands and confirmations left out).
private func requests(_ device: TestPeripheral) -> [UInt8] {
    device.received.items.compactMap { $0.first.flatMap { ATTOpcode($0).isRequest ? $0 : nil } }
}

/// What a provisioning session does: serial, subscribe to the acks, a config write, the state. Returns
/// the acks' stream: dropping it unsubscribes (a CCCD write), so a test counting the device's requests
/// keeps it until the session is closed.
@discardableResult
private func provision(_ s: Session, serial: String) async throws -> NotificationStream {
    try await s.connect()
    #expect(try await s.read(service: dis, characteristic: serialUUID, timeout: limit) == Array(serial.utf8))
    let acks = try await s.notifications(service: fff0, characteristic: fff3, timeout: limit)
    try await s.write(service: fff0, characteristic: fff1, value: [0x01, 0xAA], withResponse: true, timeout: limit)
    #expect(try await s.read(service: fff0, characteristic: fff2, timeout: limit) == [0])
    return acks
}

/// The writes a device received, as (handle, value).
private func writes(_ device: TestPeripheral) -> [(UInt16, [UInt8])] {
    device.events.items.compactMap { e in
        if case .wrote(let h, let v, _) = e.event { return (h, v) }
        return nil
    }
}

@Suite struct GATTCacheTests {
    @Test func aSecondDeviceWithTheSameDatabaseHashSkipsDiscovery() async throws {
        let one = TestPeripheral(address: address(1), database: TestPeripheral.sensorV2WithHash(serial: "SN-0001"))
        let two = TestPeripheral(address: address(2), database: TestPeripheral.sensorV2WithHash(serial: "SN-0002"))
        let central = FakeCentral([one, two])
        let cache = GATTCache()
        let first = session(one, central, cache)
        let acksOne = try await provision(first, serial: "SN-0001")
        let second = session(two, central, cache)
        let acksTwo = try await provision(second, serial: "SN-0002")
        await first.disconnect()
        await second.disconnect()
        withExtendedLifetime((acksOne, acksTwo)) {}

        // No discovery on the second device: MTU, the hash, robust caching, read, CCCD, write, read.
        #expect(requests(two) == [0x02, 0x08, 0x12, 0x0A, 0x12, 0x12, 0x0A])
        #expect(two.received.items[1] == [0x08, 0x01, 0x00, 0xFF, 0xFF, 0x2A, 0x2B])
        #expect(await second.roundTrips == 7)
        #expect(await first.roundTrips > 7)
        // The writes landed where the second device keeps them.
        let csf = try #require(two.valueHandle(.genericAttribute, .clientSupportedFeatures))
        let control = try #require(two.valueHandle(fff0, fff1))
        #expect(writes(two).map(\.0) == [csf, control])
        #expect(writes(two).map(\.1) == [[0x01], [0x01, 0xAA]])
        #expect(two.cccdWrites(fff0, fff3).map(\.value) == [1])
        #expect(cache.statistics == GATTCache.Statistics(hits: 1, misses: 1, distrusted: 0))
    }

    @Test func withoutADatabaseHashEveryDeviceDiscoversItsOwnHandles() async throws {
        let one = TestPeripheral(address: address(1), database: TestPeripheral.sensorV2(serial: "SN-0001"))
        let two = TestPeripheral(address: address(2), database: TestPeripheral.sensorV2(serial: "SN-0002"))
        let central = FakeCentral([one, two])
        let cache = GATTCache()
        try await provision(session(one, central, cache), serial: "SN-0001")
        try await provision(session(two, central, cache), serial: "SN-0002")
        // The first device is asked for a hash (it has none); the second is not, and discovers.
        #expect(requests(one).prefix(2) == [0x02, 0x08])
        #expect(one.received.items[1] == [0x08, 0x01, 0x00, 0xFF, 0xFF, 0x2A, 0x2B])
        #expect(requests(two).filter { $0 == 0x06 }.count == 2)
        #expect(!two.received.items.contains([0x08, 0x01, 0x00, 0xFF, 0xFF, 0x2A, 0x2B]))
        #expect(cache.statistics == GATTCache.Statistics())
        #expect(cache.hints(for: "sensor-v2").hasDatabaseHash == false)
    }

    @Test func aServiceFoundOnlyByIts128BitFormIsAskedForThatWayFirstOnTheNextDevice() async throws {
        let one = TestPeripheral(address: address(1), database: TestPeripheral.sensorV2(serial: "SN-0001", longUUIDs: true))
        let two = TestPeripheral(address: address(2), database: TestPeripheral.sensorV2(serial: "SN-0002", longUUIDs: true))
        let central = FakeCentral([one, two])
        let cache = GATTCache()
        try await provision(session(one, central, cache), serial: "SN-0001")
        try await provision(session(two, central, cache), serial: "SN-0002")
        let findByValue = { (d: TestPeripheral) in d.received.items.filter { $0.first == 0x06 }.map { $0.count } }
        // 16-bit then 128-bit for each service on the first device; 128-bit at once on the second.
        #expect(findByValue(one) == [9, 23, 9, 23])
        #expect(findByValue(two) == [23, 23])
        #expect(cache.hints(for: "sensor-v2").longForm == [dis, fff0])
    }

    @Test func aServerWhoseHashLiesIsCaughtByTheRefusedWriteAndTheWriteGoesWhereItBelongs() async throws {
        let honest = TestPeripheral.sensorV2WithHash(serial: "SN-0001")
        // FFF9 (read only) first in FFF0: FFF1's cached value handle is FFF9's value here. Its hash is forged.
        var forged = TestPeripheral.sensorV2WithHash(serial: "SN-0002", insertFirst: [.read])
        let hashHandle = try #require(forged.valueHandle(service: .genericAttribute, characteristic: .databaseHash))
        forged.setValue(honest.databaseHash, at: hashHandle)
        let one = TestPeripheral(address: address(1), database: honest)
        let two = TestPeripheral(address: address(2), database: forged)
        let three = TestPeripheral(address: address(3), database: TestPeripheral.sensorV2WithHash(serial: "SN-0003"))
        let central = FakeCentral([one, two, three])
        let cache = GATTCache()
        try await provision(session(one, central, cache), serial: "SN-0001")
        try await provision(session(two, central, cache), serial: "SN-0002")
        let oldControl = try #require(one.valueHandle(fff0, fff1))
        let control = try #require(two.valueHandle(fff0, fff1))
        #expect(oldControl != control)
        // The cached CCCD handle was refused (not a CCCD there), the layout dropped, everything found
        // again: the config write reached FFF1 and nothing was written at the old handle.
        #expect(writes(two).contains { $0.0 == control && $0.1 == [0x01, 0xAA] })
        #expect(!writes(two).contains { $0.0 == oldControl })
        #expect(cache.statistics.distrusted == 1)
        // The next device with that hash discovers for itself.
        try await provision(session(three, central, cache), serial: "SN-0003")
        #expect(requests(three).contains(0x06))
    }

    @Test func aDatabaseThatChangesUnderARobustCachingClientRefusesTheStaleWrite() async throws {
        let device = TestPeripheral(address: address(1), database: TestPeripheral.sensorV2WithHash())
        let central = FakeCentral([device])
        let s = session(device, central, GATTCache())
        try await provision(s, serial: "SN-0001")
        let oldControl = try #require(device.valueHandle(fff0, fff1))
        // The firmware lays itself out again: FFF9 (writable!) now sits where FFF1 was. No indication.
        let moved = TestPeripheral.sensorV2WithHash(insertFirst: [.read, .write])
        await device.replaceDatabase(moved, indicate: false)
        let control = try #require(moved.valueHandle(service: fff0, characteristic: fff1))
        try await s.write(service: fff0, characteristic: fff1, value: [0x02], withResponse: true, timeout: limit)
        // Refused with Database Out Of Sync at the old handle, then the hash read again, FFF0 found again,
        // and the write went to FFF1's new handle. FFF9 got nothing.
        #expect(device.received.items.contains { $0 == [0x12, UInt8(oldControl), 0x00, 0x02] })
        #expect(await device.value(at: control) == [0x02])
        #expect(await device.value(at: oldControl) == [])
        #expect(!writes(device).contains { $0.0 == oldControl && $0.1 == [0x02] })
        await s.disconnect()
    }

    @Test func aServiceChangedIndicationRebindsTheSubscriptions() async throws {
        let device = TestPeripheral(address: address(1), database: TestPeripheral.sensorV2WithHash())
        let central = FakeCentral([device])
        let s = session(device, central, GATTCache())
        try await s.connect()
        let acks = try await s.notifications(service: fff0, characteristic: fff3, timeout: limit)
        let moved = TestPeripheral.sensorV2WithHash(insertFirst: [.read])
        await device.replaceDatabase(moved, indicate: false)
        #expect(await device.indicateServiceChanged())
        // The session finds FFF3 again and writes its new CCCD.
        let newAck = try #require(moved.valueHandle(service: fff0, characteristic: fff3))
        try await device.events.wait(within: limit, "the new CCCD") { items in
            TestPeripheral.cccdWrites(items, valueHandle: newAck).contains { $0.value == 1 }
        }
        // A notification at the new handle reaches the stream.
        let value: [UInt8]? = try await withDeadline(limit, operation: "ack") {
            _ = await device.notify(service: fff0, characteristic: fff3, [0x01, 0x00])
            var it = acks.makeAsyncIterator()
            return try await it.next()
        }
        #expect(value == [0x01, 0x00])
        await s.disconnect()
    }

    @Test func severalReadsCostOneRequestAndEachKeepsItsOwnResult() async throws {
        let device = TestPeripheral(address: address(1), database: TestPeripheral.sensorV2WithHash(serverFeatures: 0x01))
        let s = session(device, FakeCentral([device]), GATTCache())
        try await s.connect()
        let paths = [manufacturer, serialUUID, fwUUID, BluetoothUUID(0x2A99)].map { CharacteristicPath(service: dis, characteristic: $0) }
        let results = try await s.read(paths, timeout: limit)
        #expect(try results[0].get() == Array("Acme".utf8))
        #expect(try results[1].get() == Array("SN-0001".utf8))
        #expect(try results[2].get() == Array("2.4.1".utf8))
        #expect(throws: BLEError.attributeNotFound("characteristic 2A99 in service 180A")) { try results[3].get() }
        // Server Supported Features said EATT (so the request is supported): one read of it, then one request.
        let ssf = try #require(device.valueHandle(.genericAttribute, .serverSupportedFeatures))
        #expect(device.received.items.filter { $0 == [0x0A, UInt8(ssf), 0x00] }.count == 1)
        #expect(device.received.items.filter { $0.first == 0x20 }.count == 1)
        #expect(device.received.items.filter { $0.first == 0x0A && $0 != [0x0A, UInt8(ssf), 0x00] }.isEmpty)
        await s.disconnect()
    }

    @Test func firmwareWithoutReadMultipleVariableIsReadOneByOneAndThatIsRemembered() async throws {
        let one = TestPeripheral(address: address(1), database: TestPeripheral.sensorV2WithHash(serial: "SN-0001"),
                                 supportsReadMultipleVariable: false)
        let two = TestPeripheral(address: address(2), database: TestPeripheral.sensorV2WithHash(serial: "SN-0002"),
                                 supportsReadMultipleVariable: false)
        let central = FakeCentral([one, two])
        let cache = GATTCache()
        let paths = [serialUUID, fwUUID].map { CharacteristicPath(service: dis, characteristic: $0) }
        for (device, serial) in [(one, "SN-0001"), (two, "SN-0002")] {
            let s = session(device, central, cache)
            try await s.connect()
            #expect(try await s.read(paths, timeout: limit).map { try $0.get() } == [Array(serial.utf8), Array("2.4.1".utf8)])
            #expect(try await s.read(paths, timeout: limit).map { try $0.get() } == [Array(serial.utf8), Array("2.4.1".utf8)])
            await s.disconnect()
        }
        // Tried once on the first device (Request Not Supported), never again.
        #expect(one.received.items.filter { $0.first == 0x20 }.count == 1)
        #expect(two.received.items.filter { $0.first == 0x20 }.isEmpty)
        #expect(two.received.items.filter { $0.first == 0x0A }.count == 4)
    }
}
