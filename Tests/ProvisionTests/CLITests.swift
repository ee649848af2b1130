import Foundation
import Testing
@testable import ProvisionCLI

/// Runs `provision ARGS` in-process and captures what it prints.
func run(_ arguments: [String], in directory: String = cliRepositoryRoot) async -> (code: Int32, out: String, err: String) {
    let buffer = OutputBuffer()
    let context = CommandContext(output: buffer.output, environment: [:], currentDirectory: directory)
    let code = await ProvisionCLI.main(arguments, context: context)
    return (code, buffer.stdout, buffer.stderr)
}

let cliRepositoryRoot: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// A temporary copy of the examples that a test may break.
final class BrokenCopy {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.path + "/provision-cli-" + UUID().uuidString
        let fm = FileManager.default
        try fm.createDirectory(atPath: path, withIntermediateDirectories: true)
        try fm.copyItem(atPath: cliRepositoryRoot + "/workflows", toPath: path + "/workflows")
        try fm.copyItem(atPath: cliRepositoryRoot + "/inventory", toPath: path + "/inventory")
    }

    /// Replaces the first occurrence of `old` with `new` in `file`; returns the 1-based line it is on.
    @discardableResult
    func replace(_ file: String, _ old: String, with new: String) throws -> Int {
        let full = path + "/" + file
        let text = try String(contentsOfFile: full, encoding: .utf8)
        guard let range = text.range(of: old) else { throw CocoaError(.fileReadUnknown) }
        let line = text[text.startIndex..<range.lowerBound].filter { $0 == "\n" }.count + 1
        try text.replacingCharacters(in: range, with: new).write(toFile: full, atomically: true, encoding: .utf8)
        return line
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

@Suite struct ValidateCommandTests {
    @Test func theSensorWorkflowWithTheDemoLineIsValid() async {
        let r = await run(["validate", "workflows/sensor-v2.yaml", "--inventory", "inventory/demo-line.yaml"])
        #expect(r.code == 0)
        #expect(r.out == "valid: sensor-v2-provisioning (workflows/sensor-v2.yaml): 15 steps, 48 of 48 devices selected (inventory/demo-line.yaml)\n")
        #expect(r.err == "")
    }

    @Test func theAuditWorkflowAndTheCSVInventoryAreValid() async {
        #expect(await run(["validate", "workflows/fleet-audit.yaml", "--inventory=inventory/demo-line.yaml"]).code == 0)
        #expect(await run(["validate", "workflows/sensor-v2.yaml", "-i", "inventory/line-3.csv"]).code == 0)
    }

    @Test func limitNarrowsTheSelection() async {
        let r = await run(["validate", "workflows/sensor-v2.yaml", "--inventory", "inventory/demo-line.yaml", "--limit", "SN-000*,SN-0042"])
        #expect(r.code == 0)
        #expect(r.out.contains("10 of 48 devices selected"))
    }

    @Test func aBrokenWorkflowCopyPointsAtTheBrokenLine() async throws {
        let copy = try BrokenCopy()
        let line = try copy.replace("workflows/sensor-v2.yaml", "characteristic: 2A26", with: "charateristic: 2A26")
        let r = await run(["validate", "workflows/sensor-v2.yaml", "--inventory", "inventory/demo-line.yaml"], in: copy.path)
        #expect(r.code == 2)
        #expect(r.out == "")
        #expect(r.err.hasPrefix("workflows/sensor-v2.yaml:\(line):36: error: unknown key `charateristic` in `read`\n    hint: did you mean `characteristic`?\n"))
        #expect(r.err.hasSuffix("1 error; nothing was sent to any device\n"))
    }

    @Test func aBrokenInventoryCopyPointsAtTheBrokenLine() async throws {
        let copy = try BrokenCopy()
        let line = try copy.replace("inventory/demo-line.yaml", "\"C0:5E:00:00:00:05\"", with: "\"C0:5E:00:00:00:5\"")
        let dup = try copy.replace("inventory/demo-line.yaml", "id: SN-0009,", with: "id: SN-0008,")
        let r = await run(["validate", "workflows/sensor-v2.yaml", "--inventory", "inventory/demo-line.yaml"], in: copy.path)
        #expect(r.code == 2)
        #expect(r.err.contains("inventory/demo-line.yaml:\(line):45: error: `C0:5E:00:00:00:5` is not a Bluetooth address\n"))
        #expect(r.err.contains("inventory/demo-line.yaml:\(dup):5: error: duplicate device id `SN-0008` (first at line \(dup - 1))\n"))
        #expect(r.err.hasSuffix("2 errors; nothing was sent to any device\n"))
    }

    @Test func aMissingVariableListsTheOffendingDevices() async throws {
        let copy = try BrokenCopy()
        try copy.replace("inventory/demo-line.yaml", "config: \"", with: "confi: \"")
        let r = await run(["validate", "workflows/sensor-v2.yaml", "--inventory", "inventory/demo-line.yaml"], in: copy.path)
        #expect(r.code == 2)
        // The position of the first `${config}` in the example workflow.
        let lines = try String(contentsOfFile: copy.path + "/workflows/sensor-v2.yaml", encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        let lineIndex = try #require(lines.firstIndex { $0.contains("${config}") && !$0.hasPrefix("#") })
        let column = try #require(lines[lineIndex].range(of: "${config}")).lowerBound.utf16Offset(in: lines[lineIndex]) + 1
        #expect(column == 72)
        #expect(r.err.contains("workflows/sensor-v2.yaml:\(lineIndex + 1):\(column): error: `${config}` is not defined for 1 device: SN-0001\n"))
    }

    @Test func jsonFormatPrintsTheSameDiagnostics() async throws {
        let copy = try BrokenCopy()
        try copy.replace("workflows/sensor-v2.yaml", "timeout: 15s", with: "timeout: 15")
        let r = await run(["validate", "workflows/sensor-v2.yaml", "--format", "json"], in: copy.path)
        #expect(r.code == 2)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any])
        #expect(json["valid"] as? Bool == false)
        let diagnostics = try #require(json["diagnostics"] as? [[String: Any]])
        #expect(diagnostics.count == 1)
        #expect(diagnostics.first?["file"] as? String == "workflows/sensor-v2.yaml")
        // Where `timeout: 15s` stands in the example (the scan step).
        let lines = try String(contentsOfFile: copy.path + "/workflows/sensor-v2.yaml", encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        let lineIndex = try #require(lines.firstIndex { $0.contains("timeout: 15") && $0.contains("scan:") })
        #expect(diagnostics.first?["line"] as? Int == lineIndex + 1)
        #expect(diagnostics.first?["column"] as? Int == 57)
        #expect(diagnostics.first?["message"] as? String == "duration `15` has no unit")
    }

    @Test func jsonFormatForAValidWorkflow() async throws {
        let r = await run(["validate", "workflows/fleet-audit.yaml", "--format=json"])
        #expect(r.code == 0)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any])
        #expect(json["valid"] as? Bool == true)
        #expect((json["diagnostics"] as? [Any])?.isEmpty == true)
    }

    @Test func aMissingFileIsExitTwo() async {
        let r = await run(["validate", "workflows/nope.yaml"])
        #expect(r.code == 2)
        #expect(r.err.hasPrefix("workflows/nope.yaml:1:1: error: no such file\n"))
    }
}

@Suite struct CommandLineTests {
    @Test func versionPrintsTheVersion() async {
        let r = await run(["--version"])
        #expect(r.code == 0)
        #expect(r.out == "provision \(ProvisionCLI.version)\n")
    }

    @Test func helpListsVisibleCommands() async {
        let r = await run(["--help"])
        #expect(r.code == 0)
        #expect(r.out.contains("validate"))
        #expect(!r.out.contains("dev-inventory"))
    }

    @Test func noArgumentsPrintsHelpToStderrAndExitsTwo() async {
        let r = await run([])
        #expect(r.code == 2)
        #expect(r.err.contains("usage: provision <command>"))
    }

    @Test func everySubcommandHasHelp() async {
        for command in ProvisionCLI.commands {
            for flag in ["--help", "-h"] {
                let r = await run([command.name, flag])
                #expect(r.code == 0)
                #expect(r.out.contains("usage: \(command.usage)"))
            }
        }
    }

    @Test func unknownCommandIsUsageError() async {
        let r = await run(["valdate", "x.yaml"])
        #expect(r.code == 2)
        #expect(r.err.hasPrefix("error: unknown command `valdate` (did you mean `validate`?)\nusage: provision <command>"))
    }

    @Test func unknownFlagIsUsageError() async {
        let r = await run(["validate", "workflows/sensor-v2.yaml", "--inventroy", "inventory/demo-line.yaml"])
        #expect(r.code == 2)
        #expect(r.err == "error: unknown option `--inventroy` (did you mean `--inventory`?)\nusage: provision validate WORKFLOW [--inventory FILE] [--limit SEL] [--json] [--format text|json]\n")
        #expect(r.out == "")
    }

    @Test func missingValueIsUsageError() async {
        let r = await run(["validate", "workflows/sensor-v2.yaml", "--inventory"])
        #expect(r.code == 2)
        #expect(r.err.hasPrefix("error: `--inventory` needs a value (FILE)\nusage: provision validate"))
        let r2 = await run(["validate", "workflows/sensor-v2.yaml", "--inventory", "--limit", "x"])
        #expect(r2.code == 2)
        #expect(r2.err.hasPrefix("error: `--inventory` needs a value (FILE)"))
    }

    @Test func missingAndExtraPositionalsAreUsageErrors() async {
        let r = await run(["validate"])
        #expect(r.code == 2)
        #expect(r.err.hasPrefix("error: missing WORKFLOW\n"))
        let r2 = await run(["validate", "a.yaml", "b.yaml"])
        #expect(r2.code == 2)
        #expect(r2.err.hasPrefix("error: unexpected argument `b.yaml`\n"))
    }

    @Test func badFormatIsUsageError() async {
        let r = await run(["validate", "workflows/sensor-v2.yaml", "--format", "xml"])
        #expect(r.code == 2)
        #expect(r.err.hasPrefix("error: `--format` must be `text` or `json`, not `xml`"))
    }

    @Test func parserHandlesRepeatedFlagsEqualsFormAndDoubleDash() throws {
        let options = [
            OptionSpec("adapter", kind: .repeated("NAME"), help: ""),
            OptionSpec("dry-run", short: "n", kind: .flag, help: ""),
            OptionSpec("limit", kind: .value("SEL"), help: ""),
        ]
        let positionals = [PositionalSpec("A", help: ""), PositionalSpec("B", help: "", isOptional: true)]
        let p = try ArgumentParser.parse(["--adapter", "hci0", "-n", "x", "--adapter=hci1", "--limit=a,b", "--", "--odd"], options: options, positionals: positionals)
        #expect(p.values("adapter") == ["hci0", "hci1"])
        #expect(p.flag("dry-run"))
        #expect(p.value("limit") == "a,b")
        #expect(p.positionals == ["x", "--odd"])
        #expect(throws: UsageError("`--limit` is given more than once")) {
            try ArgumentParser.parse(["x", "--limit", "a", "--limit", "b"], options: options, positionals: positionals)
        }
        #expect(throws: UsageError("`--dry-run` does not take a value")) {
            try ArgumentParser.parse(["x", "--dry-run=yes"], options: options, positionals: positionals)
        }
        #expect(throws: UsageError("unknown option `-z`")) {
            try ArgumentParser.parse(["x", "-z"], options: options, positionals: positionals)
        }
    }

    @Test func devInventoryWritesALargeValidInventory() async throws {
        let dir = FileManager.default.temporaryDirectory.path + "/provision-dev-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = await run(["dev-inventory", "--devices", "200", "--out", dir])
        #expect(r.code == 0)
        // Everything it refers to is there: the model (validate reads it) and the blobs.
        #expect(FileManager.default.fileExists(atPath: dir + "/models/sensor-v2.yaml"))
        #expect(FileManager.default.fileExists(atPath: dir + "/blobs/blob-3.bin"))
        let v = await run(["validate", "workflows/sensor-v2.yaml", "--inventory", dir + "/inventory.yaml"])
        #expect(v.code == 0)
        #expect(v.out.contains("200 of 200 devices selected"))
        #expect(await run(["dev-inventory", "--devices", "20", "--out", dir, "--csv"]).code == 0)
        #expect(await run(["validate", "workflows/sensor-v2.yaml", "--inventory", dir + "/inventory.csv"]).code == 0)
        #expect(await run(["dev-inventory", "--devices", "2", "--out", dir, "--model", "nope.yaml"]).code == 2)
    }
}
