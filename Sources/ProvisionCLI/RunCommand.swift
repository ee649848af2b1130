import BLE
import BLESecurity
import BLESimulator
import Dispatch
import Engine
import Foundation
import LineDatabase
import LineStore
import PostgresClient
import HCI
import Trace
import Workflow
#if canImport(Glibc)
import Glibc
#endif

/// `provision run WORKFLOW --inventory FILE --adapter SPEC ...`: the main job.
public struct RunCommand: Command {
    public init() {}

    public let name = "run"
    public let summary = "run a workflow over every selected device of an inventory"
    public let discussion = """
        Every device ends in a definite outcome, journaled durably as soon as it is known; the run ends
        in a JSON report. Ctrl-C once: no new devices, in-flight ones finish (bounded by --stop-grace);
        twice: in-flight devices are cut and marked interrupted. A crashed or interrupted run resumes with
        --resume JOURNAL without running succeeded devices again.
        Adapters: `sim` (the simulated fleet of the inventory's device models), `hci:tcp:HOST:PORT`,
        `hci:serial:/dev/ttyACM0[@BAUD]`, `hci:user:N`. A run never falls back to the simulator.
        On a line (--line URL or PROVISION_LINE: a PostgreSQL database shared by several stations, see
        docs/line.md) the station claims each device before it connects to it, so two stations never
        work one device; the line database is the record instead of a journal, and outcomes the line
        cannot take wait in a spool beside the report until it can.
        Exit status: 0 all succeeded, 1 some failed, 2 invalid input, 3 adapter or environment failure,
        130 interrupted.
        """
    public let positionals = [PositionalSpec("WORKFLOW", help: "the workflow file (YAML)")]
    public let options = [
        OptionSpec("inventory", short: "i", kind: .value("FILE"), role: .input, help: "inventory (YAML, or CSV by its .csv extension)"),
        OptionSpec("adapter", short: "a", kind: .repeated("SPEC"), help: "adapter: sim, hci:tcp:HOST:PORT, hci:serial:DEV[@BAUD], hci:user:N"),
        OptionSpec("concurrency", short: "c", kind: .value("N"), help: "devices in flight at once (default 16)"),
        OptionSpec("slots", kind: .value("N"), help: "connection slots per adapter (default: the adapter's limit)"),
        OptionSpec("report", kind: .value("PATH"), role: .output, help: "report path (default reports/<workflow>-<time>.json)"),
        OptionSpec("journal", kind: .value("PATH"), role: .output, help: "journal path (default beside the report, .journal)"),
        OptionSpec("resume", kind: .value("JOURNAL"), role: .output, help: "resume a crashed or interrupted run from its journal"),
        OptionSpec("force", kind: .flag, help: "replace an existing report, JUnit, events or simulator dump file"),
        OptionSpec("retry-failed", kind: .flag, help: "with --resume: run devices that failed before again"),
        OptionSpec("recheck", kind: .value("IDS"), help: "with --resume: ask these devices in review again (their step's confirm read; comma list)"),
        OptionSpec("limit", short: "l", kind: .value("SEL"), role: .input, help: "devices: ids, globs (SN-00*), comma lists, @file"),
        OptionSpec("max-failures", kind: .value("N|P%"), help: "stop the line after N (or P% of finished) devices failed for the fixture (timeout, not found, connection, adapter; not product rejects)"),
        OptionSpec("meta", kind: .repeated("KEY=VALUE"), help: "run metadata shown in every report (operator=ana, lot=L-42; over the inventory's meta:)"),
        OptionSpec("max-consecutive-failures", kind: .value("N"), help: "stop the line after N devices in a row failed (any kind)"),
        OptionSpec("stop-grace", kind: .value("DURATION"), help: "how long in-flight devices may finish after Ctrl-C (default 30s)"),
        OptionSpec("seed", kind: .value("N"), help: "seed for jitter and the simulator (default 1)"),
        OptionSpec("dry-run", kind: .flag, help: "validate and print the plan; touch no device"),
        OptionSpec("quiet", short: "q", kind: .flag, help: "no progress output"),
        OptionSpec("verbose", short: "v", kind: .flag, help: "HCI adapters: also print what the host learns of each controller and decides (fallbacks, connections)"),
        OptionSpec("events", kind: .value("PATH"), role: .output, help: "write every event as JSON lines (- for standard output)"),
        OptionSpec("junit", kind: .value("PATH"), role: .output, help: "also write a JUnit XML report (a test case per device and step)"),
        OptionSpec("html", kind: .value("PATH"), role: .output, help: "also write a self-contained HTML report (opens offline)"),
        OptionSpec("trace", kind: .value("PATH"), role: .output, help: "protocol trace per adapter: btsnoop for HCI (Wireshark), ATT PDUs for sim"),
        OptionSpec("bonds", kind: .value("PATH"), role: .output,
                   help: "keep pairing keys here (mode 0600): later runs encrypt with them instead of pairing again"),
        OptionSpec("sim-state", kind: .value("PATH"), role: .output, help: "simulator: keep the virtual devices' state in this file"),
        OptionSpec("sim-dump", kind: .value("PATH"), role: .output, help: "simulator: write the devices' final state (JSON) here"),
        OptionSpec("sim-latency", kind: .value("SCALE"), help: "simulator: latency scale (0 none, 1 the model's; default 1)"),
        OptionSpec("sim-model", kind: .value("PATH"), role: .input, help: "simulator: the device model (a CSV inventory cannot name one; wins over the inventory's)"),
        OptionSpec("no-fsync", kind: .flag, help: "write the journal without fsync (survives a crash of provision, not of the machine)"),
        LineOption.spec,
        OptionSpec("run", kind: .value("ID"), help: "with --line: the run to create or join (default: WORKFLOW-NAME/INVENTORY-NAME)"),
        OptionSpec("station", kind: .value("NAME"), help: "with --line: this station's name (default: the host name)"),
        OptionSpec("lease", kind: .value("DURATION"), help: "with --line: how long a claim lasts unless renewed (default 30s)"),
        OptionSpec("claim", kind: .value("heard|all"), help: "with --line: claim devices this station hears (default), or any, in inventory order"),
        OptionSpec("idle", kind: .value("DURATION"), help: "with --line: stop after claiming nothing for this long (default 1m; 0s: until the run is done)"),
        OptionSpec("spool", kind: .value("PATH"), role: .output, help: "with --line: the station's outcomes on its own disk until they are on the line (default beside the report, .spool)"),
        OptionSpec("sim-hears", kind: .value("SEL"), role: .input, help: "simulator: only these devices are in this station's range (ids, globs, @file)"),
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        // With `--events -` standard output carries the events, and nothing else: every human line
        // (plan, summary, paths) goes to standard error.
        let out = arguments.value("events") == "-" ? context.output.humanOnStderr : context.output
        guard let workflowPath = arguments.positionals.first else { return ExitCode.invalidInput }
        guard let inventoryPath = arguments.value("inventory") else {
            out.err("error: `--inventory FILE` is required for a run")
            out.err("usage: \(usage)")
            return ExitCode.invalidInput
        }
        // Numbers and choices first: usage errors are exit 2 before anything else happens.
        var concurrency = 16
        if let c = arguments.value("concurrency") {
            guard let n = Int(c), n >= 1, n <= 10_000 else { return usageError(out, "`--concurrency` must be a whole number from 1 to 10000, not `\(c)`") }
            concurrency = n
        }
        var slots: Int?
        if let c = arguments.value("slots") {
            guard let n = Int(c), n >= 1 else { return usageError(out, "`--slots` must be a positive whole number, not `\(c)`") }
            slots = n
        }
        var threshold: FailureThreshold?
        if let m = arguments.value("max-failures") {
            guard let t = FailureThreshold(m) else { return usageError(out, "`--max-failures` must be a count (5) or a percentage (10%), not `\(m)`") }
            threshold = t
        }
        var meta: [String: String] = [:]
        for item in arguments.values("meta") {
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let key = parts.first, !key.isEmpty,
                  key.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" || $0 == "." }) else {
                return usageError(out, "`--meta` is KEY=VALUE with a KEY of letters, digits, `_`, `-` or `.` (operator=ana), not `\(item)`")
            }
            meta[String(key)] = String(parts[1])
        }
        var consecutive: Int?
        if let m = arguments.value("max-consecutive-failures") {
            guard let n = Int(m), n > 0 else { return usageError(out, "`--max-consecutive-failures` must be a whole number above 0, not `\(m)`") }
            consecutive = n
        }
        var seed: UInt64 = 1
        if let s = arguments.value("seed") {
            guard let n = UInt64(s) else { return usageError(out, "`--seed` must be a non-negative whole number, not `\(s)`") }
            seed = n
        }
        var grace: Duration = .seconds(30)
        if let g = arguments.value("stop-grace") {
            guard case .success(let d) = DurationText.parse(g) else { return usageError(out, "`--stop-grace` must be a duration with a unit (30s, 2m), not `\(g)`") }
            grace = d
        }
        var latency = 1.0
        if let l = arguments.value("sim-latency") {
            guard let v = Double(l), v >= 0, v <= 100 else { return usageError(out, "`--sim-latency` must be a number from 0 to 100, not `\(l)`") }
            latency = v
        }
        if arguments.value("recheck") != nil && arguments.value("resume") == nil {
            return usageError(out, "`--recheck` needs `--resume JOURNAL` (it asks again the devices a run left in review)")
        }
        if arguments.flag("retry-failed") && arguments.value("resume") == nil {
            return usageError(out, "`--retry-failed` needs `--resume JOURNAL` (it runs again the devices a resumed run failed before)")
        }
        // The line: its options mean nothing without it, and a line station has no journal to resume.
        var lineSettings: LineSettings?
        switch LineOption.connectionString(arguments, context) {
        case nil:
            for name in ["run", "station", "lease", "claim", "idle", "spool"] where arguments.value(name) != nil {
                return usageError(out, "`--\(name)` works on a line: give `--line URL` (or set PROVISION_LINE)")
            }
        case .failure(let e)?:
            return usageError(out, e.message)
        case .success(let cs)?:
            switch LineSettings.parse(arguments, connectionString: cs) {
            case .failure(let e): return usageError(out, e.message)
            case .success(let l): lineSettings = l
            }
        }
        let specs = arguments.values("adapter")
        if specs.isEmpty {
            out.err("error: no adapter: give `--adapter sim` to run on the simulated fleet, or a radio such as `--adapter hci:tcp:127.0.0.1:9000`")
            out.err("    hint: a run never falls back to the simulator by itself")
            return ExitCode.invalidInput
        }
        for spec in specs {
            if let problem = AdapterFactory.problem(with: spec) {
                return usageError(out, "`--adapter \(spec)` is not an adapter spec (sim, hci:tcp:HOST:PORT, hci:serial:DEV[@BAUD], hci:user:N): \(problem)")
            }
        }

        // Validate everything before anything touches a radio.
        var result = Validator.validate(workflowPath: workflowPath, inventoryPath: inventoryPath, limit: arguments.value("limit"),
                                        currentDirectory: context.currentDirectory)
        if let model = arguments.value("sim-model") {
            guard specs.contains("sim") else { return usageError(out, "`--sim-model` goes with `--adapter sim`") }
            result.inventory?.simulatorModel = ValueSpec.resolve(path: model, baseDirectory: context.currentDirectory)
        }
        result.diagnostics += ModelCheck.diagnostics(result)
        for d in result.diagnostics { out.err(ValidateCommand.render(d, output: out)) }
        guard result.isValid, let workflow = result.workflow, let inventory = result.inventory else {
            out.err("\(result.errors.count) error(s); nothing was sent to any device")
            return ExitCode.invalidInput
        }
        let devices = result.selectedDevices
        if devices.isEmpty {
            out.err("error: no device selected (check --limit)")
            return ExitCode.invalidInput
        }

        // Paths: every output is checked against the inputs and the other outputs before anything is
        // touched (OutputPaths); only then is the default `reports/` directory created.
        let stamp = Self.timestamp()
        let resumePath = arguments.value("resume")
        if let r = resumePath, let j = arguments.value("journal"), r != j {
            return usageError(out, "`--resume \(r)` continues that journal; `--journal \(j)` names another (give one of them)")
        }
        let journalPath = resumePath ?? arguments.value("journal")
            ?? (arguments.value("report").map { Self.replacingExtension($0, with: "journal") } ?? "reports/\(Self.slug(workflow.name))-\(stamp).journal")
        let reportPath = arguments.value("report") ?? Self.replacingExtension(journalPath, with: "json")
        // A line station writes no journal (the line is its record); outcomes the line cannot take wait in the spool.
        let spoolPath = arguments.value("spool") ?? Self.replacingExtension(reportPath, with: "spool")
        var plan = OutputPaths(outputs: [
            lineSettings != nil
                ? OutputPaths.Output(option: "spool", path: spoolPath, kind: .spool, isDefault: arguments.value("spool") == nil)
                : OutputPaths.Output(option: resumePath != nil ? "resume" : "journal", path: journalPath, kind: .journal,
                                     isDefault: resumePath == nil && arguments.value("journal") == nil),
            OutputPaths.Output(option: "report", path: reportPath, kind: .document, isDefault: arguments.value("report") == nil),
        ], inputs: result.inputFiles, currentDirectory: context.currentDirectory)
        for option in options where option.role == .output && !["report", "journal", "resume", "trace", "spool"].contains(option.name) {
            guard let path = arguments.value(option.name), !(option.name == "events" && path == "-") else { continue }
            plan.outputs.append(OutputPaths.Output(option: option.name, path: path, kind: Self.outputKind(option.name)))
        }
        // The retry file beside the report (RetryFile), written when devices did not succeed.
        let retryPath = RetryFile.path(forReport: reportPath)
        plan.outputs.append(OutputPaths.Output(option: "retry", path: retryPath, kind: .document, isDefault: arguments.value("report") == nil,
                                               shownAs: "the retry file \(retryPath) (beside the report)"))
        // One trace file per adapter (TraceOutputs names them).
        let tracePaths = arguments.value("trace").map { TraceOutputs.paths(for: $0, adapters: specs) } ?? []
        for path in tracePaths {
            plan.outputs.append(OutputPaths.Output(option: "trace", path: path, kind: Self.outputKind("trace")))
        }
        plan.force = arguments.flag("force")
        plan.resume = resumePath != nil
        if resumePath != nil {
            plan.resumedRunID = (try? JournalState.read(path: plan.absolute(journalPath)))?.headers.first?.runId
        }
        let pathProblems = plan.problems()
        if !pathProblems.isEmpty {
            for p in pathProblems { out.err(escaping: "error: \(p)") }
            out.err("\(pathProblems.count) error(s) in output paths; nothing was touched")
            return ExitCode.invalidInput
        }
        /// Paths as the engine and the adapters use them: relative ones start from the command's directory.
        func file(_ path: String?) -> String? { path.map { $0 == "-" ? $0 : plan.absolute($0) } }

        let runID = lineSettings.map { $0.runID ?? LineOption.defaultRunID(workflow: workflow.name, inventoryPath: inventoryPath) }
        if arguments.flag("dry-run") {
            out.out(ValidateCommand.summary(result))
            out.out("plan: \(devices.count) device(s), concurrency \(concurrency), adapters \(specs.joined(separator: ", "))\(slots.map { ", \($0) slot(s) per adapter" } ?? "")")
            if let lineSettings, let runID {
                out.out(escaping: "      line \(lineSettings.connectionString), run \(runID), claiming \(lineSettings.policy.heardOnly ? "devices this station hears" : "any device"); spool \(spoolPath), report \(reportPath)")
            } else {
                out.out("      journal \(journalPath), report \(reportPath)\(resumePath != nil ? " (resuming)" : "")")
            }
            for d in devices.prefix(20) {
                out.out(escaping: "      \(d.id)  \(d.address?.description ?? "-")  \(d.name ?? "-")")
            }
            if devices.count > 20 { out.out("      ... and \(devices.count - 20) more") }
            out.out("dry run: no device was touched")
            return ExitCode.success
        }

        for output in plan.outputs where output.isDefault {
            try? FileManager.default.createDirectory(atPath: InventoryParser.directory(of: plan.absolute(output.path)), withIntermediateDirectories: true)
        }

        // The bond store: read (and its permissions checked) before any adapter opens.
        var bonds: BondStore?
        if let path = file(arguments.value("bonds")) {
            do {
                bonds = try BondStore(path: path)
            } catch {
                out.err(escaping: "error: \(error)")
                if case .io = error.kind { return ExitCode.environment }
                return ExitCode.invalidInput
            }
        }

        // What the simulated radio hears (all of the inventory without --sim-hears).
        var hears: [InventoryDevice]?
        if let sel = arguments.value("sim-hears") {
            let picked = DeviceSelection.select(sel, from: inventory.devices, currentDirectory: context.currentDirectory)
            for d in picked.diagnostics {
                out.err(escaping: "error: --sim-hears: \(d.message)" + (d.hint.map { " (\($0))" } ?? ""))
            }
            if !picked.diagnostics.isEmpty { return ExitCode.invalidInput }
            hears = picked.devices
        }

        // The line first: a station that cannot join it touches no radio.
        var lineStore: LineRunStore?
        if let lineSettings, let runID {
            let store = LineRunStore(lineSettings.storeSettings(
                run: LineRun(id: runID, workflow: LineFile(name: workflow.name, path: workflow.path, sha256: workflow.sha256),
                             inventory: LineFile(path: inventory.path, sha256: inventory.sha256),
                             // The run's metadata, for the merged report (`meta.KEY`).
                             options: Dictionary(uniqueKeysWithValues: inventory.meta.merging(meta) { _, given in given }.map { ("meta.\($0.key)", $0.value) }),
                             toolVersion: ProvisionCLI.version, captureTypes: workflow.captureTypes.mapValues(\.name)),
                adapters: specs, devices: inventory.devices.map(\.id), spoolPath: plan.absolute(spoolPath)))
            do {
                _ = try await store.open(.start)
            } catch {
                let (message, code) = LineOption.describe(error)
                out.err(escaping: "error: cannot join the line: \(message); nothing was touched")
                return code
            }
            lineStore = store
        }
        func leaveLine() async { await lineStore?.close() }

        // Adapters, each with its trace when asked.
        let traces = TraceOutputs(warn: { out.err(escaping: $0) })
        var centrals: [any Central] = []
        for (i, spec) in specs.enumerated() {
            do {
                let tracePath = tracePaths.isEmpty ? nil : plan.absolute(tracePaths[i])
                let tap = try tracePath.map { p throws(TraceError) in spec == "sim" ? nil : try traces.btsnoopTap(path: p) } ?? nil
                var central = try await AdapterFactory.open(spec, inventory: inventory, devices: devices, seed: seed, latencyScale: latency,
                                                            statePath: file(arguments.value("sim-state")), slots: slots, bonds: bonds,
                                                            verbose: arguments.flag("verbose"), packetTap: tap, hears: hears,
                                                            workflowPath: ValueSpec.resolve(path: workflowPath, baseDirectory: context.currentDirectory))
                if let tracePath, let sim = central as? SimulatedCentral {
                    let names = Dictionary(inventory.devices.compactMap { d in sim.address(of: d.id).map { ($0, d.id) } },
                                           uniquingKeysWith: { a, _ in a })
                    central = try traces.attTraced(sim, path: tracePath, names: names)
                }
                centrals.append(central)
            } catch let e as TraceError {
                out.err(escaping: "error: \(e)")
                for c in centrals { await c.close() }
                traces.close()
                return ExitCode.environment
            } catch let e as AdapterFactory.InputError {
                out.err("error: \(e.message)")
                for c in centrals { await c.close() }
                await leaveLine()
                return ExitCode.invalidInput
            } catch {
                out.err(escaping: "error: adapter `\(spec)`: \(error)")
                for c in centrals { await c.close() }
                await leaveLine()
                return ExitCode.environment
            }
        }
        if !tracePaths.isEmpty { out.err(escaping: TraceOutputs.secretsNote(tracePaths)) }
        // Without --slots, say when the radios hold fewer links than the concurrency asked for.
        if let note = AdapterFactory.concurrencyNote(concurrency: concurrency, slots: slots, adapters: centrals) { out.err(note) }
        // The line learns who the station is on each adapter (`line status`); not knowing it stops nothing.
        if let lineStore {
            do {
                try await lineStore.recordIdentities(centrals.map { $0.stationIdentity?.description ?? "" })
            } catch {
                out.err(escaping: "warning: the line did not take the station's identities: \(LineOption.describe(error).message)")
            }
        }

        var options = RunOptions(journalPath: plan.absolute(journalPath), reportPath: plan.absolute(reportPath))
        options.concurrency = concurrency
        options.slotsPerAdapter = slots
        options.junitPath = file(arguments.value("junit"))
        options.resume = resumePath != nil
        options.retryFailed = arguments.flag("retry-failed")
        options.recheck = Set((arguments.value("recheck") ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
        options.maxFailures = threshold
        options.maxConsecutiveFailures = consecutive
        options.meta = meta
        options.seed = seed
        options.stopGrace = grace
        options.fsync = !arguments.flag("no-fsync")
        options.toolVersion = ProvisionCLI.version
        // The station's name on the run and on every record (on a line, `--station`).
        if let name = lineSettings?.station { options.station = name }
        var reported: [String: String] = ["concurrency": "\(concurrency)", "seed": "\(seed)", "adapters": specs.joined(separator: ",")]
        if let l = arguments.value("limit") { reported["limit"] = l }
        if let m = arguments.value("max-failures") { reported["max_failures"] = m }
        if let m = arguments.value("max-consecutive-failures") { reported["max_consecutive_failures"] = m }
        // The metadata goes with the run's options too: a journal's header and a line's run keep it.
        for (key, value) in inventory.meta.merging(meta, uniquingKeysWith: { _, given in given }) { reported["meta.\(key)"] = value }
        if let s = slots { reported["slots"] = "\(s)" }
        if let b = arguments.value("bonds") { reported["bonds"] = b }
        if specs.contains("sim") { reported["sim_latency"] = "\(latency)" }
        if let lineSettings, let runID {
            reported["line_run"] = runID
            reported["claim"] = lineSettings.policy.heardOnly ? "heard" : "all"
            reported["lease"] = DurationText.format(lineSettings.lease)
        }
        options.reportOptions = reported
        options.store = lineStore

        let events = EventBus()
        if arguments.value("events") == "-" {
            events.add(StandardOutputEventSink(output: context.output))
        } else if let path = file(arguments.value("events")) {
            do { events.add(try JSONLinesEventSink(path: path)) } catch {
                out.err("error: cannot write events to \(path): \(error)")
                for c in centrals { await c.close() }
                await leaveLine()
                return ExitCode.environment
            }
        }
        let monitor = RunMonitor()
        if !arguments.flag("quiet") {
            let interactive = isatty(STDERR_FILENO) == 1 && context.environment["TERM"] != "dumb"
            events.add(ProgressDisplay(output: out, interactive: interactive, color: out.colorEnabled,
                                       slots: { monitor.slotUsage() }))
        }

        let controller = RunController()
        let signals = SignalWatcher(controller: controller, output: out)

        let report: RunReport
        do {
            report = try await Runner.run(workflow: workflow, inventory: inventory, devices: devices, adapters: centrals,
                                          options: options, events: events, controller: controller, monitor: monitor)
        } catch {
            signals.cancel()
            for c in centrals { await c.close() }
            await leaveLine()
            traces.close()
            out.err(escaping: "error: \(error)")
            return (error as? Runner.StartError) != nil ? ExitCode.invalidInput : ExitCode.environment
        }
        signals.cancel()
        if let dumpPath = file(arguments.value("sim-dump")) {
            for case let sim as SimulatedCentral in centrals.map({ ($0 as? ATTTracingCentral)?.base ?? $0 }) {
                do {
                    try Self.writePrivately(Data(await sim.dump().json().utf8), to: dumpPath)
                } catch {
                    out.err(escaping: "error: cannot write the simulator dump: \(error)")
                }
            }
        }
        // The device side is kept as the devices received it (that is what it is for: proving what a
        // unit got), so it holds the secrets in clear. Say so where it is written.
        if !inventory.secrets.isEmpty, specs.contains("sim") {
            let names = inventory.secrets.sorted().map { "`\($0)`" }.joined(separator: ", ")
            for (option, path) in [("sim-dump", arguments.value("sim-dump")), ("sim-state", arguments.value("sim-state"))] {
                guard let path else { continue }
                out.err(escaping: "note: \(path) (--\(option)) holds what the simulated devices received, the secrets \(names) included, unredacted\(option == "sim-dump" ? " (written readable by its owner only)" : "")")
            }
        }
        for c in centrals { await c.close() }
        traces.close()

        Self.printSummary(report, output: out)
        out.out("report: \(reportPath)")
        if let lineStore {
            out.out(escaping: lineStore.location)
        } else {
            out.out("journal: \(journalPath)")
        }
        do {
            try RetryFile.write(report, reportPath: reportPath, to: plan.absolute(retryPath))
            if RetryFile.text(report, reportPath: reportPath) != nil { out.out("retry: \(retryPath)") }
        } catch {
            out.err(escaping: "error: cannot write the retry file \(retryPath): \(error.localizedDescription)")
        }
        if let htmlPath = arguments.value("html") {
            do {
                let page = HTMLReport(report: report, source: reportPath)
                try Data(page.html.utf8).write(to: URL(fileURLWithPath: plan.absolute(htmlPath)), options: .atomic)
                out.out("html: \(htmlPath)")
            } catch {
                out.err(escaping: "error: cannot write \(htmlPath): \(error.localizedDescription)")
            }
        }
        if let lineStore {
            let left = lineStore.unwrittenOutcomes
            let refused = lineStore.outcomesRefused
            if refused > 0 {
                out.err(escaping: "note: the line refused \(refused) outcome(s) of this station (other stations had claimed those devices since); they stay on record in \(spoolPath)")
            }
            if left > 0 {
                out.err(escaping: "error: \(left) outcome(s) could not reach the line and wait in \(spoolPath); write them with `provision line flush \(spoolPath) --line URL` once it is reachable")
                return ExitCode.environment
            }
        }
        if controller.stopRequests > 0 { return ExitCode.interrupted }
        let failed = report.devices.contains { $0.outcome != .succeeded }
        if failed, report.devices.allSatisfy({ $0.outcome != .succeeded }),
           report.run.adapters.allSatisfy({ $0.failure != nil }) {
            return ExitCode.environment
        }
        return failed ? ExitCode.someDevicesFailed : ExitCode.success
    }

    static func printSummary(_ report: RunReport, output out: Output) {
        let s = report.summary
        let o = s.outcomes
        var line = "\(ControlCharacters.escaped(report.run.workflow.name ?? "run")): \(s.total) device(s): \(o["succeeded"] ?? 0) succeeded, \(o["failed"] ?? 0) failed"
        if let n = o["interrupted"], n > 0 { line += ", \(n) interrupted" }
        if let n = o["skipped"], n > 0 { line += ", \(n) skipped" }
        line += String(format: " in %.1f s (%.0f devices/min)", s.wallMs / 1000, s.devicesPerMinute)
        if report.run.simulated { line += " [simulated]" }
        out.out(line)
        if !s.errors.isEmpty {
            out.out(escaping: "failures by kind: " + s.errors.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        if let d = s.durationMs {
            out.out(String(format: "device time: p50 %.0f ms, p95 %.0f ms, max %.0f ms", d.p50, d.p95, d.max))
        }
        if let stop = report.run.stopped { out.out(escaping: "stopped: \(stop.message)") }
    }

    private func usageError(_ out: Output, _ message: String) -> Int32 {
        out.err("error: \(message)")
        out.err("usage: \(usage)")
        return ExitCode.invalidInput
    }

    /// A file the command line itself could not write.
    struct WriteError: Error, CustomStringConvertible {
        var path: String
        var errno: Int32
        var description: String { "\(path): \(String(cString: strerror(errno)))" }
    }

    /// Writes `data` to `path` readable by its owner only (mode 0600): a temporary file beside it, then a rename.
    static func writePrivately(_ data: Data, to path: String) throws {
        let tmp = path + ".tmp.\(getpid())"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw WriteError(path: tmp, errno: errno) }
        var failure: Int32 = 0
        data.withUnsafeBytes { raw in
            guard var p = raw.baseAddress else { return }
            var left = raw.count
            while left > 0 {
                let n = write(fd, p, left)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                p += n
                left -= n
            }
        }
        if failure == 0, fsync(fd) != 0 { failure = errno }
        close(fd)
        if failure == 0, rename(tmp, path) != 0 { failure = errno }
        if failure != 0 {
            unlink(tmp)
            throw WriteError(path: path, errno: failure)
        }
    }

    /// How each output option's file is written (OutputPaths.Kind); a new output option is a document
    /// (written whole, never replaced without `--force`) until it says otherwise here.
    static func outputKind(_ option: String) -> OutputPaths.Kind {
        switch option {
        case "journal", "resume": return .journal
        case "spool": return .spool
        case "events", "trace": return .stream
        case "sim-state", "bonds": return .state
        default: return .document
        }
    }

    static func timestamp() -> String {
        let f = Date.ISO8601FormatStyle(timeZone: .gmt).year().month().day().time(includingFractionalSeconds: false)
        return Date().formatted(f).replacingOccurrences(of: ":", with: "").replacingOccurrences(of: "-", with: "")
    }

    static func slug(_ s: String) -> String {
        String(s.map { $0.isLetter || $0.isNumber || $0 == "-" ? $0 : "-" })
    }

    static func replacingExtension(_ path: String, with ext: String) -> String {
        let ns = path as NSString
        return ns.pathExtension.isEmpty ? path + "." + ext : ns.deletingPathExtension + "." + ext
    }
}

/// Turns SIGINT (Ctrl-C), SIGTERM and SIGHUP into stop requests: the first stops new work, the second cuts.
final class SignalWatcher {
    private let sources: [any DispatchSourceSignal]

    init(controller: RunController, output: Output) {
        var sources: [any DispatchSourceSignal] = []
        // SIGHUP: the terminal or SSH session is gone; stop as for Ctrl-C (the messages go nowhere).
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                let n = controller.requestStop()
                if n == 1 {
                    output.err("\nstopping: no new devices; in-flight devices are finishing (press Ctrl-C again to cut them)")
                } else if n == 2 {
                    output.err("\ncutting in-flight devices; they will be marked interrupted")
                }
            }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    func cancel() {
        for s in sources { s.cancel() }
    }
}
