import Foundation
import Testing
@testable import Workflow

/// Validation reports every problem in one pass, says each once, and never gives a hint that leads to
/// another error.
@Suite struct OnePassValidationTests {
    static func validate(_ workflow: String, _ inventory: String, name: String = "inv.csv") throws -> (ValidationResult, [String]) {
        let dir = try TemporaryDirectory()
        try dir.write("wf.yaml", workflow)
        try dir.write(name, inventory)
        let r = Validator.validate(workflowPath: dir.path + "/wf.yaml", inventoryPath: dir.path + "/" + name)
        let lines = r.diagnostics.map { d in
            "\(URL(fileURLWithPath: d.path).lastPathComponent):\(d.line):\(d.column): \(d.message)"
        }
        return (r, lines)
    }

    @Test func theWorkflowTheCSVAndTheirCrossChecksAreReportedTogether() throws {
        let workflow = """
            name: t
            vars:
              room: { utf8: [1, 16] }
            steps:
              - scan: { name: "${name}" }
              - connect: {}
              - wrte: {}
              - write: { service: FFD0, characteristic: FFD1, value: { utf8: "${room}", length: 16 } }
            """
        let csv = """
            id,name,room,room,bad col
            TH-1,T1,Hall,x,y
            TH-2,T2,Kitchen,x,y
            TH-3,T3,Conference room 12,x,y
            TH-4,T4,,x,y
            TH 5,T5,Hall,x,y
            TH-6,T6\u{7},Hall,x,y

            """
        let (result, lines) = try Self.validate(workflow, csv)
        #expect(!result.isValid && result.inventory == nil)
        #expect(result.partialInventory?.devices.map(\.id) == ["TH-1", "TH-2", "TH-3", "TH-4"])
        #expect(lines == [
            "wf.yaml:3:3: `room` is declared in `vars:` but not defined for 1 device: TH-4",
            "wf.yaml:7:5: unknown step `wrte`",
            "inv.csv:1:14: duplicate column `room` (first at column 9)",
            "inv.csv:1:19: `bad col` is not a valid variable name",
            "inv.csv:6:1: device id `TH 5` contains a space, comma, `@`, `*` or `?`",
            "inv.csv:7:6: device `TH-6`'s name `T6\\u{7}` contains the control character U+0007 (BEL) at character 3",
            "inv.csv:4:1: device TH-3: room is 18 bytes (\"Conference room 12\"), but 1 to 16 are needed",
        ], "\(lines.joined(separator: "\n"))")
    }

    @Test func aFailedSetLeavesNoPhantomErrorsBehindIt() throws {
        let workflow = """
            name: t
            steps:
              - connect: {}
              - read: { id: raw, service: FFD0, characteristic: FFD4 }
              - set: { id: crc, crc: CRC-16/CCITT-FALS, of: "${raw}" }
              - set: { id: frame, concat: [{ hex: "01" }, { uint16be: "${crc}" }] }
              - name: only with a CRC
                when: crc > 5
                write: { service: FFD0, characteristic: FFD1, value: [{ bytes: "${frame}" }, { uint16le: "${crc}" }] }
              - verify: { value: "${crc}", min: 1 }
              - write: { service: FFD0, characteristic: FFD1, value: { hex: "${crc}" } }
            """
        let (result, lines) = try Self.validate(workflow, "devices:\n  - { id: SN-1, name: S1 }\n", name: "inv.yaml")
        #expect(!result.isValid)
        // One mistake, said once: not "captured by step 5, which runs after this one", not "unknown
        // variable", not a type error for a value whose type is unknown.
        #expect(lines == ["wf.yaml:5:26: unknown CRC `CRC-16/CCITT-FALS`"], "\(lines.joined(separator: "\n"))")
    }

    @Test func aReferenceToACaptureOfALaterStepIsStillAnError() throws {
        let workflow = """
            name: t
            steps:
              - connect: {}
              - write: { service: FFD0, characteristic: FFD1, value: { hex: "${raw}" } }
              - read: { id: raw, service: FFD0, characteristic: FFD4 }
            """
        let (_, lines) = try Self.validate(workflow, "devices:\n  - { id: SN-1, name: S1 }\n", name: "inv.yaml")
        #expect(lines == ["wf.yaml:4:66: `${raw}` is captured by step 3, which runs after this one"])
    }

    /// Every type a value can have, every encoding it can sit in: where that is an error, the part its
    /// hint names is accepted in its place.
    @Test func noHintLeadsToAnotherError() throws {
        let types = ["uint8", "uint16be", "int32le", "sfloat", "hex", "utf8", "version", "base64"]
        let encodings = ["hex", "utf8", "base64", "bytes", "file", "uint16le", "int64be"]
        var checked = 0
        for type in types {
            for form in encodings.map({ "{ \($0): \"${x}\" }" }) + ["\"${x}\"", "{ utf8: \"${x}\", length: 8 }", "[{ hex: \"01\" }, { hex: \"00${x}\" }]"] {
                let text = """
                    name: t
                    vars:
                      x: \(type)
                    steps:
                      - connect: {}
                      - write: { service: FFD0, characteristic: FFD1, value: \(form) }
                    """
                let (_, diagnostics) = WorkflowParser().parse(bytes: Array(text.utf8), path: "w.yaml")
                for d in diagnostics where d.severity == .error {
                    guard let hint = d.hint, let range = hint.range(of: #"\{ [a-z0-9]+: "\$\{x\}" \}"#, options: .regularExpression) else { continue }
                    let part = String(hint[range])
                    let fixed = text.replacingOccurrences(of: "value: \(form) }", with: "value: \(part) }")
                    let again = WorkflowParser().parse(bytes: Array(fixed.utf8), path: "w.yaml").diagnostics.filter { $0.severity == .error }
                    #expect(again.isEmpty, "x: \(type), value \(form): the hint `\(hint)` leads to \(again.map(\.message))")
                    checked += 1
                }
            }
        }
        #expect(checked >= 20, "hints naming a part were followed: \(checked)")
    }
}
