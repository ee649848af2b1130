import Foundation
import Support

/// The `provision` command line. `main` parses arguments, runs a command and returns its exit code.
public enum ProvisionCLI {
    /// The tool's version, printed by `provision --version` and written into reports.
    public static let version = "0.1.0"

    /// Every subcommand, in `--help` order. Add new commands here.
    public static let commands: [any Command] = [
        ValidateCommand(),
        RunCommand(),
        ScanCommand(),
        ReportCommand(),
        LineCommand(),
        ReviewCommand(),
        GATTCommand(),
        ReadCommand(),
        WriteCommand(),
        SubscribeCommand(),
        BenchCommand(),
        CompletionCommand(),
        DevInventoryCommand(),
    ]

    /// `--no-color`: taken by every command (and by `provision` itself before the command).
    static let noColor = OptionSpec("no-color", kind: .flag, help: "no colours, as NO_COLOR (every command)")

    /// Runs with the process's stdout/stderr and environment.
    public static func main(_ arguments: [String]) async -> Int32 {
        ProcessEnvironment.prepare()
        let environment = ProcessInfo.processInfo.environment
        let context = CommandContext(output: .standard(environment: environment), environment: environment)
        // A signal ends every command with 130, except those that stop their own way (`run`).
        if let name = arguments.first, commands.first(where: { $0.name == name })?.handlesInterruption == true {
            return await main(arguments, context: context)
        }
        return await Interruption.run(output: context.output) { await main(arguments, context: context) }
    }

    /// Runs with an explicit output and environment (tests capture output this way).
    public static func main(_ arguments: [String], context: CommandContext, commands: [any Command] = ProvisionCLI.commands) async -> Int32 {
        // `--no-color`, anywhere before `--` and for every command: as NO_COLOR.
        var arguments = arguments
        var context = context
        let options = arguments.prefix { $0 != "--" }
        if options.contains(noColor.synopsis) {
            arguments = options.filter { $0 != noColor.synopsis } + arguments.dropFirst(options.count)
            context.output.colorEnabled = false
        }
        let out = context.output
        guard let first = arguments.first else {
            out.writeErr(topHelp(commands))
            return ExitCode.invalidInput
        }
        switch first {
        case "--version", "-V", "version":
            out.out("provision \(version)")
            return ExitCode.success
        case "--help", "-h":
            out.writeOut(topHelp(commands))
            return ExitCode.success
        case "help":
            if arguments.count > 1, let command = commands.first(where: { $0.name == arguments[1] }) {
                out.writeOut(command.help)
            } else {
                out.writeOut(topHelp(commands))
            }
            return ExitCode.success
        default:
            break
        }
        guard let command = commands.first(where: { $0.name == first }) else {
            let names = commands.filter { !$0.isHidden }.map(\.name)
            let hint = Suggestions.closest(to: first, in: names).map { " (did you mean `\($0)`?)" } ?? ""
            out.err("error: \(first.hasPrefix("-") ? "unknown option" : "unknown command") `\(first)`\(hint)")
            out.err("usage: provision <command> [options]   (commands: \(names.joined(separator: ", ")); see `provision --help`)")
            return ExitCode.invalidInput
        }
        let rest = Array(arguments.dropFirst())
        let beforeDashDash = rest.prefix { $0 != "--" }
        if beforeDashDash.contains("--help") || beforeDashDash.contains("-h") {
            out.writeOut(command.help)
            return ExitCode.success
        }
        let parsed: ParsedArguments
        do {
            parsed = try ArgumentParser.parse(rest, options: command.options, positionals: command.positionals)
        } catch {
            out.err("error: \(error.message)")
            out.err("usage: \(command.usage)")
            return ExitCode.invalidInput
        }
        return await command.run(parsed, context: context)
    }

    static func topHelp(_ commands: [any Command]) -> String {
        var text = "provision \(version): provision and audit fleets of Bluetooth Low Energy devices\n\n"
        text += "usage: provision <command> [options]\n\ncommands:\n"
        for c in commands where !c.isHidden {
            text += "  " + c.name.padding(toLength: 12, withPad: " ", startingAt: 0) + c.summary + "\n"
        }
        text += "\n`provision <command> --help` describes a command; `provision --version` prints the version.\n"
        text += "`--no-color` (with any command) or NO_COLOR turns colours off; `provision completion bash|zsh` prints shell completion.\n"
        return text
    }
}
