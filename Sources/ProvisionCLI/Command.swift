import Foundation

/// Process exit codes (DESIGN.md, "Rules that hold everywhere").
public enum ExitCode {
    public static let success: Int32 = 0
    public static let someDevicesFailed: Int32 = 1
    public static let invalidInput: Int32 = 2
    public static let environment: Int32 = 3
    public static let interrupted: Int32 = 130
}

/// What a running command may use: where to print, the environment, the working directory.
public struct CommandContext: Sendable {
    public var output: Output
    public var environment: [String: String]
    public var currentDirectory: String

    public init(output: Output, environment: [String: String] = [:], currentDirectory: String = FileManager.default.currentDirectoryPath) {
        self.output = output
        self.environment = environment
        self.currentDirectory = currentDirectory
    }
}

/// A subcommand of `provision`. Register one in `ProvisionCLI.commands`.
///
/// The parser handles `--help`, unknown options, missing values and the positional count before `run`
/// is called; `run` returns the exit code.
public protocol Command: Sendable {
    /// The word after `provision` (`validate`).
    var name: String { get }
    /// One line for `provision --help`.
    var summary: String { get }
    /// More text for `provision NAME --help` (may be empty).
    var discussion: String { get }
    var options: [OptionSpec] { get }
    var positionals: [PositionalSpec] { get }
    /// Hidden commands (developer tools) are left out of `provision --help`.
    var isHidden: Bool { get }
    /// True for a command that handles SIGINT, SIGTERM and SIGHUP itself (`run`); every other command
    /// is cancelled by the first and exits 130 (`Interruption`).
    var handlesInterruption: Bool { get }
    func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32
}

extension Command {
    public var discussion: String { "" }
    public var isHidden: Bool { false }
    public var handlesInterruption: Bool { false }

    /// `provision validate WORKFLOW [--inventory FILE] ...`
    public var usage: String {
        var parts = ["provision", name]
        for p in positionals { parts.append(p.isOptional ? "[\(p.name)]" : p.name) }
        for o in options {
            switch (o.kind, o.isRequired) {
            case (.repeated, true): parts.append("\(o.synopsis) [\(o.synopsis)]...")
            case (.repeated, false): parts.append("[\(o.synopsis)]...")
            case (_, true): parts.append(o.synopsis)
            case (_, false): parts.append("[\(o.synopsis)]")
            }
        }
        return parts.joined(separator: " ")
    }

    /// The full `--help` text.
    public var help: String {
        var text = "\(summary)\n\nusage: \(usage)\n"
        if !discussion.isEmpty { text += "\n\(discussion)\n" }
        if !positionals.isEmpty {
            text += "\narguments:\n"
            for p in positionals { text += "  " + pad(p.name, 24) + p.help + "\n" }
        }
        text += "\noptions:\n"
        for o in options {
            let short = o.short.map { "-\($0), " } ?? ""
            text += "  " + pad(short + o.synopsis, 24) + (o.isRequired ? "(required) " : "") + o.help + "\n"
        }
        text += "  " + pad(ProvisionCLI.noColor.synopsis, 24) + ProvisionCLI.noColor.help + "\n"
        text += "  " + pad("-h, --help", 24) + "show this help\n"
        return text
    }
}

private func pad(_ s: String, _ width: Int) -> String {
    s.count >= width ? s + "  " : s + String(repeating: " ", count: width - s.count)
}
