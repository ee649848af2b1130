import Foundation
import YAML
import Testing
@testable import Workflow

/// What every command hides: values under a secret name, anything that shows a secret in any form, and
/// bytes written from a value that used one.
@Suite struct SecretScopeTests {
    static func scope() throws -> SecretScope {
        let device = InventoryDevice(id: "SN-1", vars: ["key": "A1B2C3D4", "password": "hunter2", "model": "x"], mark: SourceMark(line: 1, column: 1))
        let inventory = Inventory(path: "i.yaml", sha256: "", baseDirectory: "", devices: [device], secrets: ["key"])
        var workflow = Workflow(name: "w", description: nil, path: "w.yaml", sha256: "", defaults: Workflow.Defaults(), steps: [])
        workflow.variables = ["password": try VariableDeclaration(format: .utf8, secret: true)]
        return SecretScope(inventory: inventory, workflow: workflow, device: device)
    }

    @Test func theInventorysAndTheWorkflowsSecretsAreHiddenInEveryForm() throws {
        let s = try Self.scope()
        #expect(s.names == ["key", "password"])
        #expect(s.hides(bytes: [0xA1, 0xB2, 0xC3, 0xD4]), "the key's bytes")
        #expect(s.hides(bytes: [0x00, 0xA1, 0xB2, 0xC3, 0xD4, 0xFF]), "inside a longer value")
        #expect(s.hides(bytes: Array("hunter2".utf8)), "the password as text")
        #expect(s.hides(bytes: Array(Data("hunter2".utf8).base64EncodedString().utf8)), "the password as base64 text")
        #expect(s.hides("a1:b2:c3:d4"))
        #expect(s.hides("anything", name: "key"), "a value under a secret name")
        #expect(!s.hides(bytes: Array("2.4.1".utf8)))
        #expect(s.shown(.text("x"), name: "model") == .string("x"))
        #expect(s.shown(.bytes([0xA1, 0xB2, 0xC3, 0xD4])) == .string("***"))
        #expect(s.redact("sent A1B2C3D4 and hunter2") == "sent *** and ***")
    }

    @Test func bytesWrittenFromASecretAreSecretFromThen() throws {
        var s = try Self.scope()
        let spec = ValueSpec.hex(try Template(parsing: "01${key}"))
        #expect(s.usesSecret(spec))
        // A device that transforms the key before echoing it: the bytes written are learnt whole.
        s.wrote([0x01, 0xA1, 0xB2, 0xC3, 0xD4], from: spec)
        #expect(s.hides(bytes: [0x01, 0xA1, 0xB2, 0xC3, 0xD4]))
        var captured = try Self.scope()
        captured.captured("key", .text("ZZTOP-999"))
        #expect(captured.reveals("echo ZZTOP-999"))
        captured.captured("model", .text("QQQ-111"))
        #expect(!captured.reveals("QQQ-111"))
    }
}
