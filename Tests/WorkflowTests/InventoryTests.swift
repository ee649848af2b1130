import BLE
import Testing
import YAML
@testable import Workflow

@Suite struct InventoryTests {
    func parse(_ text: String, path: String = "dir/inv.yaml") -> (Inventory?, [Diagnostic]) {
        let r = InventoryParser().parse(bytes: Array(text.utf8), path: path)
        return (r.inventory, r.diagnostics)
    }

    @Test func yamlInventoryWithDefaultsSecretsAndSimulator() throws {
        let (inv, d) = parse("""
            simulator: { model: models/sensor-v2.yaml }
            defaults:
              vars: { blob: blobs/a.bin, key: "00" }
            secrets: [key]
            devices:
              - id: SN-1
                address: "c0:5e:00:00:00:01"
                vars: { key: "aabbcc" }
                simulator: { firmware: "1.9.0", faults: { connect_fail: 0.3 } }
              - { id: SN-2, name: SNS-2 }
            """)
        #expect(d.isEmpty)
        let inventory = try #require(inv)
        #expect(inventory.simulatorModel == "dir/models/sensor-v2.yaml")
        #expect(inventory.baseDirectory == "dir")
        #expect(inventory.devices.map(\.id) == ["SN-1", "SN-2"])
        #expect(inventory.devices[0].address == BluetoothAddress("C0:5E:00:00:00:01"))
        #expect(inventory.devices[0].vars == ["blob": "blobs/a.bin", "key": "aabbcc"])
        #expect(inventory.devices[1].vars == ["blob": "blobs/a.bin", "key": "00"])
        #expect(inventory.devices[0].simulator?["firmware"]?.scalar == "1.9.0")
        #expect(inventory.devices[1].simulator == nil)
        #expect(inventory.isSecret("key") && !inventory.isSecret("blob"))
        #expect(inventory.displayValue(of: "key", "aabbcc") == "***")
        #expect(inventory.redact("wrote aabbcc to FFF1", for: inventory.devices[0]) == "wrote *** to FFF1")
        #expect(inventory.devices[0].value(of: "address") == "C0:5E:00:00:00:01")
        #expect(inventory.devices[1].value(of: "name") == "SNS-2")
        #expect(inventory.sha256.count == 64)
    }

    @Test func csvInventoryReadsHeaderAndQuotedCells() throws {
        let (inv, d) = parse("id,address,name,config,note\nSN-1,C0:5E:00:00:00:01,SNS-1,0a0b,\"a, b\"\r\nSN-2,,SNS-2,0c,\"say \"\"hi\"\"\"\n", path: "inv.csv")
        #expect(d.isEmpty)
        let inventory = try #require(inv)
        #expect(inventory.devices.count == 2)
        #expect(inventory.devices[0].vars == ["config": "0a0b", "note": "a, b"])
        #expect(inventory.devices[1].address == nil)
        #expect(inventory.devices[1].vars["note"] == "say \"hi\"")
        #expect(inventory.devices[1].mark == SourceMark(line: 3, column: 1))
    }

    @Test func theExampleCSVAndYAMLInventoriesAgree() throws {
        let yaml = Validator.validate(workflowPath: repositoryRoot + "/workflows/sensor-v2.yaml", inventoryPath: repositoryRoot + "/inventory/line-3.yaml")
        let csv = Validator.validate(workflowPath: repositoryRoot + "/workflows/sensor-v2.yaml", inventoryPath: repositoryRoot + "/inventory/line-3.csv")
        #expect(yaml.isValid && csv.isValid)
        let a = try #require(yaml.inventory).devices.map { [$0.id, $0.address?.description ?? "", $0.name ?? "", $0.vars["config"] ?? "", $0.vars["blob"] ?? ""] }
        let b = try #require(csv.inventory).devices.map { [$0.id, $0.address?.description ?? "", $0.name ?? "", $0.vars["config"] ?? "", $0.vars["blob"] ?? ""] }
        #expect(a == b)
        #expect(a.count == 8)
    }

    @Test func demoLineHasFortyEightDevicesAndItsFaultMix() throws {
        let result = Validator.validate(workflowPath: repositoryRoot + "/workflows/sensor-v2.yaml", inventoryPath: repositoryRoot + "/inventory/demo-line.yaml")
        let inventory = try #require(result.inventory)
        #expect(inventory.devices.count == 48)
        #expect(inventory.devices.filter { $0.simulator != nil }.map(\.id) == ["SN-0007", "SN-0013", "SN-0021", "SN-0029", "SN-0035", "SN-0042"])
        #expect(inventory.simulatorModel?.hasSuffix("inventory/models/sensor-v2.yaml") == true)
    }

    @Test func deviceSimulatorMustBeAMapping() {
        let (inv, d) = parse("devices:\n  - { id: SN-1, name: a, simulator: yes }\n")
        #expect(inv == nil)
        #expect(d.first?.mark == SourceMark(line: 2, column: 37))
    }

    @Test func limitSelectsByIdGlobListAndFile() throws {
        let devices = (1...12).map { InventoryDevice(id: String(format: "SN-%04d", $0), name: "n\($0)", mark: SourceMark(line: $0, column: 1)) }
        #expect(DeviceSelection.select("SN-0003", from: devices).devices.map(\.id) == ["SN-0003"])
        #expect(DeviceSelection.select("SN-001*", from: devices).devices.map(\.id) == ["SN-0010", "SN-0011", "SN-0012"])
        #expect(DeviceSelection.select("SN-0012,SN-000[1-2]", from: devices).devices.map(\.id) == ["SN-0001", "SN-0002", "SN-0012"])
        let dir = try TemporaryDirectory()
        try dir.write("ids.txt", "# line 3 rework\nSN-0005\n\nSN-0007\n")
        #expect(DeviceSelection.select("@ids.txt", from: devices, currentDirectory: dir.path).devices.map(\.id) == ["SN-0005", "SN-0007"])
        let bad = DeviceSelection.select("SN-0099,XX*", from: devices)
        #expect(bad.diagnostics.map(\.message) == ["no device with id `SN-0099` in the inventory", "`XX*` matches no device in the inventory"])
        #expect(bad.diagnostics.map(\.column) == [1, 9])
    }

    @Test func globMatching() {
        #expect(DeviceSelection.glob("SN-00*", matches: "SN-0042"))
        #expect(DeviceSelection.glob("*42", matches: "SN-0042"))
        #expect(DeviceSelection.glob("SN-00?2", matches: "SN-0042"))
        #expect(!DeviceSelection.glob("SN-00?2", matches: "SN-00422"))
        #expect(DeviceSelection.glob("SN-[!1]*", matches: "SN-2"))
        #expect(!DeviceSelection.glob("SN-[!1]*", matches: "SN-1"))
    }

    @Test func diagnosticsRenderAsTextAndJSON() {
        let d = Diagnostic(path: "w.yaml", mark: SourceMark(line: 3, column: 7), message: "unknown key `x`", hint: "did you mean `y`?")
        #expect(d.description == "w.yaml:3:7: error: unknown key `x`\n    hint: did you mean `y`?")
        let json = Diagnostic.json([d])
        #expect(json.contains(#"{"file": "w.yaml", "line": 3, "column": 7, "severity": "error", "message": "unknown key `x`", "hint": "did you mean `y`?"}"#))
        #expect(json.contains(#""valid": false"#))
        let odd = Diagnostic(path: "w.yaml", mark: SourceMark(line: 1, column: 1), message: "a\"b\\\n\u{1}")
        #expect(Diagnostic.json([odd]).contains(#""message": "a\"b\\\n\u0001"}"#))
    }
}

@Suite struct CrossCheckTests {
    @Test func secretValuesAreRedactedInValidationMessages() throws {
        let workflow = try #require(WorkflowParser().parse(bytes: Array("""
            name: t
            steps:
              - connect
              - write: { service: FFF0, characteristic: FFF1, value: { hex: "05${key}" } }
            """.utf8), path: "w.yaml").workflow)
        let inventory = try #require(InventoryParser().parse(bytes: Array("""
            secrets: [key]
            devices:
              - { id: SN-1, name: a, vars: { key: "topsecretzz" } }
            """.utf8), path: "i.yaml").inventory)
        let d = Validator.check(workflow, against: inventory, devices: inventory.devices)
        #expect(d.count == 1)
        #expect(d.first?.message.contains("topsecret") == false)
        #expect(d.first?.message.contains("***") == true)
    }

    @Test func builtinsMissingOnSomeDevicesAreListed() throws {
        let workflow = try #require(WorkflowParser().parse(bytes: Array("""
            name: t
            steps:
              - scan: { address: "${address}" }
            """.utf8), path: "w.yaml").workflow)
        let inventory = try #require(InventoryParser().parse(bytes: Array("""
            devices:
              - { id: SN-1, address: "C0:5E:00:00:00:01" }
              - { id: SN-2, name: b }
              - { id: SN-3, name: c }
            """.utf8), path: "i.yaml").inventory)
        let d = Validator.check(workflow, against: inventory, devices: inventory.devices)
        #expect(d.map(\.message) == ["`${address}` is not defined for 2 devices: SN-2, SN-3"])
        #expect(d.first?.mark == SourceMark(line: 3, column: 23))
    }

    @Test func onlySelectedDevicesAreChecked() throws {
        let workflow = try #require(WorkflowParser().parse(bytes: Array("""
            name: t
            steps:
              - connect
              - write: { service: FFF0, characteristic: FFF1, value: { hex: "${config}" } }
            """.utf8), path: "w.yaml").workflow)
        let inventory = try #require(InventoryParser().parse(bytes: Array("""
            devices:
              - { id: SN-1, name: a, vars: { config: "01" } }
              - { id: SN-2, name: b }
            """.utf8), path: "i.yaml").inventory)
        let selected = DeviceSelection.select("SN-1", from: inventory.devices).devices
        #expect(Validator.check(workflow, against: inventory, devices: selected).isEmpty)
        #expect(Validator.check(workflow, against: inventory, devices: inventory.devices).count == 1)
    }
}

@Suite struct CSVEdgeCaseTests {
    @Test func byteOrderMarkAndCommentsAndBlankLinesAreSkipped() throws {
        let text = [UInt8]([0xEF, 0xBB, 0xBF]) + Array("id,name\n# rework batch\n\nSN-1,S1\n".utf8)
        let r = InventoryParser().parse(bytes: text, path: "i.csv")
        #expect(r.diagnostics.isEmpty)
        #expect(r.inventory?.devices.map(\.id) == ["SN-1"])
        #expect(r.inventory?.devices.first?.mark == SourceMark(line: 4, column: 1))
    }

    @Test func duplicateColumnsAndBadAddressesArePositioned() {
        let r = InventoryParser().parse(bytes: Array("id,name,name\nSN-1,a,b\n".utf8), path: "i.csv")
        #expect(r.diagnostics.map(\.mark) == [SourceMark(line: 1, column: 9)])
        #expect(r.diagnostics.first?.message == "duplicate column `name` (first at column 4)")
        let r2 = InventoryParser().parse(bytes: Array("id,address\nSN-1,C0:5E\n".utf8), path: "i.csv")
        #expect(r2.diagnostics.map(\.mark) == [SourceMark(line: 2, column: 6)])
    }

    @Test func emptyCSVHasNoDevices() {
        let r = InventoryParser().parse(bytes: Array("id,name\n".utf8), path: "i.csv")
        #expect(r.inventory == nil)
        #expect(r.diagnostics.map(\.message) == ["the inventory has no devices"])
    }
}

@Suite struct SecretTests {
    @Test func aSecretThatNamesNoVariableIsAWarningAtItsPosition() throws {
        let r = InventoryParser().parse(bytes: Array("secrets: [device_kye]\ndevices:\n  - { id: SN-1, name: a, vars: { device_key: \"00\" } }\n".utf8), path: "i.yaml")
        #expect(r.inventory != nil)
        #expect(r.diagnostics.map(\.severity) == [.warning])
        #expect(r.diagnostics.first?.mark == SourceMark(line: 1, column: 11))
        #expect(r.diagnostics.first?.hint == "did you mean `device_key`?")
    }
}

/// Two devices with one advertised name: a scan by name could provision either at the other's address.
@Suite struct DuplicateNameTests {
    @Test func duplicateNamesAreRefusedWithBothPositions() {
        let yaml = "devices:\n  - { id: SN-1, name: SNS-A, address: \"C0:5E:00:00:00:01\" }\n  - { id: SN-2, name: SNS-B }\n  - { id: SN-3, name: SNS-A, address: \"C0:5E:00:00:00:03\" }\n"
        let r = InventoryParser().parse(bytes: Array(yaml.utf8), path: "inv.yaml")
        #expect(r.inventory == nil)
        #expect(r.diagnostics.map(\.message) == ["device `SN-3` has the same name `SNS-A` as `SN-1` (at 2:5)"])
        #expect(r.diagnostics.map(\.mark) == [SourceMark(line: 4, column: 5)])
        let csv = "id,address,name\nSN-1,C0:5E:00:00:00:01,SNS-A\nSN-2,C0:5E:00:00:00:02,SNS-A\n"
        let c = InventoryParser().parse(bytes: Array(csv.utf8), path: "inv.csv")
        #expect(c.diagnostics.map(\.message) == ["device `SN-2` has the same name `SNS-A` as `SN-1` (at 2:1)"])
        #expect(c.diagnostics.map(\.mark) == [SourceMark(line: 3, column: 1)])
    }
}
