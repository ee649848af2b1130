import BLE
import Testing
import YAML
@testable import Workflow

@Suite struct WorkflowParserTests {
    func parse(_ text: String) throws -> Workflow {
        let (w, d) = WorkflowParser().parse(bytes: Array(text.utf8), path: "w.yaml")
        #expect(d.isEmpty, "\(d)")
        return try #require(w)
    }

    static let everyKind = """
        name: every-kind
        description: one of each
        steps:
          - scan: { address: "C0:5E:00:00:00:01", name: "${name}", services: [FFF0, 180A], manufacturer: { company: 0x004C, data: "0215" }, min_rssi: -80 }
          - connect: { mtu: 247, reconnect: { attempts: 2, delay: 500ms } }
          - pair: { security: authenticated, passkey: "${passkey}" }
          - discover: { all: true }
          - read: { id: fw, service: 180A, characteristic: 2A26, as: utf8 }
          - verify: { value: "${fw}", matches: '^2\\.' }
          - write: { service: FFF0, characteristic: FFF1, value: { hex: "01${config}" }, with_response: false }
          - write_blob: { service: FFF0, characteristic: FFF4, file: "${blob}", chunk_size: 20 }
          - subscribe: { id: acks, service: FFF0, characteristic: FFF3, mode: indicate, allow_undeclared: true }
          - await:
              subscription: acks
              trigger: { service: FFF0, characteristic: FFF1, value: { hex: "02" } }
              matches: { hex: "^0200" }
              timeout: 2s
              resend: [1s, 2s, 5s]
          - unsubscribe: { id: acks }
          - dfu: { image: "${firmware}" }
          - file_upload: { file: "${blob}", to: /lfs/blob.bin }
          - settings: { save: true }
          - mcumgr: { command: echo }
          - sleep: 250ms
          - disconnect
          - set: { id: label, concat: ["${name}", "-", "${fw}"] }
        """

    @Test func everyStepKindParsesWithItsOptions() throws {
        let w = try parse(Self.everyKind)
        #expect(w.name == "every-kind")
        #expect(w.description == "one of each")
        let mcumgr = ["dfu", "file_upload", "settings", "mcumgr"]
        #expect(w.steps.map(\.kind.keyword) == Step.Kind.keywords.filter { $0 != "verify" && $0 != "read" && $0 != "write" && $0 != "write_blob" && $0 != "subscribe" && $0 != "unsubscribe" && $0 != "await" && $0 != "sleep" && $0 != "disconnect" && $0 != "set" && !mcumgr.contains($0) } + ["read", "verify", "write", "write_blob", "subscribe", "await", "unsubscribe"] + mcumgr + ["sleep", "disconnect", "set"])
        guard case .scan(let scan) = w.steps[0].kind else { Issue.record("not a scan"); return }
        #expect(scan.address?.source == "C0:5E:00:00:00:01")
        #expect(scan.name?.referencedNames == ["name"])
        #expect(scan.services == [BluetoothUUID(0xFFF0), BluetoothUUID(0x180A)])
        #expect(scan.manufacturer == Step.ManufacturerFilter(company: 0x004C, prefix: [0x02, 0x15]))
        #expect(scan.minRSSI == -80)
        #expect(w.steps[1].kind == .connect(Step.Connect(mtu: 247, reconnect: .limited(maxAttempts: 2, delays: [.milliseconds(500)]))))
        guard case .pair(let pair) = w.steps[2].kind else { Issue.record("not a pair"); return }
        #expect(pair.security.level == .authenticated && pair.security.passkey?.referencedNames == ["passkey"])
        #expect(w.steps[2].name == "pair authenticated")
        #expect(w.steps[3].kind == .discover(Step.Discover(all: true)))
        let ref = CharacteristicRef(service: BluetoothUUID(0x180A), characteristic: BluetoothUUID(0x2A26))
        #expect(w.steps[4].kind == .read(Step.Read(target: ref, id: "fw", format: .utf8)))
        #expect(w.steps[4].name == "read fw")
        guard case .verify(let verify) = w.steps[5].kind else { Issue.record("not a verify"); return }
        #expect(verify.limits == LimitSpecs(matches: #"^2\."#))
        #expect(verify.valueType == .text && verify.measurementName == "fw")
        guard case .write(let write) = w.steps[6].kind else { Issue.record("not a write"); return }
        #expect(!write.withResponse)
        #expect(w.steps[6].name == "write FFF1")
        guard case .writeBlob(let blob) = w.steps[7].kind else { Issue.record("not a write_blob"); return }
        #expect(blob.chunkSize == 20)
        #expect(blob.value.fileTemplates.map(\.source) == ["${blob}"])
        guard case .subscribe(let sub) = w.steps[8].kind else { Issue.record("not a subscribe"); return }
        #expect(sub.mode == .indicate && sub.allowUndeclared && sub.id == "acks")
        guard case .await(let a) = w.steps[9].kind else { Issue.record("not an await"); return }
        #expect(a.subscription == "acks")
        #expect(a.matcher == .matches(pattern: "^0200", hex: true))
        #expect(a.resend == [.seconds(1), .seconds(2), .seconds(5)])
        #expect(a.trigger?.value == .hex(Template(literal: "02")))
        #expect(w.steps[9].effectiveTimeout == .seconds(2))
        #expect(w.steps[10].kind == .unsubscribe(Step.Unsubscribe(id: "acks")))
        guard case .dfu(let dfu) = w.steps[11].kind else { Issue.record("not a dfu step"); return }
        #expect(dfu.image.source == "${firmware}" && dfu.confirm == .afterBoot && dfu.upgradeOnly && dfu.rebootTimeout == .seconds(60))
        #expect(w.steps[15].kind == .sleep(Step.Sleep(duration: .milliseconds(250))))
        #expect(w.steps[15].name == "sleep 250ms")
        #expect(w.steps[16].kind == .disconnect(Step.Disconnect()))
        #expect(w.inventoryVariables == ["config", "blob", "passkey", "firmware"])
    }

    @Test func stepNamesAndCommonOptionsMayStandBesideTheKind() throws {
        let w = try parse("""
            name: t
            steps:
              - connect
              - name: check firmware
                timeout: 3s
                read: { service: 180A, characteristic: 2A26 }
              - read: { name: inside, service: 180A, characteristic: 2A24, timeout: 1s }
            """)
        #expect(w.steps[1].name == "check firmware" && w.steps[1].hasExplicitName)
        #expect(w.steps[1].timeout == .seconds(3))
        #expect(w.steps[2].name == "inside")
        #expect(w.steps[2].effectiveTimeout == .seconds(1))
    }

    @Test func verifyLimitsAreReadAsTheValuesType() throws {
        let w = try parse("""
            name: t
            steps:
              - connect
              - read: { id: level, service: 180F, characteristic: 2A19, as: uint8 }
              - verify: { value: "${level}", min: 0, max: 100, unit: "%" }
              - verify: { value: "${level}", one_of: ["${level}", "7"] }
              - name: level is fifty
                verify: { value: "${level}", equals: 50, min: 19.5 }
            """)
        guard case .verify(let a) = w.steps[2].kind, case .verify(let b) = w.steps[3].kind, case .verify(let c) = w.steps[4].kind else {
            Issue.record("not verify steps")
            return
        }
        #expect(a.valueType == .integer(signed: false))
        #expect(a.limits == LimitSpecs(min: .value(.integer(0, signed: false)), max: .value(.integer(100, signed: false))))
        #expect(a.unit == "%" && a.measurementName == "level")
        #expect(b.limits.oneOf?.count == 2)
        #expect(b.limits.templates.map(\.source) == ["${level}"])
        #expect(b.limits.oneOf?.last == .value(.integer(7, signed: false)))
        #expect(c.limits.equals == .value(.integer(50, signed: false)))
        #expect(c.limits.min == .value(.real(19.5)))
        #expect(c.measurementName == "level is fifty")
    }

    @Test func theExampleWorkflowsAreValid() throws {
        for name in ["sensor-v2", "fleet-audit"] {
            let path = repositoryRoot + "/workflows/\(name).yaml"
            let result = Validator.validate(workflowPath: path, inventoryPath: repositoryRoot + "/inventory/demo-line.yaml")
            #expect(result.diagnostics.filter { $0.severity == .error }.isEmpty, "\(result.diagnostics)")
            #expect(result.isValid)
            #expect(result.selectedDevices.count == 48)
            #expect(result.workflow?.sha256.count == 64)
        }
    }

    @Test func theSensorWorkflowFollowsTheReferenceDevice() throws {
        let result = Validator.validate(workflowPath: repositoryRoot + "/workflows/sensor-v2.yaml", inventoryPath: repositoryRoot + "/inventory/demo-line.yaml")
        let w = try #require(result.workflow)
        let device = try #require(result.inventory?.devices.first)
        let base = try #require(result.inventory?.baseDirectory)
        // The "begin blob" trigger is 03 followed by the blob's length as u32le.
        let begin = try #require(w.steps.first { $0.name == "begin blob" })
        guard case .await(let a) = begin.kind, let trigger = a.trigger else { Issue.record("not an await with trigger"); return }
        let bytes = try trigger.value.bytes(variables: device.value(of:), baseDirectory: base)
        #expect(bytes == [0x03, 0x00, 0x08, 0x00, 0x00])  // SN-0001 uses the 2 KiB blob
        #expect(w.inventoryVariables == ["config", "blob"])
        #expect(w.steps.first?.effectiveTimeout == .seconds(15))
    }
}

@Suite struct WorkflowModelTests {
    @Test func usedServicesAreInFirstUseOrder() throws {
        let result = Validator.validate(workflowPath: repositoryRoot + "/workflows/sensor-v2.yaml", inventoryPath: nil)
        let w = try #require(result.workflow)
        #expect(w.usedServices == [BluetoothUUID(0x180A), BluetoothUUID(0xFFF0)])
    }

    @Test func deviceLookupPrefersCapturedValues() {
        let device = InventoryDevice(id: "SN-1", name: "S1", vars: ["config": "0a"], mark: SourceMark(line: 1, column: 1))
        let lookup = device.variables(captured: ["fw": "2.4.1"])
        #expect(lookup("fw") == "2.4.1")
        #expect(lookup("id") == "SN-1")
        #expect(lookup("config") == "0a")
        #expect(lookup("address") == nil)
    }
}

@Suite struct CaptureOrderTests {
    @Test func aScanCannotUseAValueCapturedLater() {
        let text = """
            name: t
            steps:
              - scan: { name: "${model}" }
              - connect
              - read: { id: model, service: 180A, characteristic: 2A24, as: utf8 }
            """
        let (_, d) = WorkflowParser().parse(bytes: Array(text.utf8), path: "w.yaml")
        #expect(d.map(\.message) == ["`${model}` is captured by step 3, which runs after this one"])
        #expect(d.map(\.mark) == [SourceMark(line: 3, column: 20)])
    }

    @Test func aCaptureIsUsableByEveryLaterStep() throws {
        let text = """
            name: t
            steps:
              - connect
              - read: { id: model, service: 180A, characteristic: 2A24, as: utf8 }
              - verify: { value: "${model}", one_of: [sensor-v2, "${model}"] }
              - write: { service: FFF0, characteristic: FFF1, value: { utf8: "${model}" } }
            """
        let (w, d) = WorkflowParser().parse(bytes: Array(text.utf8), path: "w.yaml")
        #expect(d.isEmpty)
        #expect(w?.inventoryVariables.isEmpty == true)
    }
}
