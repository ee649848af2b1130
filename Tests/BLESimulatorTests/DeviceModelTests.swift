import BLE
import Testing
@testable import BLESimulator

@Suite struct DeviceModelTests {
    static let tinyServices = """
        services:
          - uuid: FFF0
            characteristics:
              - { uuid: FFF1, properties: [write] }
        """

    func error(_ text: String) -> String? {
        do {
            _ = try DeviceModel.parse(Array(text.utf8), file: "bad.yaml")
            return nil
        } catch {
            return error.description
        }
    }

    func overrideError(_ text: String) throws -> String? {
        do {
            _ = try Fixtures.central([try Fixtures.spec("X-1", text)])
            return nil
        } catch let e as SimulatorError {
            return e.description
        }
    }

    @Test func theSensorV2ModelFileDescribesTheReferenceDevice() throws {
        let m = try Fixtures.model()
        #expect(m.name == "sensor-v2")
        #expect(m.services.map(\.uuid) == [BluetoothUUID(0x180A), BluetoothUUID(0x180F), BluetoothUUID(0xFFF0), .genericAttribute])
        #expect(m.services.last?.characteristics.map(\.uuid) == [.serviceChanged, .clientSupportedFeatures, .databaseHash, .serverSupportedFeatures])
        #expect(m.advertising.interval == LatencyRange(.milliseconds(20), .milliseconds(100)))
        #expect(m.advertising.services == [BluetoothUUID(0xFFF0)])
        #expect(m.latency.connect == LatencyRange(.milliseconds(20), .milliseconds(80)))
        #expect(m.latency.ack == LatencyRange(.milliseconds(5), .milliseconds(50)))
        #expect(m.maxMTU == 247)
        #expect(m.defaults["firmware"] == "2.4.1")
        let b = try #require(m.behaviour)
        #expect(b.control.characteristic == BluetoothUUID(0xFFF1))
        #expect(b.blob?.characteristic == BluetoothUUID(0xFFF4))
        #expect(b.commands.keys.sorted() == [1, 2, 3, 4])
        #expect(b.commands[1]?.length == 1...200)
        #expect(b.commands[2]?.state == 2)
        #expect(m.faults == FaultSettings())
    }

    @Test func aMisspeltKeyNamesItsPositionAndTheLikelyKey() {
        #expect(error("model: tiny\nadvertising:\n  intervall: [20ms, 100ms]\n" + Self.tinyServices)
                == "bad.yaml:3:3: unknown key `intervall` in advertising (did you mean `interval`?)")
        #expect(error("modle: tiny\n" + Self.tinyServices)
                == "bad.yaml:1:1: unknown key `modle` in a device model (did you mean `model`?)")
    }

    @Test func durationsNeedUnitsAndRangesAnOrder() {
        #expect(error("model: tiny\nlatency:\n  connect: [20, 80ms]\n" + Self.tinyServices)
                == "bad.yaml:3:13: duration `20` has no unit (write a unit: `20ms`, `20s` or `20m`)")
        #expect(error("model: tiny\nlatency:\n  ack: [50ms, 5ms]\n" + Self.tinyServices)
                == "bad.yaml:3:15: latency.ack: the low end is above the high end")
    }

    @Test func aConnectionIntervalIsOneTheSpecAllows() throws {
        #expect(error("model: tiny\nlatency:\n  connection_interval: 5ms\n" + Self.tinyServices)
                == "bad.yaml:3:24: latency.connection_interval must lie within 7.5ms...4s (Vol 6 Part B 4.5.1)")
        let m = try DeviceModel.parse(Array(("model: tiny\nlatency:\n  connection_interval: [7.5ms, 50ms]\n" + Self.tinyServices).utf8),
                                      file: "ok.yaml")
        #expect(m.latency.connectionInterval == LatencyRange(.microseconds(7_500), .milliseconds(50)))
        #expect(try Fixtures.model().latency.connectionInterval == nil)
    }

    @Test func unknownPropertiesActionsAndCharacteristicsAreRefused() {
        #expect(error("model: tiny\nservices:\n  - uuid: FFF0\n    characteristics:\n      - { uuid: FFF1, properties: [wirte] }\n")
                == "bad.yaml:5:36: unknown property `wirte` (did you mean `write`?)")
        let behaviour = "model: tiny\n" + Self.tinyServices + "\nbehaviour:\n  type: command-ack\n  control: FFF9\n  ack: FFF1\n"
        #expect(error(behaviour) == "bad.yaml:8:12: control characteristic \(BluetoothUUID(0xFFF9)) is not in `services:`")
        let action = "model: tiny\n" + Self.tinyServices
            + "\nbehaviour:\n  type: command-ack\n  control: FFF1\n  ack: FFF1\n  commands:\n    - { opcode: \"01\", action: comit }\n"
        #expect(error(action) == "bad.yaml:11:31: unknown action `comit` (did you mean `commit`?)")
    }

    @Test func faultDefaultsAreCheckedInTheModel() {
        #expect(error("model: tiny\nfaults:\n  drop: 1.5\n" + Self.tinyServices)
                == "bad.yaml:3:9: drop must be between 0 and 1, not 1.5")
        #expect(error("model: tiny\nfaults:\n  mtu_cap: 12\n" + Self.tinyServices)
                == "bad.yaml:3:12: mtu_cap must be between 23 and 517, not 12")
    }

    @Test func valueTemplatesMustResolve() {
        #expect(error("model: tiny\nservices:\n  - uuid: FFF0\n    characteristics:\n      - { uuid: FFF1, properties: [read], value: \"${serial}\" }\n")
                == "bad.yaml:5:9: unknown variable `${serial}`; define it under `defaults:` or per device")
        #expect(error("model: tiny\nservices:\n  - uuid: FFF0\n    characteristics:\n      - { uuid: FFF1, properties: [read], value: { hex: zz } }\n")
                == "bad.yaml:5:9: `zz` is not hex")
    }

    @Test func yamlSyntaxErrorsKeepTheirPosition() {
        let e = error("model: tiny\nservices: [\n")
        #expect(e?.hasPrefix("bad.yaml:") == true)
        #expect(error("") == "bad.yaml:1:1: the model file is empty")
        #expect(error("model: tiny\n") == "bad.yaml:1:1: the model has no `services:` (list the GATT services the device exposes)")
    }

    @Test func perDeviceOverridesAreValidatedWithTheirInventoryPosition() throws {
        #expect(try overrideError("faults:\n  conect_fail: 0.5\n")
                == "inventory.yaml:2:3: unknown key `conect_fail` in faults (did you mean `connect_fail`?)")
        #expect(try overrideError("faults:\n  busy_ack: lots\n")
                == "inventory.yaml:2:13: busy_ack must be a probability between 0 and 1 (e.g. `0.05`)")
        #expect(try overrideError("firmwre: \"1.9.0\"\n")
                == "inventory.yaml:1:1: unknown key `firmwre` in `simulator` (model sensor-v2 has no such default) (did you mean `firmware`?)")
        #expect(try overrideError("model: sensor-v3\n")
                == "inventory.yaml:1:8: device X-1: no device model named `sensor-v3` (known models: sensor-v2)")
        #expect(try overrideError("battery: \"300\"\n")
                == "inventory.yaml:1:1: device X-1: `300` is not a byte value 0-255")
    }

    @Test func aDeviceMayNameItsModelByFile() throws {
        let central = try Fixtures.central([try Fixtures.spec("M-1", "model: models/sensor-v2.yaml")])
        #expect(central.devices.first?.model.name == "sensor-v2")
    }

    @Test func overridesLayerOnTheModelsFaults() throws {
        let central = try Fixtures.central([
            try Fixtures.spec("O-1", "faults: { drop: 0.25, slow: 3, mtu_cap: 100 }\nbattery: \"12\""),
            try Fixtures.spec("O-2"),
        ])
        let o1 = try #require(central.devices.first { $0.id == "O-1" })
        #expect(o1.faults.drop == 0.25)
        #expect(o1.faults.slow == 3)
        #expect(o1.faults.mtuCap == 100)
        #expect(o1.variable("battery") == "12")
        #expect(central.devices.first { $0.id == "O-2" }?.faults == FaultSettings())
    }

    @Test func devicesWithoutAnAddressGetAStableStaticRandomOne() throws {
        let a = SimulatedDeviceSpec.derivedAddress(for: "SN-0001")
        #expect(a == SimulatedDeviceSpec.derivedAddress(for: "SN-0001"))
        #expect(a != SimulatedDeviceSpec.derivedAddress(for: "SN-0002"))
        #expect(a.kind == .random)
        #expect(a.value >> 46 == 0b11)
        let given = try #require(BluetoothAddress("C0:11:22:33:44:55"))
        let central = try Fixtures.central([SimulatedDeviceSpec(id: "A", address: given), try Fixtures.spec("B")])
        #expect(central.address(of: "A") == given)
        #expect(central.address(of: "B") == SimulatedDeviceSpec.derivedAddress(for: "B"))
    }
}
