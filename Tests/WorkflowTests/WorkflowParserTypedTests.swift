import Foundation
import Testing
import YAML
@testable import Workflow

/// The typed language (`vars:`, `when:`, `optional` / `continue_on_error`, measurement `verify`, `set:`,
/// `await … capture:`) and the type check of every use: what parses into what, and every problem with
/// its exact position and hint (golden).
@Suite struct WorkflowParserTypedTests {
    /// Validates `workflow` against `inventory` and renders every diagnostic on one line:
    /// `file:line:column: severity: message | hint`, the directory written `$DIR`.
    static func diagnostics(_ workflow: String, _ inventory: String) throws -> [String] {
        let dir = try TemporaryDirectory()
        try dir.write("wf.yaml", workflow)
        try dir.write("inv.yaml", inventory)
        let result = Validator.validate(workflowPath: dir.path + "/wf.yaml", inventoryPath: dir.path + "/inv.yaml")
        return result.diagnostics.map { d in
            let file = URL(fileURLWithPath: d.path).lastPathComponent
            return "\(file):\(d.line):\(d.column): \(d.severity.rawValue): \(d.message)" + (d.hint.map { " | \($0)" } ?? "")
        }.map { $0.replacingOccurrences(of: dir.path, with: "$DIR") }
    }

    static func parse(_ text: String) throws -> Workflow {
        let (w, d) = WorkflowParser().parse(bytes: Array(text.utf8), path: "w.yaml")
        #expect(d.isEmpty, "\(d)")
        return try #require(w)
    }

    /// A `set` that uses its own value is one error, at the reference; no type is guessed for the
    /// value it has not made yet (which gave a second, spurious type error), and later uses of it are
    /// not reported again.
    @Test func aSetThatUsesItsOwnValueIsOneError() throws {
        let workflow = """
            name: t
            steps:
              - connect: {}
              - read: { id: fw, service: 180A, characteristic: 2A26, as: hex }
              - set: { id: x, slice: "${x}", start: 1 }
              - set: { id: y, concat: ["${fw}", "${y}"] }
              - write: { service: FFF0, characteristic: FFF1, value: { hex: "01${x}" } }
            """
        #expect(try Self.diagnostics(workflow, "devices:\n  - { id: SN-1, name: S1 }\n") == [
            "wf.yaml:5:27: error: `${x}` is the value this `set` makes: it has no value yet | derive it from other values, or give this `set` another id",
            "wf.yaml:6:38: error: `${y}` is the value this `set` makes: it has no value yet | derive it from other values, or give this `set` another id",
        ])
    }

    @Test func everyMisuseOfATypedValueIsReportedWhereItIsWritten() throws {
        let workflow = """
            name: t
            vars:
              device_key: { hex: 16, secret: true }
              site: utf8
              min_battery: uint8
              bad: { hexx: 4 }
            steps:
              - connect: {}
              - read: { id: battery, service: 180F, characteristic: 2A19, as: uint8 }
              - read: { id: cfg, service: FFF0, characteristic: FFF2 }
              - read: { id: fw, service: 180A, characteristic: 2A26, as: version }
              - write: { service: FFF0, characteristic: FFF1, value: { hex: "01${battery}" } }
              - write: { service: FFF0, characteristic: FFF1, value: { uint16le: "${cfg}" } }
              - verify: { value: "${fw}", min: 2 }
              - verify: { value: "${battery}", version_at_least: 2.0.0 }
              - verify: { value: "${battery}", in: [0, 100] }
              - name: old units
                when: fw < 2.0.0 and battery >= "30"
                write: { service: FFF0, characteristic: FFF1, value: { hex: "02" } }
              - when: batery > 3
                sleep: 1ms
              - when: later == 1
                sleep: 1ms
              - read: { id: later, service: 180A, characteristic: 2A24, as: uint8, optional: true, continue_on_error: true }
              - set: { id: crc, crc: CRC-16/CCITT-FALS, of: "${device_key}" }
              - set: { id: tail, slice: "${battery}", start: -1 }
              - verify: { value: "${battery}", min: "${min_battery}", max: 100 }
              - subscribe: { id: acks, service: FFF0, characteristic: FFF3 }
              - await: { subscription: acks, matches: { hex: "^01" }, capture: { id: st, slice: [1, 2], as: uint8 } }
            """
        let inventory = """
            devices:
              - { id: SN-1, name: S1, vars: { device_key: "00112233445566778899aabbccddeeff", site: "Hall 3", min_battery: "20" } }
              - { id: SN-2, name: S2, vars: { device_key: "0011223344556677", site: "Hall 3", min_battery: "20" } }
              - { id: SN-3, name: S3, vars: { site: "Hall 3", min_battery: "300" } }
            """
        let expected = [
            "wf.yaml:3:3: error: `device_key` is declared in `vars:` but not defined for 1 device: SN-3 | add `device_key` to those devices' `vars`, or to `defaults: { vars: }`; SN-3 is at $DIR/inv.yaml:4:5",
            "wf.yaml:6:10: error: unknown format `hexx` | did you mean `hex`?",
            "wf.yaml:12:68: error: `${battery}` is an unsigned integer, but `hex:` needs bytes | write it as a part of its own: `{ uint8: \"${battery}\" }` (join parts with a list)",
            "wf.yaml:13:71: error: `${cfg}` is bytes, but `uint16le:` needs an integer | write it with `{ hex: \"${cfg}\" }`, or read it `as: uint16le`",
            "wf.yaml:14:36: error: `min`: min needs a number, but the value is a version | for versions use version_at_least / version_below",
            "wf.yaml:15:54: error: `version_at_least`: version_at_least needs a version, but the value is an unsigned integer | read the value as: version",
            "wf.yaml:16:40: warning: `in` lists the allowed values: `[0, 100]` allows only 0 and 100 | for a range write `min: 0, max: 100`",
            "wf.yaml:18:37: error: `when`: cannot compare `battery` (an unsigned integer) with the text \"30\" | write a number without quotes, or read `battery` as a number",
            "wf.yaml:20:11: error: `when`: unknown name `batery` | did you mean `battery`?",
            "wf.yaml:22:11: error: `later` is captured by step 13, which runs after this one | a `when:` can use only values captured before its step",
            "wf.yaml:24:107: error: a step is `optional` or `continue_on_error`, not both | `optional`: its failure does not fail the device; `continue_on_error`: the device goes on and fails at the end",
            "wf.yaml:25:26: error: unknown CRC `CRC-16/CCITT-FALS` | did you mean `CRC-16/CCITT-FALSE`?",
            "wf.yaml:26:29: error: `set`: slice needs bytes, but the value is an unsigned integer | slice takes bytes: read or declare the value as hex",
            "wf.yaml:29:89: error: `uint8` needs 1 byte, but the slice is 2",
            "inv.yaml:3:5: error: device SN-2: device_key is 8 bytes, but 16 are needed | `device_key` is declared `{ hex: 16, secret: true }` at $DIR/wf.yaml:3:3",
            "inv.yaml:4:5: error: device SN-3: min_battery: 300 does not fit in uint8 (0...255) | `min_battery` is declared `uint8` at $DIR/wf.yaml:5:3",
        ]
        let got = try Self.diagnostics(workflow, inventory)
        #expect(got == expected, "\(got.joined(separator: "\n"))")
        #expect(!got.joined().contains("0011223344556677"), "a secret's value is never quoted")
    }

    @Test func declarationsLimitsAndSetAreCheckedToo() throws {
        let workflow = """
            name: t
            vars:
              id: utf8
              key: { hex: 16, secret: true, colour: red }
              n: { uint8: 4 }
            steps:
              - connect: {}
              - read: { id: fw, service: 180A, characteristic: 2A26, as: version }
              - read: { id: label, service: 180A, characteristic: 2A24, as: utf8 }
              - verify: { value: "${fw}", equals: "${expected}", version_below: "x.y" }
              - verify: { value: "${label}", min: "${min_battery}" }
              - verify: { value: "${fw}", equals: 3 }
              - when: "fw >= 2.0.0 and (label == \\"a\\""
                sleep: 1ms
              - name: commit
                write: { service: FFF0, characteristic: FFF1, value: { hex: "02" }, irreversible: true }
                optional: true
              - set: { id: both, concat: ["${label}", "${fw}"] }
              - set: { id: b2, concat: ["${label}", "-x"], start: 1 }
              - read: { id: raw, service: 180A, characteristic: 2A24 }
              - write: { service: FFF0, characteristic: FFF1, value: { utf8: "${raw}" } }
              - verify: { value: "${fw}", version_at_least: "${expected}" }
            """
        let inventory = """
            devices:
              - { id: SN-1, name: S1, vars: { min_battery: "20", expected: "2.4.1" } }
              - { id: SN-2, name: S2, vars: { min_battery: "low", expected: "two" } }
            """
        let expected = [
            "wf.yaml:3:3: error: `id` is a built-in name; it is not declared | `id`, `name` and `address` come from the inventory and are text",
            "wf.yaml:4:33: error: unknown key `colour` in the declaration of `key` | a declaration is `{ FORMAT: LENGTH, secret: true }`",
            "wf.yaml:5:6: error: `n`: a length applies to hex and utf8 values, not to uint8",
            "wf.yaml:10:69: error: `version_below`: \"x.y\" is not a version (such as 2.4.1 or 1.9.0-rc1): component 1 (\"x\") is not a number | write a version, like `2.0.0`",
            "wf.yaml:11:39: error: `min`: min needs a number, but the value is text | min and max need a number (read the value as: uint8, sfloat, …)",
            "wf.yaml:13:41: error: `when`: missing `)` to close the `(` at column 17",
            "wf.yaml:17:15: error: an irreversible step cannot be `optional` | a device whose irreversible write failed must stop there; remove the key",
            "wf.yaml:18:43: error: `${fw}` is a version, but `concat` joins text here | join the text in one template: `\"${label}${fw}\"` is text",
            "wf.yaml:19:48: error: `start` does not go with `concat` | `concat` takes `id`, `concat`",
            "wf.yaml:21:67: error: `${raw}` is bytes, but `utf8:` needs text | write it with `{ hex: \"${raw}\" }`",
            "wf.yaml:22:50: error: step `verify ${fw}`: `version_at_least` cannot be read for 1 device (SN-2): \"two\" is not a version (such as 2.4.1 or 1.9.0-rc1): component 1 (\"two\") is not a number | fix the variable in the inventory, or declare it in `vars:` with its type; SN-2 is at $DIR/inv.yaml:3:5",
        ]
        let got = try Self.diagnostics(workflow, inventory)
        #expect(got == expected, "\(got.joined(separator: "\n"))")
    }

    @Test func theTypedFormsParseIntoTheirModel() throws {
        let w = try Self.parse("""
            name: t
            vars:
              config: { hex: [1, 200] }
              device_key: { hex: 16, secret: true }
              site: utf8
            steps:
              - connect
              - read: { id: fw, service: 180A, characteristic: 2A26, as: version }
              - read: { id: battery, service: 180F, characteristic: 2A19, as: uint8, optional: true }
              - read: { id: temp, service: 1809, characteristic: 2A1C, as: float, continue_on_error: true }
              - name: update old firmware
                when: fw < 2.0.0 and battery >= 30
                write: { service: FFF0, characteristic: FFF1, value: [{ hex: "${config}" }, { uint8: "${battery}" }] }
              - set: { id: key_crc, crc: CRC-16/CCITT-FALSE, of: "${device_key}" }
              - set: { id: tail, slice: "${config}", start: -2, length: 1 }
              - set: { id: frame, concat: ["0102", "${config}"] }
              - subscribe: { id: acks, service: FFF0, characteristic: FFF3 }
              - await:
                  subscription: acks
                  matches: { hex: "^4f4b" }
                  capture: { id: lock_state, slice: [2, 1], as: uint8 }
              - await: { subscription: acks, matches: { hex: "^00" }, capture: raw_ack }
              - verify: { value: "${lock_state}", in: [1, 2, 4] }
            """)
        #expect(w.variables["config"] == (try VariableDeclaration(format: .hex, length: 1...200)))
        #expect(w.variables["device_key"]?.secret == true)
        #expect(w.secretNames == ["device_key", "key_crc"], "a value derived from a secret is secret")
        #expect(w.captureTypes == ["fw": .version, "battery": .integer(signed: false), "temp": .real, "key_crc": .integer(signed: false),
                                   "tail": .bytes, "frame": .bytes, "lock_state": .integer(signed: false), "raw_ack": .bytes])
        #expect(w.steps[2].onFailure == .optional && w.steps[3].onFailure == .continueOnError && w.steps[1].onFailure == .stop)
        let condition = try #require(w.steps[4].condition)
        #expect(condition.source == "fw < 2.0.0 and battery >= 30")
        #expect(condition.mark == SourceMark(line: 12, column: 11))
        #expect(w.steps[4].conditionNames == ["fw", "battery"])
        guard case .derive(let crc) = w.steps[5].kind, case .derive(let tail) = w.steps[6].kind, case .derive(let frame) = w.steps[7].kind else {
            Issue.record("not set steps")
            return
        }
        #expect(crc.derivation == .crc(.crc16CCITTFalse) && crc.resultType == .integer(signed: false) && w.steps[5].name == "set key_crc")
        #expect(tail.derivation == .slice(start: -2, length: 1))
        #expect(frame.derivation == .concat && frame.templates.map(\.source) == ["0102", "${config}"])
        guard case .await(let a) = w.steps[9].kind, case .await(let b) = w.steps[10].kind else { Issue.record("not awaits"); return }
        #expect(a.capture == Step.Capture(id: "lock_state", format: .uint8, start: 2, length: 1))
        #expect(b.capture == Step.Capture(id: "raw_ack"))
        #expect(w.inventoryVariables == ["config", "device_key", "site"])
    }

    @Test func aCaptureFromAnAwaitTakesTheSliceOfTheValueThatMatched() throws {
        let c = Step.Capture(id: "s", format: .uint16le, start: -2)
        #expect(try c.value(of: [0x4F, 0x4B, 0x2C, 0x01]) == .integer(300, signed: false))
        #expect(try Step.Capture(id: "s").value(of: [1, 2]) == .bytes([1, 2]))
        #expect(throws: ValueError.self) { try Step.Capture(id: "s", format: .uint8, start: 4, length: 1).value(of: [1, 2]) }
    }

    @Test func theWhenColumnIsTheFileColumnForQuotedAndPlainScalars() throws {
        for (line, column) in [("    when: 'fw < '", 17), ("    when: fw <", 15)] {
            let text = "name: t\nsteps:\n  - read: { id: fw, service: 180A, characteristic: 2A26, as: version }\n  - sleep: 1ms\n\(line)\n"
            let (_, d) = WorkflowParser().parse(bytes: Array(text.utf8), path: "w.yaml")
            let e = try #require(d.first { $0.message.hasPrefix("`when`") })
            #expect(e.mark == SourceMark(line: 5, column: column), "\(e)")
        }
    }

    @Test func limitsReadAsTheValuesTypeAndTemplatesResolvePerDevice() throws {
        let spec = LimitSpecs(min: .template(try Template(parsing: "${min_battery}")), max: .value(.integer(100, signed: false)),
                              oneOf: [.template(try Template(parsing: "${mode}")), .value(.integer(7, signed: false))],
                              versionAtLeast: .template(try Template(parsing: "${fw_min}")))
        let typed: (String) -> TypedValue? = { $0 == "mode" ? .integer(4, signed: false) : nil }
        let text: (String) -> String? = { ["min_battery": "20", "fw_min": "2.0", "mode": "9"][$0] }
        let limits = try spec.resolve(valueType: .integer(signed: false), typed: typed, text: text)
        #expect(limits.min == .integer(20, signed: false))
        #expect(limits.oneOf == [.integer(4, signed: false), .integer(7, signed: false)], "a typed value wins over the text")
        #expect(limits.versionAtLeast == SemanticVersion("2.0"))
        #expect(try LimitSpecs.read("19.5", .number, valueType: .integer(signed: false)) == .real(19.5))
        #expect(try LimitSpecs.read("-3", .number, valueType: .integer(signed: false)) == .integer(-3, signed: true))
        #expect(try LimitSpecs.read("0102", .sameAsValue, valueType: .bytes) == .bytes([1, 2]))
        #expect(throws: ValueError.self) { try spec.resolve(valueType: .integer(signed: false), typed: { _ in nil }, text: { _ in "x" }) }
    }

    @Test func aSecretDeclaredInTheWorkflowIsHiddenLikeAnInventorySecret() throws {
        let dir = try TemporaryDirectory()
        try dir.write("wf.yaml", "name: t\nvars:\n  key: { hex: 4, secret: true }\nsteps:\n  - connect\n  - write: { service: FFF0, characteristic: FFF1, value: { hex: \"01${key}\" } }\n")
        try dir.write("inv.yaml", "devices:\n  - { id: SN-1, name: S1, vars: { key: \"a1b2c3d4\" } }\n")
        let result = Validator.validate(workflowPath: dir.path + "/wf.yaml", inventoryPath: dir.path + "/inv.yaml")
        #expect(result.isValid)
        let inventory = try #require(result.inventory)
        #expect(inventory.isSecret("key"))
        #expect(inventory.redact("sent 01A1B2C3D4", for: inventory.devices[0]) == "sent 01***")
    }
}
