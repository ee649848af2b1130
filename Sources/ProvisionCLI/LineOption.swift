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
    var station: String?
    var lease: Duration = .seconds(30)
    var policy = ClaimPolicy()

    /// Parses `--run`, `--station`, `--lease`, `--claim` and `--idle`, and refuses what a line station
    /// cannot do (`--resume`, `--retry-failed`, `--journal`, `--no-fsync`).
    static func parse(_ arguments: ParsedArguments, connectionString: ConnectionString) -> Result<LineSettings, UsageError> {
        var s = LineSettings(connectionString: connectionString)
        if arguments.value("resume") != nil || arguments.flag("retry-failed") {
            return .failure(UsageError("a line station does not resume a journal: run the same command again and it joins the line's run, whose record is the line database (docs/line.md)"))
        }
        if arguments.value("journal") != nil {
            return .failure(UsageError("a line station writes no journal (the line database is its record); outcomes the line cannot take wait in `--spool PATH`"))
        }
        if arguments.flag("no-fsync") {
            return .failure(UsageError("`--no-fsync` is for the file journal; a line station's intents and outcomes are committed on the line"))
        }
        if let id = arguments.value("run") {
            if let problem = LineOption.problem(withRunID: id) { return .failure(UsageError(problem)) }
            s.runID = id
        }
        if let name = arguments.value("station") {
            guard !name.isEmpty, name.count <= 100, !name.contains("/"),
                  !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                return .failure(UsageError("`--station` must be a name of 1 to 100 characters without `/` or control characters"))
            }
            s.station = name
        }
        func duration(_ name: String, minimum: Duration) -> Result<Duration?, UsageError> {
            guard let text = arguments.value(name) else { return .success(nil) }
            guard case .success(let d) = DurationText.parse(text), d >= minimum else {
                return .failure(UsageError("`--\(name)` must be a duration with a unit of at least \(DurationText.format(minimum)) (30s, 2m), not `\(text)`"))
            }
            return .success(d)
        }
        switch duration("lease", minimum: .seconds(1)) {
        case .failure(let e): return .failure(e)
        case .success(let d): if let d { s.lease = d }
        }
        switch duration("idle", minimum: .zero) {
        case .failure(let e): return .failure(e)
        case .success(let d): if let d { s.policy.idleLimit = d == .zero ? nil : d }
        }
        switch arguments.value("claim") {
        case nil, "heard"?: s.policy.heardOnly = true
        case "all"?: s.policy.heardOnly = false
        case let other?: return .failure(UsageError("`--claim` is `heard` or `all`, not `\(other)`"))
        }
        return .success(s)
    }

    /// The store's settings for a run.
    func storeSettings(run: LineRun, adapters: [String], devices: [String], spoolPath: String) -> LineRunStore.Settings {
        let info = LineStationInfo.thisProcess(name: station, adapters: adapters, toolVersion: ProvisionCLI.version)
        var settings = LineRunStore.Settings(connectionString: connectionString, run: run, station: info, devices: devices,
                                             spoolPath: spoolPath, policy: policy)
        settings.lease = lease
        // An intent waits for an unreachable line at most a third of the lease, and never past 5 s.
        settings.intentWait = min(.seconds(5), lease / 3)
        return settings
    }
}
