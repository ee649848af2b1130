import Foundation
import Testing

/// `provision validate` checks the simulator model the inventory names: the model file's own errors,
/// the devices' overrides and models, and every service and characteristic the workflow uses (it must
/// be there and allow what the step does), before a run meets them.
@Suite struct ModelCheckTests {
    @Test func theSmartLockExampleIsValidAgainstItsModel() async {
        let r = await run(["validate", "workflows/smart-lock.yaml", "--inventory", "inventory/smart-lock-line.yaml"])
        #expect(r.code == 0, "\(r.err)")
        #expect(r.err == "")
        #expect(r.out == "valid: smart-lock-commissioning (workflows/smart-lock.yaml): 23 steps, 8 of 8 devices selected (inventory/smart-lock-line.yaml)\n")
    }

    @Test func aCharacteristicTheModelLacksIsAnErrorAtItsStep() async throws {
        let copy = try BrokenCopy()
        let line = try copy.replace("workflows/smart-lock.yaml", "{ id: site_stored, service: FFE0, characteristic: FFE4,",
                                    with: "{ id: site_stored, service: FFE0, characteristic: FFE8,")
        let r = await run(["validate", "workflows/smart-lock.yaml", "--inventory", "inventory/smart-lock-line.yaml"], in: copy.path)
        #expect(r.code == 2)
        #expect(r.err.hasPrefix("workflows/smart-lock.yaml:\(line):5: error: step `read site_stored`: the simulator model `smart-lock` (\(copy.path)/inventory/models/smart-lock.yaml) has no characteristic FFE8 in service FFE0\n    hint: did you mean FFE1?\n"), "\(r.err)")
        #expect(r.err.hasSuffix("1 error; nothing was sent to any device\n"))
    }

    @Test func theModelIsCheckedInTheSamePassAsTheWorkflowAndInventoryErrors() async throws {
        let copy = try BrokenCopy()
        let wrong = try copy.replace("workflows/smart-lock.yaml", "{ id: site_stored, service: FFE0, characteristic: FFE4,",
                                     with: "{ id: site_stored, service: FFE0, characteristic: FFE8,")
        let misspelt = try copy.replace("workflows/smart-lock.yaml", "  - disconnect", with: "  - disconect")
        let device = try copy.replace("inventory/smart-lock-line.yaml", "address: \"D0:0C:00:00:00:02\"", with: "address: \"D0:0C:00:00:00\"")
        let r = await run(["validate", "workflows/smart-lock.yaml", "--inventory", "inventory/smart-lock-line.yaml"], in: copy.path)
        #expect(r.code == 2)
        #expect(r.err.contains("workflows/smart-lock.yaml:\(misspelt):5: error: unknown step `disconect`"), "\(r.err)")
        #expect(r.err.contains("inventory/smart-lock-line.yaml:\(device):"), "\(r.err)")
        #expect(r.err.contains("workflows/smart-lock.yaml:\(wrong):5: error: step `read site_stored`: the simulator model `smart-lock`"), "\(r.err)")
        #expect(r.err.hasSuffix("3 errors; nothing was sent to any device\n"), "\(r.err)")
    }

    @Test func aServiceTheModelLacksIsAnError() async throws {
        let copy = try BrokenCopy()
        try copy.replace("workflows/fleet-audit.yaml", "service: 180F", with: "service: 180D")
        let r = await run(["validate", "workflows/fleet-audit.yaml", "--inventory", "inventory/demo-line.yaml"], in: copy.path)
        #expect(r.code == 2)
        #expect(r.err.contains("error: step `read battery`: the simulator model `sensor-v2` (\(copy.path)/inventory/models/sensor-v2.yaml) has no service 180D\n    hint: did you mean 1801?"), "\(r.err)")
    }

    @Test func aStepTheCharacteristicDoesNotAllowIsAnError() async throws {
        let copy = try BrokenCopy()
        try copy.replace("workflows/smart-lock.yaml", "- write: { service: FFE0, characteristic: FFE4,", with: "- write: { service: FFE0, characteristic: FFE3,")
        try copy.replace("workflows/smart-lock.yaml", "- subscribe: { id: bolt, service: FFE0, characteristic: FFE6 }", with: "- subscribe: { id: bolt, service: FFE0, characteristic: FFE5 }")
        let r = await run(["validate", "workflows/smart-lock.yaml", "--inventory", "inventory/smart-lock-line.yaml"], in: copy.path)
        #expect(r.code == 2)
        #expect(r.err.contains("error: step `subscribe bolt` subscribes to FFE5, but in the simulator model `smart-lock` (\(copy.path)/inventory/models/smart-lock.yaml) it allows only read, write\n    hint: the device would refuse it; check the characteristic or the model"), "\(r.err)")
        #expect(r.err.contains("error: step `write FFE3` writes FFE3, but in the simulator model `smart-lock`"))
        #expect(r.err.contains("2 errors; nothing was sent to any device"))
    }

    @Test func anErrorInTheModelFileIsReportedWhereItIs() async throws {
        let copy = try BrokenCopy()
        let line = try copy.replace("inventory/models/smart-lock.yaml", "properties: [read, write, notify]", with: "properties: [read, write, notfy]")
        let r = await run(["validate", "workflows/smart-lock.yaml", "--inventory", "inventory/smart-lock-line.yaml"], in: copy.path)
        #expect(r.code == 2)
        #expect(r.err.hasPrefix("\(copy.path)/inventory/models/smart-lock.yaml:\(line):49: error: unknown property `notfy`\n    hint: did you mean `notify`?\n"), "\(r.err)")
    }

    @Test func aDeviceOverrideOrModelTheSimulatorWouldRefuseIsAnError() async throws {
        let copy = try BrokenCopy()
        try copy.replace("inventory/smart-lock-line.yaml", "simulator: { firmware: \"1.9.2\" } }", with: "simulator: { firmwre: \"1.9.2\" } }")
        var r = await run(["validate", "workflows/smart-lock.yaml", "--inventory", "inventory/smart-lock-line.yaml"], in: copy.path)
        #expect(r.code == 2)
        #expect(r.err.contains("inventory/smart-lock-line.yaml:12:"), "\(r.err)")
        #expect(r.err.contains("unknown key `firmwre` in `simulator`"))
        let copy2 = try BrokenCopy()
        try copy2.replace("inventory/smart-lock-line.yaml", "simulator: { battery: \"12\" } }", with: "simulator: { model: smart-lok } }")
        r = await run(["validate", "workflows/smart-lock.yaml", "--inventory", "inventory/smart-lock-line.yaml"], in: copy2.path)
        #expect(r.code == 2)
        #expect(r.err.contains("error: device SL-0008 names the simulator model `smart-lok`, which is not in \(copy2.path)/inventory/models\n    hint: did you mean `smart-lock`?"), "\(r.err)")
    }
}
