import Foundation
import MCUboot
import Testing
import YAML

@testable import Workflow

/// The MCUmgr family's steps: what they parse to, and each mistake at its position.
@Suite struct McuMgrStepTests {
    private func parse(_ text: String) -> (Workflow?, [Diagnostic]) {
        WorkflowParser().parse(bytes: Array(text.utf8), path: "wf.yaml")
    }

    private func firstError(_ text: String) -> (Int, Int, String, String?)? {
        parse(text).1.first.map { ($0.line, $0.column, $0.message, $0.hint) }
    }

    static let header = "name: t\nsteps:\n  - connect: {}\n"

    @Test func theFourStepsParseWithTheirOptions() throws {
        let text = Self.header + """
              - dfu: { image: "${firmware}", confirm: now, upgrade_only: false, reboot_timeout: 90s, version: "1.2.3", window: 2 }
              - file_upload: { file: "${cert}", to: /lfs/cert.der, verify: required }
              - settings: { write: { "app/interval": { uint32le: 60 }, "app/name": { utf8: "${id}" } }, save: true }
              - mcumgr: { command: image_state, capture: fw }
              - mcumgr: { command: echo, text: "hi ${id}", capture: echoed }
              - mcumgr: { command: image_erase, slot: 1 }
            """
        let (workflow, diagnostics) = parse(text)
        #expect(diagnostics.isEmpty, "\(diagnostics)")
        let steps = try #require(workflow?.steps)
        guard case .dfu(let d) = steps[1].kind else { Issue.record("not a dfu step"); return }
        #expect(d.image.source == "${firmware}" && d.confirm == .now && !d.upgradeOnly && d.rebootTimeout == .seconds(90))
        #expect(d.version?.source == "1.2.3" && d.window == 2 && d.imageNumber == 0)
        #expect(steps[1].name == "dfu ${firmware}" && steps[1].effectiveTimeout == .seconds(900))
        #expect(steps[1].checksItsIrreversibleActions && !steps[1].irreversible)
        guard case .fileUpload(let f) = steps[2].kind else { Issue.record("not a file upload"); return }
        #expect(f.to.source == "/lfs/cert.der" && f.verify == .required && steps[2].effectiveTimeout == .seconds(120))
        guard case .settings(let s) = steps[3].kind else { Issue.record("not settings"); return }
        #expect(s.writes.map(\.name) == ["app/interval", "app/name"] && s.save)
        guard case .mcumgr(let m) = steps[4].kind else { Issue.record("not mcumgr"); return }
        #expect(m.command == .imageState && m.capture == "fw" && steps[4].capturedName == "fw")
        #expect(workflow?.captureTypes["fw"] == .version)
        #expect(workflow?.captureTypes["dfu_version_after"] == .version && workflow?.captureTypes["dfu_kbps"] == .real)
        #expect(workflow?.captureTypes["dfu_bytes_sent"] == .integer(signed: false))
        #expect(steps[6].irreversible && !steps[5].irreversible)
    }

    @Test func dfuMistakesAreReportedAtTheirPosition() {
        #expect(firstError(Self.header + "  - dfu: { confirm: now }\n")?.2 == "`dfu` needs `image`")
        let wrong = firstError(Self.header + "  - dfu: { image: \"${fw}\", confirm: after_bot }\n")
        #expect(wrong?.0 == 4 && wrong?.1 == 37)
        #expect(wrong?.2 == "`confirm` must be after_boot, now, never, not `after_bot`" && wrong?.3 == "did you mean `after_boot`?")
        #expect(firstError(Self.header + "  - dfu: { image: \"${fw}\", reboot_timeout: 500ms }\n")?.2 == "`reboot_timeout` must be at least 1s")
        #expect(firstError(Self.header + "  - dfu: { image: \"${fw}\", windw: 2 }\n")?.3 == "did you mean `window`?")
        let early = firstError("name: t\nsteps:\n  - dfu: { image: \"${fw}\" }\n")
        #expect(early?.0 == 3 && early?.2 == "`dfu` needs a connection, but no `connect` step comes before it")
    }

    @Test func fileSettingsAndCommandMistakes() {
        #expect(firstError(Self.header + "  - file_upload: { file: \"${cert}\" }\n")?.2 == "`file_upload` needs `to`")
        #expect(firstError(Self.header + "  - file_upload: { file: \"${cert}\", to: lfs/cert.der }\n")?.2
                == "`to` must be an absolute path on the device, not `lfs/cert.der`")
        #expect(firstError(Self.header + "  - settings: {}\n")?.2 == "`settings` needs `write` (names and values) or `save: true`")
        #expect(firstError(Self.header + "  - settings: { write: { \"a/b\": \"3c\" } }\n")?.2 == "the value of `a/b` must say how it is encoded")
        let unknown = firstError(Self.header + "  - mcumgr: { command: imge_state }\n")
        #expect(unknown?.2 == "unknown MCUmgr command `imge_state`" && unknown?.3 == "did you mean `image_state`?")
        #expect(firstError(Self.header + "  - mcumgr: { command: reset, capture: x }\n")?.2 == "`reset` answers nothing to capture")
        #expect(firstError(Self.header + "  - mcumgr: { command: image_test }\n")?.2 == "`image_test` needs `image`: the image whose hash is marked")
        #expect(firstError(Self.header + "  - mcumgr: { command: echo, slot: 1 }\n")?.2 == "`slot` goes with image_erase")
    }

    // MARK: - Images checked during validation, for every device

    private func validate(image: [UInt8]?, version: String? = nil, path: String = "fw.bin", extra: String = "") throws -> [Diagnostic] {
        let dir = try TemporaryDirectory()
        if let image { try dir.write("fw.bin", image) }
        let versionOption = version.map { ", version: \"\($0)\"" } ?? ""
        try dir.write("wf.yaml", Self.header + "  - dfu: { image: \"${firmware}\"\(versionOption) }\n")
        try dir.write("inv.yaml", "devices:\n  - { id: SN-1, address: \"C0:00:00:00:00:01\", vars: { firmware: \"\(path)\" } }\n  - { id: SN-2, address: \"C0:00:00:00:00:02\", vars: { firmware: \"\(path)\" } }\n" + extra)
        return Validator.validate(workflowPath: dir.path + "/wf.yaml", inventoryPath: dir.path + "/inv.yaml").errors
    }

    static func image(_ version: String) throws -> MCUbootImage {
        try MCUbootImage.build(body: Array(repeating: 0x5A, count: 1000), version: try #require(ImageVersion(version)))
    }

    @Test func aGoodImageWithTheNamedVersionValidates() throws {
        #expect(try validate(image: Self.image("1.1.0").bytes, version: "1.1.0").isEmpty)
    }

    @Test func aFileThatIsNotAnImageIsRefusedNamingTheDevices() throws {
        let errors = try validate(image: Array("#!/bin/sh\n".utf8))
        let e = try #require(errors.first)
        #expect(e.line == 4 && e.column == 20)
        #expect(e.message == "step `dfu ${firmware}`: the image cannot be sent to 2 devices (SN-1, SN-2): fw.bin: not an MCUboot image: its first bytes are not the MCUboot magic 3db8f396 (found 23212f62)")
    }

    @Test func aDamagedImageIsRefused() throws {
        var bytes = try Self.image("1.1.0").bytes
        bytes[100] ^= 1
        let e = try #require(try validate(image: bytes).first)
        #expect(e.message.contains("its contents hash to") && e.message.contains("the file is damaged"))
    }

    @Test func anImageOfAnotherVersionIsRefused() throws {
        let e = try #require(try validate(image: Self.image("1.0.9").bytes, version: "1.1.0").first)
        #expect(e.message == "step `dfu ${firmware}`: the image does not have the version the step names for 2 devices (SN-1, SN-2): fw.bin is version 1.0.9, not 1.1.0")
    }

    @Test func anImageOutsideTheFileRootIsRefused() throws {
        let e = try #require(try validate(image: Self.image("1.1.0").bytes, path: "../../etc/passwd").first)
        #expect(e.message.contains("leads outside") || e.message.contains("cannot read file"))
        let missing = try #require(try validate(image: nil).first)
        #expect(missing.message.contains("cannot read file"))
    }
}
