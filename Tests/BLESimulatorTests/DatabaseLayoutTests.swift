import BLE
import BLESecurity
import Testing
@testable import BLESimulator

/// The shared layout gives every connection the database it would get if laid out on its own.
@Suite(.timeLimit(.minutes(1)))
struct DatabaseLayoutTests {
    /// The database laid out from scratch for `device`: every value rendered for it, the state value,
    /// the layout faults applied, per-value security, the Database Hash as AES-CMAC.
    private func laidOutAlone(_ device: VirtualDevice) -> GATTDatabase {
        let behaviour = device.model.behaviour
        let services = device.model.services.map { s in
            GATTDatabase.ServiceSpec(uuid: s.uuid, characteristics: s.characteristics.map { c in
                let path = CommandBehaviour.Path(service: s.uuid, characteristic: c.uuid)
                let value = path == behaviour?.state ? [device.stateValue] : ((try? device.value(c).get()) ?? [])
                if device.faults.notifyUndeclared, path == behaviour?.ack {
                    return .init(uuid: c.uuid, properties: c.properties.subtracting([.notify, .indicate]), value: value, hasCCCD: false,
                                 security: c.security)
                }
                return .init(uuid: c.uuid, properties: c.properties, value: value, security: c.security)
            })
        }
        return GATTDatabase(services: services, longUUIDs: device.faults.longUUIDs, hash: SMPCrypto.databaseHash)
    }

    @Test func everyDeviceGetsTheDatabaseItWouldGetLaidOutAloneWhateverItsLayoutFaults() throws {
        let central = try Fixtures.central([
            try Fixtures.spec("DL-1"),
            try Fixtures.spec("DL-2", "{ firmware: \"1.9.0\", battery: \"12\" }"),
            try Fixtures.spec("DL-3", "faults: { long_uuids: true }"),
            try Fixtures.spec("DL-4", "faults: { notify_undeclared: true }"),
            try Fixtures.spec("DL-5", "faults: { long_uuids: true, notify_undeclared: true }"),
        ])
        for device in central.devices {
            let shared = DeviceConnection.database(for: device)
            let alone = laidOutAlone(device)
            #expect(shared.attributes == alone.attributes, "\(device.id)")
            #expect(shared.databaseHash == alone.databaseHash, "\(device.id)")
        }
        // Per-device values really are the device's own.
        let byID = Dictionary(uniqueKeysWithValues: central.devices.map { ($0.id, $0) })
        let db2 = DeviceConnection.database(for: try #require(byID["DL-2"]))
        let serial = try #require(db2.valueHandle(service: BluetoothUUID(0x180A), characteristic: BluetoothUUID(0x2A25)))
        let firmware = try #require(db2.valueHandle(service: BluetoothUUID(0x180A), characteristic: BluetoothUUID(0x2A26)))
        let battery = try #require(db2.valueHandle(service: BluetoothUUID(0x180F), characteristic: BluetoothUUID(0x2A19)))
        #expect(db2.value(serial) == Array("DL-2".utf8))
        #expect(db2.value(firmware) == Array("1.9.0".utf8))
        #expect(db2.value(battery) == [12])
    }

    @Test func devicesOfOneModelAndLayoutFaultsShareOneLayout() throws {
        let central = try Fixtures.central([
            try Fixtures.spec("DS-1"), try Fixtures.spec("DS-2", "{ firmware: \"3.0.0\" }"),
            try Fixtures.spec("DS-3", "faults: { long_uuids: true }"), try Fixtures.spec("DS-4", "faults: { long_uuids: true }"),
        ])
        let byID = Dictionary(uniqueKeysWithValues: central.devices.map { ($0.id, $0) })
        let d1 = try #require(byID["DS-1"]), d2 = try #require(byID["DS-2"])
        let d3 = try #require(byID["DS-3"]), d4 = try #require(byID["DS-4"])
        #expect(d1.layout === d2.layout)
        #expect(d3.layout === d4.layout)
        #expect(d1.layout !== d3.layout)
    }

    @Test func aNewConnectionShowsTheStateTheDeviceReachedOnTheLastOne() async throws {
        let central = try Fixtures.central([try Fixtures.spec("DT-1")])
        let device = try #require(central.devices.first)
        let state = try #require(device.model.behaviour?.state)
        let before = DeviceConnection.database(for: device)
        let stateHandle = try #require(before.valueHandle(service: state.service, characteristic: state.characteristic))
        #expect(before.value(stateHandle) == [0x00])
        // A commit over a link moves the device to state 02; the next connection's database shows it.
        var client = try await Fixtures.connect(central, "DT-1")
        client.assumeSensorV2Layout()
        _ = try await client.subscribe(0xFFF3)
        let acks = try await client.provision(config: [0x0A, 0x0B], blob: Fixtures.blob)
        #expect(acks.last == [0x02, 0x00])
        await client.link.disconnect()
        let after = DeviceConnection.database(for: device)
        #expect(after.value(stateHandle) == [0x02])
        // The shared layout itself is untouched (the model's initial value).
        #expect(device.layout.database.value(stateHandle) == [0x00])
    }
}
