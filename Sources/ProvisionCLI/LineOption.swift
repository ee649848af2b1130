import Engine
import Foundation
import LineDatabase
import LineStore
import PostgresClient
import Support
import Workflow

/// `--line URL` (or `PROVISION_LINE`): the line database a command works on, as a libpq connection
/// string. The one place commands read it and word its errors.
enum LineOption {
    /// The option every line command takes.
    static let spec = OptionSpec("line", kind: .value("URL"), help: "the line database: a libpq connection string (default: PROVISION_LINE)")
    /// `--run ID` of the commands that read a line.
    static let runSpec = OptionSpec("run", kind: .value("ID"), help: "the line's run (default: the most recently started)")

    /// The connection string given by `--line` or `PROVISION_LINE` (nil when neither is set), or why it
    /// cannot be parsed (its text is never repeated: it may hold a password).
    static func connectionString(_ arguments: ParsedArguments, _ context: CommandContext) -> Result<ConnectionString, UsageError>? {
        let text = arguments.value("line") ?? context.environment["PROVISION_LINE"].flatMap { $0.isEmpty ? nil : $0 }
        guard let text else { return nil }
        do {
            return .success(try ConnectionString(text))
        } catch {
            let source = arguments.value("line") != nil ? "`--line`" : "PROVISION_LINE"
            return .failure(UsageError("\(source) is not a libpq connection string: \(error.message)"))
        }
    }

    /// The run a station joins by default: the workflow's name and the inventory file's name, so every
    /// station given the same workflow and inventory joins the same run (`sensor-v2-provisioning/batch-42`).
    static func defaultRunID(workflow: String, inventoryPath: String) -> String {
        let stem = ((inventoryPath as NSString).lastPathComponent as NSString).deletingPathExtension
        return "\(workflow)/\(stem)"
    }

    /// A run id as the line accepts it: printable, without control characters, at most 200 characters.
    static func problem(withRunID id: String) -> String? {
        if id.isEmpty { return "`--run` needs a run id" }
        if id.count > 200 { return "`--run` is longer than 200 characters" }
        if id.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) { return "`--run` holds a control character" }
        return nil
    }

    /// A line error in words, and the exit code it means: the line unreachable or refusing this tool is
    /// the environment (3); another run's workflow or inventory under the run id is the input (2).
    static func describe(_ error: any Error) -> (message: String, code: Int32) {
        switch error {
        case let e as LineError:
            if case .runMismatch = e { return (e.description + " (give another run id with --run)", ExitCode.invalidInput) }
            return (e.description, ExitCode.environment)
        case let e as PostgresError:
            let hint = e.isConnectionLoss ? "; is the line's database running and reachable from this station?" : ""
            return ("the line database: \(e)\(hint)", ExitCode.environment)
        default:
            return ("\(error)", ExitCode.environment)
        }
    }
}

/// `provision run`'s line options, checked before anything is touched.
struct LineSettings {
    var connectionString: ConnectionString
    /// `--run`, when given.
    var runID: String?
    var lease: Duration = .seconds(30)
    var policy = ClaimPolicy()

    /// Parses `--run`, `--lease`, `--claim` and `--idle`, and refuses what a line station
    /// cannot do (`--resume` and `--retry-failed`, `--journal`, `--no-fsync`: said as given).
    static func parse(_ arguments: ParsedArguments, connectionString: ConnectionString, journal: Bool, resume: Bool,
                      fsync: Bool) throws(UsageError) -> LineSettings {
        var s = LineSettings(connectionString: connectionString)
        if resume {
            throw UsageError("a line station does not resume a journal: run the same command again and it joins the line's run, whose record is the line database (docs/line.md)")
        }
        if journal {
            throw UsageError("a line station writes no journal (the line database is its record); outcomes the line cannot take wait in `--spool PATH`")
        }
        if !fsync {
            throw UsageError("`--no-fsync` is for the file journal; a line station's intents and outcomes are committed on the line")
        }
        s.runID = try arguments.value(run)
        s.lease = try arguments.value(lease) ?? s.lease
        if let idle = try arguments.value(idle) { s.policy.idleLimit = idle == .zero ? nil : idle }
        s.policy.heardOnly = try arguments.value(claim) ?? true
        return s
    }

    // MARK: The options

    static let run = TypedOption(OptionSpec("run", kind: .value("ID"),
                                            help: "with --line: the run to create or join (default: WORKFLOW-NAME/INVENTORY-NAME)")) {
        text throws(UsageError) -> String in
        if let problem = LineOption.problem(withRunID: text) { throw UsageError(problem) }
        return text
    }
    static let lease = DurationOption.make("lease", help: "with --line: how long a claim lasts unless renewed (default 30s)",
                                           examples: "30s, 2m", minimum: .seconds(1))
    /// `--claim heard|all`: true for `heard`.
    static let claim = TypedOption(OptionSpec("claim", kind: .value("heard|all"),
                                              help: "with --line: claim devices this station hears (default), or any, in inventory order")) {
        text throws(UsageError) -> Bool in
        switch text {
        case "heard": return true
        case "all": return false
        default: throw UsageError("`--claim` is `heard` or `all`, not `\(text)`")
        }
    }
    static let idle = DurationOption.make("idle", help: "with --line: stop after claiming nothing for this long (default 1m; 0s: until the run is done)",
                                          examples: "30s, 2m", minimum: .zero)

    /// The options that mean something on a line only, in `--help` order.
    static let specs = [run.spec, lease.spec, claim.spec, idle.spec]

    /// The store's settings for a run. `station`: the station's name on the line (`--station`; nil: the host name).
    func storeSettings(run: LineRun, station: String?, adapters: [String], devices: [String], spoolPath: String) -> LineRunStore.Settings {
        let info = LineStationInfo.thisProcess(name: station, adapters: adapters, toolVersion: ProvisionCLI.version)
        var settings = LineRunStore.Settings(connectionString: connectionString, run: run, station: info, devices: devices,
                                             spoolPath: spoolPath, policy: policy)
        settings.lease = lease
        // An intent waits for an unreachable line at most a third of the lease, and never past 5 s.
        settings.intentWait = min(.seconds(5), lease / 3)
        return settings
    }
}
