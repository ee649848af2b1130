import Workflow

/// `provision validate WORKFLOW [--inventory FILE] [--limit SEL] [--json]` (`--format json`, the older
/// spelling, is kept).
///
/// Exit 0 when valid (a one-line summary on stdout); 2 with every problem on stderr (text) or stdout (json).
public struct ValidateCommand: Command {
    public init() {}

    public let name = "validate"
    public let summary = "check a workflow (and an inventory) without touching any device"
    public let discussion = """
        Every problem is reported, not only the first, as `path:line:column: error: message` with a hint.
        With --inventory, every `${variable}` the workflow uses must resolve for every selected device, every
        declared variable (`vars:`) must have a valid value, and when the inventory names a simulator model,
        the model must read and hold every service and characteristic the workflow uses.
        Exit status: 0 valid, 2 invalid input or usage.
        """
    public let positionals = [PositionalSpec("WORKFLOW", help: "the workflow file (YAML)")]
    /// `--format text|json`: the older spelling of `--json`, kept.
    static let format = TypedOption(OptionSpec("format", kind: .value("text|json"), help: "output format (default text; `json` is --json)")) {
        text throws(UsageError) -> Bool in
        guard text == "text" || text == "json" else { throw UsageError("`--format` must be `text` or `json`, not `\(text)`") }
        return text == "json"
    }

    public let options = [
        SharedOptions.inventory.spec,
        SharedOptions.limit.spec,
        OptionSpec("json", kind: .flag, help: "print the result as one JSON object on standard output"),
        format.spec,
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        let json: Bool
        do throws(UsageError) {
            json = try arguments.value(Self.format) ?? false || arguments.flag(SharedOptions.json)
        } catch {
            out.err("error: \(error.message)")
            out.err("usage: \(usage)")
            return ExitCode.invalidInput
        }
        guard let workflowPath = arguments.positionals.first else { return ExitCode.invalidInput }
        let inventoryPath = arguments.text(SharedOptions.inventory)
        var result = Validator.validate(workflowPath: workflowPath, inventoryPath: inventoryPath, limit: arguments.text(SharedOptions.limit),
                                        currentDirectory: context.currentDirectory)
        result.diagnostics += ModelCheck.diagnostics(result)
        let summary = Self.summary(result)
        if json {
            var extra: [String: String] = ["workflow": workflowPath]
            if let inventoryPath { extra["inventory"] = inventoryPath }
            if result.isValid { extra["summary"] = summary }
            out.writeOut(Diagnostic.json(result.diagnostics, extra: extra))
            return result.isValid ? ExitCode.success : ExitCode.invalidInput
        }
        for d in result.diagnostics {
            out.err(Self.render(d, output: out))
        }
        if result.isValid {
            out.out(escaping: summary)
            return ExitCode.success
        }
        let errors = result.errors.count
        out.err("\(errors) error\(errors == 1 ? "" : "s"); nothing was sent to any device")
        return ExitCode.invalidInput
    }

    /// `path:line:column: error: message` and the hint, with control characters in what the files said
    /// escaped (only the severity's colour is a terminal sequence).
    static func render(_ d: Diagnostic, output: Output) -> String {
        let location = d.path.isEmpty ? "" : "\(ControlCharacters.escaped(d.path)):\(d.line):\(d.column): "
        var text = "\(location)\(output.styled(d.severity.rawValue)): \(ControlCharacters.escaped(d.message))"
        if let hint = d.hint { text += "\n    hint: \(ControlCharacters.escaped(hint))" }
        return text
    }

    /// `valid: sensor-v2-provisioning (workflows/sensor-v2.yaml): 16 steps, 48 of 48 devices selected`
    static func summary(_ result: ValidationResult) -> String {
        guard let workflow = result.workflow else { return "invalid" }
        var text = "valid: \(workflow.name) (\(workflow.path)): \(workflow.steps.count) step\(workflow.steps.count == 1 ? "" : "s")"
        if let inventory = result.inventory {
            text += ", \(result.selectedDevices.count) of \(inventory.devices.count) devices selected (\(inventory.path))"
        } else {
            let vars = workflow.inventoryVariables.sorted()
            if !vars.isEmpty {
                text += "; needs inventory variables \(vars.map { "`\($0)`" }.joined(separator: ", ")) (not checked: no --inventory)"
            }
        }
        return text
    }
}
