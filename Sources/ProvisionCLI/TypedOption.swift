import Support
import Workflow

/// A command-line option with the rule that turns its text into a value: the one home of an option's
/// wording and parsing, shared by every command that takes it (`SharedOptions`).
///
/// A command lists `spec` among its options; `ParsedArguments.value(_:)` gives the typed value (or the
/// usage error that says why the text is not one).
struct TypedOption<Value: Sendable>: Sendable {
    let spec: OptionSpec
    let parse: @Sendable (String) throws(UsageError) -> Value

    init(_ spec: OptionSpec, parse: @escaping @Sendable (String) throws(UsageError) -> Value) {
        self.spec = spec
        self.parse = parse
    }

    var name: String { spec.name }

    /// The same option described for another command (`--inventory` finds DEVICE for `read`).
    func help(_ text: String) -> TypedOption {
        var copy = spec
        copy.help = text
        return TypedOption(copy, parse: parse)
    }

    /// The same option marked required (shown without brackets in the usage line).
    var required: TypedOption {
        var copy = spec
        copy.isRequired = true
        return TypedOption(copy, parse: parse)
    }
}

extension TypedOption where Value == String {
    /// An option whose value is used as given: a path, a name.
    init(_ spec: OptionSpec) {
        self.init(spec) { text throws(UsageError) in text }
    }
}

extension ParsedArguments {
    /// The option's value, parsed; nil when it was not given.
    func value<V>(_ option: TypedOption<V>) throws(UsageError) -> V? {
        guard let text = value(option.name) else { return nil }
        return try option.parse(text)
    }

    /// The text of an option taken as given (a path, a name).
    func text(_ option: TypedOption<String>) -> String? { value(option.name) }

    /// Every value of a repeated option, parsed, in order.
    func values<V>(_ option: TypedOption<V>) throws(UsageError) -> [V] {
        var out: [V] = []
        for text in values(option.name) { out.append(try option.parse(text)) }
        return out
    }

    /// Whether a flag was given.
    func flag(_ spec: OptionSpec) -> Bool { flag(spec.name) }

    /// Whether the option was given at all (a value or a flag).
    func has(_ spec: OptionSpec) -> Bool { flag(spec.name) || !values(spec.name).isEmpty }
}

/// Durations on the command line: always with a unit, as in workflow files (`DurationText`).
enum DurationOption {
    /// `--NAME DURATION`. The message names the option, the examples and the lower bound: `minimum`
    /// (inclusive, said in the message) or, with `positive`, anything above zero.
    static func make(_ name: String, short: Character? = nil, help: String, examples: String, minimum: Duration? = nil,
                     positive: Bool = false) -> TypedOption<Duration> {
        TypedOption(OptionSpec(name, short: short, kind: .value("DURATION"), help: help)) { text throws(UsageError) in
            let bound = minimum.map { " of at least \(DurationText.format($0))" } ?? ""
            guard case .success(let d) = DurationText.parse(text), d >= (minimum ?? .zero), !positive || d > .zero else {
                throw UsageError("`--\(name)` must be a duration with a unit\(bound) (\(examples)), not `\(text)`")
            }
            return d
        }
    }
}

/// Whole numbers on the command line.
enum NumberOption {
    /// `--NAME N` from `range`; the message says which numbers are allowed.
    static func make(_ name: String, short: Character? = nil, meta: String = "N", help: String, in range: ClosedRange<Int>,
                     wording: String) -> TypedOption<Int> {
        TypedOption(OptionSpec(name, short: short, kind: .value(meta), help: help)) { text throws(UsageError) in
            guard let n = Int(text), range.contains(n) else { throw UsageError("`--\(name)` must be \(wording), not `\(text)`") }
            return n
        }
    }
}
