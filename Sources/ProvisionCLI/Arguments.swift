import Support

/// One `--option` a command accepts.
public struct OptionSpec: Sendable {
    /// What the option takes.
    public enum Kind: Sendable, Equatable {
        /// A boolean switch (`--dry-run`).
        case flag
        /// One value (`--inventory FILE`); given twice is an error.
        case value(String)
        /// A value that may be given several times (`--adapter hci0 --adapter hci1`).
        case repeated(String)
    }

    /// What a path-valued option's file is to the command.
    public enum Role: Sendable, Equatable {
        /// A file the command reads.
        case input
        /// A file the command writes: `provision run` checks every one before a device is touched
        /// (`OutputPaths`).
        case output
    }

    /// The long name without dashes (`inventory`).
    public var name: String
    public var short: Character?
    public var kind: Kind
    /// For options that name a file: read or written (nil for other options).
    public var role: Role?
    public var help: String
    /// A run cannot do without it (it may still come from a defaults file): the usage line shows it
    /// without brackets and the help marks it `(required)`.
    public var isRequired: Bool

    public init(_ name: String, short: Character? = nil, kind: Kind, role: Role? = nil, help: String, isRequired: Bool = false) {
        self.name = name
        self.short = short
        self.kind = kind
        self.role = role
        self.help = help
        self.isRequired = isRequired
    }

    /// `--inventory FILE`, `--dry-run`.
    var synopsis: String {
        switch kind {
        case .flag: return "--\(name)"
        case .value(let v), .repeated(let v): return "--\(name) \(v)"
        }
    }
}

/// One positional argument.
public struct PositionalSpec: Sendable {
    public var name: String
    public var help: String
    public var isOptional: Bool
    /// The words it may be (`status`, `flush`), for shell completion; empty when it is free text or a file.
    public var choices: [String]
    public init(_ name: String, help: String, isOptional: Bool = false, choices: [String] = []) {
        self.name = name
        self.help = help
        self.isOptional = isOptional
        self.choices = choices
    }
}

/// The arguments a command was given, after parsing.
public struct ParsedArguments: Sendable, Equatable {
    public var positionals: [String] = []
    /// The words as given, in order (for a command that repeats itself: `resume:` after a stopped run).
    public internal(set) var words: [String] = []
    var values: [String: [String]] = [:]
    var flags: Set<String> = []

    public init() {}

    /// The value of a single-value option.
    public func value(_ name: String) -> String? { values[name]?.last }
    /// Every value of a repeated option, in order.
    public func values(_ name: String) -> [String] { values[name] ?? [] }
    /// Whether a flag was given.
    public func flag(_ name: String) -> Bool { flags.contains(name) }
}

/// A command line that cannot be accepted; printed with the usage line, exit 2.
public struct UsageError: Error, Sendable, Equatable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

/// Parses `--flag value`, `--flag=value`, `-x value`, repeated options, flags and positionals; `--` ends options.
public enum ArgumentParser {
    /// Parses `arguments` for a command with these options and positionals. `--help`/`-h` is handled by the caller.
    public static func parse(_ arguments: [String], options: [OptionSpec], positionals: [PositionalSpec]) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        parsed.words = arguments
        var i = 0
        var onlyPositionals = false
        while i < arguments.count {
            let arg = arguments[i]
            i += 1
            if onlyPositionals || arg == "-" || !arg.hasPrefix("-") {
                parsed.positionals.append(arg)
                continue
            }
            if arg == "--" {
                onlyPositionals = true
                continue
            }
            var name: String
            var inline: String?
            if arg.hasPrefix("--") {
                let body = arg.dropFirst(2)
                if let eq = body.firstIndex(of: "=") {
                    name = String(body[body.startIndex..<eq])
                    inline = String(body[body.index(after: eq)...])
                } else {
                    name = String(body)
                }
            } else {
                let body = Array(arg.dropFirst())
                guard body.count >= 1, let spec = options.first(where: { $0.short == body[0] }) else {
                    throw UsageError("unknown option `\(arg)`")
                }
                name = spec.name
                if body.count > 1 { inline = String(body.dropFirst()) }
            }
            guard let spec = options.first(where: { $0.name == name }) else {
                let hint = Suggestions.closest(to: name, in: options.map(\.name)).map { " (did you mean `--\($0)`?)" } ?? ""
                throw UsageError("unknown option `--\(name)`\(hint)")
            }
            switch spec.kind {
            case .flag:
                if inline != nil { throw UsageError("`--\(name)` does not take a value") }
                parsed.flags.insert(name)
            case .value(let meta), .repeated(let meta):
                let value: String
                if let inline {
                    value = inline
                } else {
                    guard i < arguments.count, !(arguments[i].hasPrefix("--") && arguments[i].count > 2) else {
                        throw UsageError("`--\(name)` needs a value (\(meta))")
                    }
                    value = arguments[i]
                    i += 1
                }
                if case .value = spec.kind, parsed.values[name] != nil {
                    throw UsageError("`--\(name)` is given more than once")
                }
                parsed.values[name, default: []].append(value)
            }
        }
        let required = positionals.filter { !$0.isOptional }.count
        if parsed.positionals.count < required {
            let missing = positionals[parsed.positionals.count]
            throw UsageError("missing \(missing.name)")
        }
        if parsed.positionals.count > positionals.count {
            throw UsageError("unexpected argument `\(parsed.positionals[positionals.count])`")
        }
        return parsed
    }
}
