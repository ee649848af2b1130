import Workflow

/// `provision completion bash|zsh`: a completion script for the shell, made from the commands' own
/// options and arguments, so it never falls behind them.
public struct CompletionCommand: Command {
    public init() {}

    public let name = "completion"
    public let summary = "print shell completion for bash or zsh"
    public let discussion = """
        bash: `source <(provision completion bash)` in ~/.bashrc, or save the script as
        ~/.local/share/bash-completion/completions/provision. zsh: save it as `_provision` in a directory
        of $fpath before `compinit` runs, or `source <(provision completion zsh)` after it. Commands,
        options, files for options and arguments that name files, and the words of options that take one
        of a few (`--claim heard|all`, `--as FORMAT`, `--adapter sim|hci:…`) are completed.
        """
    public let positionals = [PositionalSpec("SHELL", help: "bash or zsh", choices: ["bash", "zsh"])]
    public let options: [OptionSpec] = []

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let commands = ProvisionCLI.commands.filter { !$0.isHidden }
        switch arguments.positionals.first {
        case "bash": context.output.writeOut(Self.bash(commands))
        case "zsh": context.output.writeOut(Self.zsh(commands))
        default:
            context.output.err("error: `provision completion` knows bash and zsh, not `\(arguments.positionals.first ?? "")`")
            context.output.err("usage: \(usage)")
            return ExitCode.invalidInput
        }
        return ExitCode.success
    }

    // MARK: What completes what

    /// How an option's value completes.
    enum Value: Equatable {
        case none
        case files
        case words([String])
    }

    static func value(of o: OptionSpec) -> Value {
        switch o.kind {
        case .flag: return .none
        case .value(let meta), .repeated(let meta): return value(name: o.name, meta: meta, role: o.role)
        }
    }

    private static func value(name: String, meta: String, role: OptionSpec.Role?) -> Value {
        if name == "adapter" { return .words(["sim", "hci:tcp:", "hci:serial:", "hci:user:"]) }
        if name == "as" { return .words(ValueFormat.allCases.map(\.rawValue)) }
        if (role != nil && meta != "SEL") || ["FILE", "PATH", "JOURNAL"].contains(meta) { return .files }
        if meta.contains("|"), !meta.contains("%") { return .words(meta.split(separator: "|").map(String.init)) }
        return .none
    }

    /// How the command's arguments (not options) complete: words, or files when one names a file.
    static func arguments(of c: any Command) -> Value {
        let words = c.positionals.flatMap(\.choices)
        if !words.isEmpty { return .words(words) }
        return c.positionals.contains { ["WORKFLOW", "REPORT", "SPOOL"].contains($0.name) } ? .files : .none
    }

    static func flags(of c: any Command) -> [String] {
        c.options.flatMap { o in ["--\(o.name)"] + (o.short.map { ["-\($0)"] } ?? []) } + ["--no-color", "--help"]
    }

    // MARK: bash

    static func bash(_ commands: [any Command]) -> String {
        var s = """
            # bash completion for provision: source <(provision completion bash)
            _provision() {
                local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
                COMPREPLY=()
                if [[ $COMP_CWORD -eq 1 ]]; then
                    COMPREPLY=($(compgen -W "\(commands.map(\.name).joined(separator: " ")) --help --version --no-color" -- "$cur"))
                    return
                fi
                case "${COMP_WORDS[1]}" in

            """
        for c in commands {
            s += "        \(c.name))\n            case \"$prev\" in\n"
            var byValue: [(Value, [String])] = []
            for o in c.options where o.kind != .flag {
                let names = ["--\(o.name)"] + (o.short.map { ["-\($0)"] } ?? [])
                let v = value(of: o)
                if let i = byValue.firstIndex(where: { $0.0 == v }) { byValue[i].1 += names } else { byValue.append((v, names)) }
            }
            for (v, names) in byValue {
                s += "                \(names.joined(separator: "|"))) \(bashReply(v)) return ;;\n"
            }
            s += "            esac\n"
            s += "            if [[ \"$cur\" == -* ]]; then COMPREPLY=($(compgen -W \"\(flags(of: c).joined(separator: " "))\" -- \"$cur\"))\n"
            s += "            else \(bashReply(arguments(of: c))) fi ;;\n"
        }
        s += """
                esac
            }
            complete -o default -F _provision provision

            """
        return s
    }

    private static func bashReply(_ v: Value) -> String {
        switch v {
        case .none: return ":;"
        case .files: return "COMPREPLY=($(compgen -f -- \"$cur\"));"
        case .words(let w): return "COMPREPLY=($(compgen -W \"\(w.joined(separator: " "))\" -- \"$cur\"));"
        }
    }

    // MARK: zsh

    static func zsh(_ commands: [any Command]) -> String {
        var s = """
            #compdef provision
            # zsh completion for provision: save as _provision in $fpath, or source <(provision completion zsh) after compinit
            _provision() {
                local -a commands
                commands=(

            """
        for c in commands { s += "        '\(c.name):\(zshText(c.summary))'\n" }
        s += """
                )
                if (( CURRENT == 2 )); then
                    _describe -t commands 'provision command' commands
                    return
                fi
                local command=${words[2]}
                shift words
                (( CURRENT-- ))
                case $command in

            """
        for c in commands {
            s += "        \(c.name)) _arguments -s \\\n"
            for o in c.options {
                let names = o.short.map { "{-\($0),--\(o.name)}" } ?? "--\(o.name)"
                let repeated: String
                if case .repeated = o.kind { repeated = "'*'" } else { repeated = "" }
                let help = "'[\(zshText(o.help))]"
                let action: String
                switch o.kind {
                case .flag: action = "'"
                case .value(let meta), .repeated(let meta): action = ":\(zshText(meta)):\(zshAction(value(of: o)))'"
                }
                s += "                \(repeated)\(names)\(help)\(action) \\\n"
            }
            s += "                '--no-color[no colours]'"
            for (i, p) in c.positionals.enumerated() {
                let v: Value = p.choices.isEmpty ? (["WORKFLOW", "REPORT", "SPOOL"].contains(p.name) ? .files : .none) : .words(p.choices)
                s += " \\\n                '\(p.isOptional ? ":" : "")\(i + 1):\(zshText(p.name)):\(zshAction(v))'"
            }
            s += " ;;\n"
        }
        s += """
                esac
            }
            if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
                _provision "$@"
            else
                compdef _provision provision
            fi

            """
        return s
    }

    private static func zshAction(_ v: Value) -> String {
        switch v {
        case .none: return " "
        case .files: return "_files"
        case .words(let w): return "(\(w.map { $0.replacingOccurrences(of: ":", with: "\\:") }.joined(separator: " ")))"
        }
    }

    /// Help text as it may stand inside `'[…]'` or after `:` in a zsh spec: no quotes, brackets or colons.
    private static func zshText(_ text: String) -> String {
        String(text.map { c -> Character in
            switch c {
            case "'": return "’"
            case "[": return "("
            case "]": return ")"
            case ":": return " "
            case "\\", "`", "$": return " "
            default: return c
            }
        })
    }
}
