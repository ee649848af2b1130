import Engine
import Workflow

/// The options several commands take, each defined once with its parsing (`TypedOption`): `run`,
/// `scan`, `gatt`, `read`, `write`, `subscribe`, `line` and `report` list these and read them through
/// the same rule, so an option means and says the same everywhere.
enum SharedOptions {
    /// `-a, --adapter SPEC`, repeatable (`run`, `scan`).
    static let adapters = TypedOption(
        OptionSpec("adapter", short: "a", kind: .repeated("SPEC"), help: "adapter: sim, hci:tcp:HOST:PORT, hci:serial:DEV[@BAUD], hci:user:N"),
        parse: AdapterChoice.parse)

    /// `-a, --adapter SPEC`, once (the one-device commands).
    static let adapter = TypedOption(
        OptionSpec("adapter", short: "a", kind: .value("SPEC"), help: "adapter: sim, hci:tcp:HOST:PORT, hci:serial:DEV[@BAUD], hci:user:N"),
        parse: AdapterChoice.parse)

    /// `-i, --inventory FILE`.
    static let inventory = TypedOption<String>(
        OptionSpec("inventory", short: "i", kind: .value("FILE"), role: .input, help: "inventory (YAML, or CSV by its .csv extension)"))

    /// `-l, --limit SEL`: which devices of the inventory (resolved against it by `DeviceSelection`).
    static let limit = TypedOption<String>(
        OptionSpec("limit", short: "l", kind: .value("SEL"), role: .input, help: "devices: ids, globs (SN-00*), comma lists, @file"))

    /// `--json`.
    static let json = OptionSpec("json", kind: .flag, help: "print JSON")

    /// `--trace PATH`.
    static let trace = TypedOption<String>(
        OptionSpec("trace", kind: .value("PATH"), role: .output, help: "protocol trace per adapter: btsnoop for HCI (Wireshark), ATT PDUs for sim"))

    /// `--html PATH`.
    static let html = TypedOption<String>(
        OptionSpec("html", kind: .value("PATH"), role: .output, help: "also write a self-contained HTML report (opens offline)"))

    /// `--line URL` (or PROVISION_LINE): parsed by `LineOption.connectionString`, which also reads the environment.
    static let line = LineOption.spec

    /// `-t, --timeout DURATION` for a command that listens (`scan`) or finds and talks to one device.
    static func timeout(_ help: String, examples: String, positive: Bool) -> TypedOption<Duration> {
        DurationOption.make("timeout", short: "t", help: help, examples: examples, positive: positive)
    }

    /// `--force`, with the help naming the outputs it lets a command replace.
    static func force(replacing outputs: String) -> OptionSpec {
        OptionSpec("force", kind: .flag, help: "replace an existing \(outputs)")
    }
}
