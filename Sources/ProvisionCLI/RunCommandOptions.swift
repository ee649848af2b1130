import Engine
import Foundation
import LineDatabase
import PostgresClient
import Support
import Workflow

/// `provision run`'s command line, parsed once: every option as the value it means. Nothing after
/// `parse` looks an option up by name.
struct RunCommandOptions: Sendable {
    /// Where `--events` go.
    enum EventsTarget: Sendable, Equatable {
        /// `--events -`: standard output carries the events and nothing else.
        case standardOutput
        case file(String)
    }

    /// `--max-failures`: the threshold, and the text as the report shows it.
    struct MaxFailures: Sendable, Equatable {
        var text: String
        var threshold: FailureThreshold
    }

    /// A command line that cannot run: exit 2 with the message (and the usage line when `showsUsage`),
    /// or the problems of the defaults file, each at its position.
    struct Problem: Error, Sendable {
        var message: String
        var hint: String?
        var showsUsage = true
        var diagnostics: [Diagnostic] = []
    }

    var workflow: String
    var inventory: String
    /// `--secrets FILE`.
    var secrets: String?
    var adapters: [AdapterChoice]
    /// `--concurrency`; nil: the default.
    var concurrency: Int?
    var slots: Int?
    var limit: String?
    var maxFailures: MaxFailures?
    var stopGrace: Duration = .seconds(30)
    var seed: UInt64 = 1
    var simLatency: Double = 1
    var simHears: String?
    var retryFailed = false
    /// `--recheck`: devices in review to ask again (with `--resume`, or on a line: then the station
    /// claims only these).
    var recheck: Set<String> = []
    /// `--max-consecutive-failures`.
    var maxConsecutiveFailures: Int?
    /// `--meta KEY=VALUE`, over the inventory's `meta:`.
    var meta: [String: String] = [:]
    /// `--station NAME` (or the defaults file's `station:`): the station's name on the report and every
    /// device record, and on a line; nil: the host name.
    var station: String?
    /// `--sim-model`: the device model, over the inventory's.
    var simModel: String?
    /// `--on-device CMD` and `--on-device-timeout`: a command per finished device.
    var onDevice: OnDeviceHook.Settings?
    var force = false
    var dryRun = false
    var quiet = false
    var verbose = false
    var fsync = true
    var report: String?
    var journal: String?
    var resume: String?
    var events: EventsTarget?
    var junit: String?
    var html: String?
    var trace: String?
    var bonds: String?
    var simState: String?
    var simDump: String?
    var spool: String?
    /// `--line` and its options; nil for a run with a journal.
    var line: LineSettings?
    /// `--json`: the run's ending as one JSON object on standard output.
    var json = false
    /// The defaults file read (`--config`, or `.provision.yaml` beside the workflow).
    var defaults: StationDefaults?
    /// The words the command was given, for the command that resumes it.
    var words: [String] = []

    /// The concurrency a run uses when `--concurrency` is not given.
    static let defaultConcurrency = 16

    /// Checks and converts the whole command line; the first problem, in the order the options are
    /// listed below, is the one reported.
    static func parse(_ arguments: ParsedArguments, context: CommandContext) throws(Problem) -> RunCommandOptions {
        guard let workflow = arguments.positionals.first else { throw Problem(message: "missing WORKFLOW") }
        guard let inventory = arguments.text(SharedOptions.inventory) else {
            throw Problem(message: "`--inventory FILE` is required for a run")
        }
        // The defaults file: named, or beside the workflow.
        var defaults: StationDefaults?
        if let path = arguments.text(config) ?? StationDefaults.beside(workflow: workflow, currentDirectory: context.currentDirectory) {
            let loaded = StationDefaults.load(path, currentDirectory: context.currentDirectory)
            // Every problem of the file at once: its own, and its adapters' specs.
            var problems = loaded.diagnostics
            do throws(Problem) { _ = try loaded.defaults?.adapterChoices() } catch { problems += error.diagnostics }
            do throws(Problem) { _ = try loaded.defaults?.stationName() } catch { problems += error.diagnostics }
            guard let d = loaded.defaults, problems.isEmpty else {
                throw Problem(message: "", showsUsage: false, diagnostics: problems.sorted { $0.mark < $1.mark })
            }
            defaults = d
        }
        do {
            var o = try parse(arguments, workflow: workflow, inventory: inventory, defaults: defaults, context: context)
            o.words = arguments.words
            return o
        } catch let e as Problem {
            throw e
        } catch let e as UsageError {
            throw Problem(message: e.message)
        } catch {
            throw Problem(message: "\(error)")
        }
    }

    private static func parse(_ a: ParsedArguments, workflow: String, inventory: String, defaults: StationDefaults?,
                              context: CommandContext) throws -> RunCommandOptions {
        var o = RunCommandOptions(workflow: workflow, inventory: inventory, adapters: [])
        o.defaults = defaults
        o.secrets = a.text(SharedOptions.secrets)
        // Numbers and choices first: usage errors are exit 2 before anything else happens.
        o.concurrency = try a.value(concurrency) ?? defaults?.concurrency
        o.slots = try a.value(slots)
        o.maxFailures = try a.value(maxFailures)
        o.seed = try a.value(seed) ?? o.seed
        o.stopGrace = try a.value(stopGrace) ?? o.stopGrace
        o.simLatency = try a.value(simLatency) ?? o.simLatency
        o.resume = a.text(resume)
        o.retryFailed = a.flag(retryFailed)
        if o.retryFailed && o.resume == nil {
            throw UsageError("`--retry-failed` needs `--resume JOURNAL` (it runs again the devices a resumed run failed before)")
        }
        if let ids = a.text(recheck) {
            o.recheck = Set(ids.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
        }
        o.maxConsecutiveFailures = try a.value(maxConsecutiveFailures)
        for (key, value) in try a.values(meta) { o.meta[key] = value }
        o.station = try a.value(station) ?? defaults?.stationName()
        o.journal = a.text(journal)
        o.fsync = !a.flag(noFsync)
        // The line: its options mean nothing without it, and a line station has no journal to resume.
        switch LineOption.connectionString(a, context) ?? defaults?.lineConnectionString {
        case nil:
            if let name = (LineSettings.specs + [spool.spec]).first(where: { a.has($0) })?.name {
                throw UsageError("`--\(name)` works on a line: give `--line URL` (or set PROVISION_LINE)")
            }
            if a.has(recheck.spec), o.resume == nil {
                throw UsageError("`--recheck` needs `--resume JOURNAL` (it asks again the devices a run left in review), or `--line URL` (the devices under review on the line)")
            }
        case .failure(let e)?:
            throw e
        case .success(let cs)?:
            o.line = try LineSettings.parse(a, connectionString: cs, journal: o.journal != nil, resume: o.resume != nil || o.retryFailed,
                                            fsync: o.fsync)
        }
        o.adapters = try a.values(SharedOptions.adapters)
        if o.adapters.isEmpty, let defaults { o.adapters = try defaults.adapterChoices() }
        if o.adapters.isEmpty {
            throw Problem(message: "no adapter: give `--adapter sim` to run on the simulated fleet, or a radio such as `--adapter hci:tcp:127.0.0.1:9000`",
                          hint: "a run never falls back to the simulator by itself", showsUsage: false)
        }
        if let r = o.resume, let j = o.journal, r != j {
            throw UsageError("`--resume \(r)` continues that journal; `--journal \(j)` names another (give one of them)")
        }
        o.limit = a.text(SharedOptions.limit)
        o.simHears = a.text(simHears)
        o.simModel = a.text(simModel)
        if let command = a.text(onDevice) {
            o.onDevice = OnDeviceHook.Settings(command: command, timeout: try a.value(onDeviceTimeout) ?? .seconds(10))
        } else if a.has(onDeviceTimeout.spec) {
            throw UsageError("`--on-device-timeout` goes with `--on-device CMD`")
        }
        if o.simModel != nil, !o.adapters.contains(.simulator) { throw UsageError("`--sim-model` goes with `--adapter sim`") }
        o.force = a.flag(force)
        o.dryRun = a.flag(dryRun)
        o.quiet = a.flag(quiet)
        o.verbose = a.flag(verbose)
        o.events = try a.value(events)
        o.report = a.text(report)
        o.junit = a.text(junit)
        o.html = a.text(SharedOptions.html)
        o.trace = a.text(SharedOptions.trace)
        o.bonds = a.text(bonds) ?? defaults?.bonds
        o.simState = a.text(simState)
        o.simDump = a.text(simDump)
        o.spool = a.text(spool)
        o.json = a.flag(SharedOptions.json)
        if o.json, o.events == .standardOutput {
            throw UsageError("`--json` and `--events -` both write to standard output: give one of them")
        }
        return o
    }

    /// The concurrency of the run: `--concurrency` (or the defaults file's), else 16, lowered to the
    /// connection slots the adapters hold together when they hold fewer (one HCI controller: 8), so a
    /// run with its defaults asks no more of its radios than they can do.
    var effectiveConcurrency: Int {
        if let concurrency { return concurrency }
        let held = adapters.reduce(0) { $0 + AdapterFactory.expectedSlots($1, slots: slots) }
        return max(1, min(Self.defaultConcurrency, held))
    }

    /// The options as the report shows them (`run.options`).
    /// `inventoryMeta`: the inventory's `meta:`, kept as `meta.KEY` with `--meta` over it.
    func reported(concurrency: Int, lineRun: String?, inventoryMeta: [String: String] = [:]) -> [String: String] {
        var r: [String: String] = ["concurrency": "\(concurrency)", "seed": "\(seed)", "adapters": adapters.map(\.spec).joined(separator: ",")]
        if let limit { r["limit"] = limit }
        if let maxFailures { r["max_failures"] = maxFailures.text }
        if let maxConsecutiveFailures { r["max_consecutive_failures"] = "\(maxConsecutiveFailures)" }
        for (key, value) in Self.metaOptions(inventoryMeta.merging(meta) { _, given in given }) { r[key] = value }
        if let slots { r["slots"] = "\(slots)" }
        if let bonds { r["bonds"] = bonds }
        if let defaults { r["defaults"] = defaults.path }
        if adapters.contains(.simulator) { r["sim_latency"] = "\(simLatency)" }
        if let line, let lineRun {
            r["line_run"] = lineRun
            r["claim"] = line.policy.heardOnly ? "heard" : "all"
            r["lease"] = DurationText.format(line.lease)
        }
        return r
    }

    // MARK: The options

    static let concurrency = NumberOption.make("concurrency", short: "c",
                                               help: "devices in flight at once (default \(defaultConcurrency), or the adapters' connection slots together when fewer)",
                                               in: 1...10_000, wording: "a whole number from 1 to 10000")
    static let slots = NumberOption.make("slots", help: "connection slots per adapter (default: the adapter's limit)", in: 1...Int.max,
                                         wording: "a positive whole number")
    static let report = TypedOption<String>(OptionSpec("report", kind: .value("PATH"), role: .output,
                                                       help: "report path (default reports/<workflow>-<time>.json)"))
    static let journal = TypedOption<String>(OptionSpec("journal", kind: .value("PATH"), role: .output,
                                                        help: "journal path (default beside the report, .journal)"))
    static let resume = TypedOption<String>(OptionSpec("resume", kind: .value("JOURNAL"), role: .output,
                                                       help: "resume a crashed or interrupted run from its journal"))
    static let config = TypedOption<String>(OptionSpec("config", kind: .value("PATH"), role: .input,
                                                       help: "defaults for --adapter, --concurrency, --bonds, --line and --station (default: .provision.yaml beside WORKFLOW)"))
    /// What each output option writes (`OutputPaths.Kind`): `--force` replaces documents and streams.
    static let outputKinds: [(option: String, kind: OutputPaths.Kind)] = [
        ("report", .document), ("journal", .journal), ("resume", .journal), ("events", .stream), ("junit", .document),
        ("html", .document), ("trace", .stream), ("bonds", .state), ("sim-state", .state), ("sim-dump", .document), ("spool", .spool),
    ]
    static let force: OptionSpec = {
        let replaced = outputKinds.filter { $0.kind == .document || $0.kind == .stream }.map { "--\($0.option)" }
        let kept = outputKinds.filter { $0.kind != .document && $0.kind != .stream }.map { "--\($0.option)" }
        return SharedOptions.force(replacing: "\(replaced.joined(separator: ", ")) file or the retry file beside the report"
                                   + " (never \(kept.joined(separator: ", ")), nor an input)")
    }()
    static let retryFailed = OptionSpec("retry-failed", kind: .flag, help: "with --resume: run devices that failed before again")
    /// The run's metadata as options (`meta.KEY`): a journal's header and a line's run keep it.
    static func metaOptions(_ meta: [String: String]) -> [String: String] {
        Dictionary(uniqueKeysWithValues: meta.map { ("meta.\($0.key)", $0.value) })
    }
    static let recheck = TypedOption<String>(OptionSpec("recheck", kind: .value("IDS"),
                                                        help: "with --resume or --line: ask these devices in review again (their step's confirm read; comma list)"))
    static let maxConsecutiveFailures = NumberOption.make("max-consecutive-failures", help: "stop the line after N devices in a row failed (any kind)",
                                                          in: 1...Int.max, wording: "a whole number above 0")
    static let meta = TypedOption(OptionSpec("meta", kind: .repeated("KEY=VALUE"),
                                             help: "run metadata shown in every report (operator=ana, lot=L-42; over the inventory's meta:)")) {
        text throws(UsageError) -> (String, String) in
        let parts = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, let key = parts.first, !key.isEmpty,
              key.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" || $0 == "." }) else {
            throw UsageError("`--meta` is KEY=VALUE with a KEY of letters, digits, `_`, `-` or `.` (operator=ana), not `\(text)`")
        }
        return (String(key), String(parts[1]))
    }
    static let station = TypedOption(OptionSpec("station", kind: .value("NAME"),
                                                help: "this station's name, on the report and every device record (and on the line, with --line; default: the host name)")) {
        name throws(UsageError) -> String in
        guard isStationName(name) else { throw UsageError("`--station` must be \(stationNameRule)") }
        return name
    }
    /// What a station's name must be (`--station`, the defaults file's `station:`): a line keeps it, and
    /// reports group and filter by it.
    static let stationNameRule = "a name of 1 to 100 characters without `/` or control characters"
    static func isStationName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 100 && !name.contains("/")
            && !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
    }
    static let onDevice = TypedOption<String>(OptionSpec("on-device", kind: .value("CMD"),
                                                         help: "run CMD (sh -c) for each finished device, its record as JSON on stdin; a failure is recorded, never stops the run"))
    static let onDeviceTimeout = DurationOption.make("on-device-timeout", help: "stop an --on-device command after this long (default 10s)",
                                                     examples: "10s, 1m")
    static let simModel = TypedOption<String>(OptionSpec("sim-model", kind: .value("PATH"), role: .input,
                                                         help: "simulator: the device model (a CSV inventory cannot name one; wins over the inventory's)"))
    static let maxFailures = TypedOption(OptionSpec("max-failures", kind: .value("N|P%"),
                                                    help: "stop the line after N (or P% of finished) devices failed for the fixture (timeout, not found, connection, adapter; not product rejects)")) {
        text throws(UsageError) -> MaxFailures in
        guard let t = FailureThreshold(text) else { throw UsageError("`--max-failures` must be a count (5) or a percentage (10%), not `\(text)`") }
        return MaxFailures(text: text, threshold: t)
    }
    static let stopGrace = DurationOption.make("stop-grace", help: "how long in-flight devices may finish after Ctrl-C (default 30s)",
                                               examples: "30s, 2m")
    static let seed = TypedOption(OptionSpec("seed", kind: .value("N"), help: "seed for jitter and the simulator (default 1)")) {
        text throws(UsageError) -> UInt64 in
        guard let n = UInt64(text) else { throw UsageError("`--seed` must be a non-negative whole number, not `\(text)`") }
        return n
    }
    static let dryRun = OptionSpec("dry-run", kind: .flag, help: "validate and print the plan; touch no device")
    static let quiet = OptionSpec("quiet", short: "q", kind: .flag, help: "no progress output")
    static let verbose = OptionSpec("verbose", short: "v", kind: .flag,
                                    help: "HCI adapters: also print what the host learns of each controller and decides (fallbacks, connections)")
    static let events = TypedOption(OptionSpec("events", kind: .value("PATH"), role: .output,
                                               help: "write every event as JSON lines (- for standard output)")) {
        text throws(UsageError) -> EventsTarget in text == "-" ? .standardOutput : .file(text)
    }
    static let junit = TypedOption<String>(OptionSpec("junit", kind: .value("PATH"), role: .output,
                                                      help: "also write a JUnit XML report (a test case per device and step)"))
    static let bonds = TypedOption<String>(OptionSpec("bonds", kind: .value("PATH"), role: .output,
                                                      help: "keep pairing keys here (mode 0600): later runs encrypt with them instead of pairing again"))
    static let simState = TypedOption<String>(OptionSpec("sim-state", kind: .value("PATH"), role: .output,
                                                         help: "simulator: keep the virtual devices' state in this file"))
    static let simDump = TypedOption<String>(OptionSpec("sim-dump", kind: .value("PATH"), role: .output,
                                                        help: "simulator: write the devices' final state (JSON) here"))
    static let simLatency = TypedOption(OptionSpec("sim-latency", kind: .value("SCALE"),
                                                   help: "simulator: latency scale (0 none, 1 the model's; default 1)")) {
        text throws(UsageError) -> Double in
        guard let v = Double(text), v >= 0, v <= 100 else { throw UsageError("`--sim-latency` must be a number from 0 to 100, not `\(text)`") }
        return v
    }
    static let noFsync = OptionSpec("no-fsync", kind: .flag, help: "write the journal without fsync (survives a crash of provision, not of the machine)")
    static let spool = TypedOption<String>(OptionSpec("spool", kind: .value("PATH"), role: .output,
                                                      help: "with --line: the station's outcomes on its own disk until they are on the line (default beside the report, .spool)"))
    static let simHears = TypedOption<String>(OptionSpec("sim-hears", kind: .value("SEL"), role: .input,
                                                         help: "simulator: only these devices are in this station's range (ids, globs, @file)"))

    /// Every option of `provision run`, in `--help` order.
    static let specs: [OptionSpec] = [
        SharedOptions.inventory.required.spec, SharedOptions.adapters.required.spec, concurrency.spec, slots.spec, report.spec, journal.spec, resume.spec,
        force, retryFailed, recheck.spec, SharedOptions.limit.spec, maxFailures.spec, maxConsecutiveFailures.spec, meta.spec, station.spec, stopGrace.spec, seed.spec, dryRun, quiet, verbose, events.spec,
        junit.spec, SharedOptions.html.spec, SharedOptions.trace.spec, bonds.spec, simState.spec, simDump.spec, simLatency.spec, simModel.spec, onDevice.spec, onDeviceTimeout.spec, noFsync,
        SharedOptions.line,
    ] + LineSettings.specs + [spool.spec, simHears.spec, config.spec, SharedOptions.secrets.spec,
                              OptionSpec("json", kind: .flag, help: "print how the run ended (report, journal, summary, resume command) as one JSON object")]
}

extension RunCommandOptions {
    /// The engine's options for this run (its record is the store the station opened).
    func engineOptions(paths: RunPaths, concurrency: Int, lineRun: String?, inventoryMeta: [String: String] = [:]) -> RunOptions {
        var e = RunOptions(reportPath: paths.absolute(paths.report))
        e.concurrency = concurrency
        e.slotsPerAdapter = slots
        e.junitPath = junit.map(paths.absolute)
        e.retryFailed = retryFailed
        e.maxFailures = maxFailures?.threshold
        e.maxConsecutiveFailures = maxConsecutiveFailures
        e.recheck = recheck
        e.meta = meta
        // The station's name on the run and on every record (with a line, also its name there).
        if let station { e.station = station }
        e.seed = seed
        e.stopGrace = stopGrace
        e.toolVersion = ProvisionCLI.version
        e.reportOptions = reported(concurrency: concurrency, lineRun: lineRun, inventoryMeta: inventoryMeta)
        return e
    }
}

extension Station.Setup {
    /// What the station opens for a run with these options, every path absolute.
    init(_ o: RunCommandOptions, paths: RunPaths, workflow: Workflow, inventory: Inventory, lineRun: String?, hears: [InventoryDevice]?,
         interactive: Bool) {
        let store: Station.Store
        if let line = o.line, let lineRun {
            let run = LineRun(id: lineRun, workflow: LineFile(name: workflow.name, path: workflow.path, sha256: workflow.sha256),
                              inventory: LineFile(path: inventory.path, sha256: inventory.sha256),
                              // The run's metadata, for the merged report (`meta.KEY`).
                              options: RunCommandOptions.metaOptions(inventory.meta.merging(o.meta) { _, given in given }),
                              toolVersion: ProvisionCLI.version, captureTypes: workflow.captureTypes.mapValues(\.name),
                              checksums: workflow.checksumWidths.isEmpty ? nil : workflow.checksumWidths)
            var settings = line.storeSettings(run: run, station: o.station, adapters: o.adapters.map(\.spec), devices: inventory.devices.map(\.id),
                                              spoolPath: paths.absolute(paths.spool))
            if !o.recheck.isEmpty {
                settings.recheck = LineRecheck(devices: inventory.devices.map(\.id).filter(o.recheck.contains),
                                               steps: workflow.confirmableSteps.map { workflow.steps[$0].name })
            }
            store = .line(settings)
        } else {
            store = .journal(path: paths.absolute(paths.journal), fsync: o.fsync, resume: o.resume != nil)
        }
        let events: RunCommandOptions.EventsTarget? = switch o.events {
        case .file(let path)?: .file(paths.absolute(path))
        case let other: other
        }
        self.init(events: events, progress: !o.quiet, interactive: interactive, bonds: o.bonds.map(paths.absolute), store: store,
                  adapters: o.adapters.enumerated().map { i, a in (a, paths.traces.isEmpty ? nil : paths.absolute(paths.traces[i])) },
                  inventory: inventory, seed: o.seed, simLatency: o.simLatency, simState: o.simState.map(paths.absolute),
                  simDump: o.simDump.map(paths.absolute), slots: o.slots, verbose: o.verbose, hears: hears, stopGrace: o.stopGrace,
                  workflowPath: paths.absolute(o.workflow), onDevice: o.onDevice)
    }
}

extension StationDefaults {
    /// The adapters the file names, each checked as `--adapter` is; a bad one is refused at its position.
    func adapterChoices() throws(RunCommandOptions.Problem) -> [AdapterChoice] {
        var choices: [AdapterChoice] = []
        var problems: [Diagnostic] = []
        for a in adapters {
            do {
                choices.append(try AdapterChoice.parse(a.value, shownAs: "adapter: \(a.value)"))
            } catch {
                problems.append(Diagnostic(path: path, mark: a.mark, message: error.message))
            }
        }
        if !problems.isEmpty { throw RunCommandOptions.Problem(message: "", showsUsage: false, diagnostics: problems) }
        return choices
    }

    /// The file's station name, checked as `--station` is (nil when the file names none); a bad one is
    /// refused at its position.
    func stationName() throws(RunCommandOptions.Problem) -> String? {
        guard let station else { return nil }
        guard RunCommandOptions.isStationName(station.value) else {
            throw RunCommandOptions.Problem(message: "", showsUsage: false, diagnostics: [
                Diagnostic(path: path, mark: station.mark, message: "`station` must be \(RunCommandOptions.stationNameRule)"),
            ])
        }
        return station.value
    }

    /// The file's line, as `LineOption.connectionString` gives one (nil when the file names none).
    var lineConnectionString: Result<ConnectionString, UsageError>? {
        guard let line else { return nil }
        do {
            return .success(try ConnectionString(line.value))
        } catch {
            return .failure(UsageError("\(path):\(line.mark): `line` is not a libpq connection string: \(error.message)"))
        }
    }
}
