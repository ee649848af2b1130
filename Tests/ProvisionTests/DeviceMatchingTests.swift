import BLE
import BLESimulator
import Engine
import EngineTestSupport
import Foundation
import Testing
import Workflow

/// A device is provisioned at its own address, never at the address of another unit that advertises its
/// name. (The engine's DeviceAgent.scan; the test lives here because it drives a whole run.)
@Suite struct DeviceMatchingTests {
    @Test func aUnitAdvertisingAnotherDevicesNameIsNeverProvisionedInItsPlace() async throws {
        let line = try TestLine()
        defer { line.remove() }
        // SN-0001 is not on the fixture (it does not advertise); another unit next to it advertises
        // SN-0001's name from its own address. The workflow scans by name.
        let loaded = try line.load(try line.write(count: 2, faults: [1: "{ faults: { no_advertise: true } }"]), limit: "SN-0001")
        #expect(loaded.devices.first?.address == BluetoothAddress("C0:5E:00:00:00:01"))
        let model = try DeviceModel.load(path: line.directory + "/models/sensor-v2.yaml")
        var specs = loaded.inventory.devices.map {
            SimulatedDeviceSpec(id: $0.id, name: $0.name, address: $0.address, variables: $0.vars, overrides: $0.simulator)
        }
        specs.append(SimulatedDeviceSpec(id: "IMPOSTOR", name: "SNS-0001", address: BluetoothAddress("C0:5E:00:00:00:99"),
                                         variables: loaded.inventory.devices[0].vars))
        let sim = try SimulatedCentral(models: [model.name: model], devices: specs, defaultModel: model.name,
                                       inventoryFile: loaded.inventory.path, options: SimulatorOptions(seed: 1, latencyScale: 0))
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [sim], options: line.options())
        let dump = await sim.dump()
        await sim.close()
        let record = try #require(report.devices.first)
        #expect(record.outcome == .failed)
        #expect(record.error?.kind == .notFound)
        #expect(record.address == "C0:5E:00:00:00:01")
        let impostor = try #require(dump.device("IMPOSTOR"))
        #expect(impostor.connections == 0, "the other unit was connected to")
        #expect(impostor.commits == 0 && impostor.config == nil, "the other unit was provisioned")
    }

    @Test func withoutAnInventoryAddressTheNameStillFindsTheDevice() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 2)
        // The same line with the addresses left out: the name alone finds each unit.
        let text = try String(contentsOfFile: paths.inventory, encoding: .utf8)
            .replacingOccurrences(of: #"address: "C0:5E:00:00:00:01", "#, with: "")
        try Data(text.utf8).write(to: URL(fileURLWithPath: paths.inventory))
        let loaded = try line.load(paths)
        #expect(loaded.devices[0].address == nil)
        let sim = try line.simulator(loaded)
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [sim], options: line.options())
        await sim.close()
        #expect(report.devices.allSatisfy { $0.outcome == .succeeded }, "\(report.devices.map { $0.error?.message ?? "" })")
    }
}
