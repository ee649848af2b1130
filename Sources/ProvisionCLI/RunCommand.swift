import BLE
import Engine
import Foundation
import LineDatabase
import LineStore
import Workflow
#if canImport(Glibc)
import Glibc
#endif

/// `provision run WORKFLOW --inventory FILE --adapter SPEC ...`: the main job.
public struct RunCommand: Command {
    public init() {}

    public let name = "run"
    /// `run` stops a line its own way on signals (`SignalWatcher`: no new devices, then cut).
    public let handlesInterruption = true
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
    public let options = RunCommandOptions.specs

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let options: RunCommandOptions
        do {
            options = try RunCommandOptions.parse(arguments, context: context)
        } catch {
            for d in error.diagnostics { context.output.err(ValidateCommand.render(d, output: context.output)) }
            guard error.diagnostics.isEmpty else { return ExitCode.invalidInput }
            context.output.err("error: \(error.message)")
            if let hint = error.hint { context.output.err("    hint: \(hint)") }
            if error.showsUsage { context.output.err("usage: \(usage)") }
            return ExitCode.invalidInput
        }
        // With `--events -` (or `--json`) standard output carries data, and nothing else: every human line
        // (plan, summary, paths) goes to standard error.
        let out = options.events == .standardOutput || options.json ? context.output.humanOnStderr : context.output

        // Validate everything before anything touches a radio.
        var result = Validator.validate(workflowPath: options.workflow, inventoryPath: options.inventory, limit: options.limit,
                                        currentDirectory: context.currentDirectory, secretsPath: options.secrets)
        if let model = options.simModel { result.inventory?.simulatorModel = ValueSpec.resolve(path: model, baseDirectory: context.currentDirectory) }
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
        // What the simulated radio hears (all of the inventory without --sim-hears).
        var hears: [InventoryDevice]?
        if let selection = options.simHears {
            let picked = DeviceSelection.select(selection, from: inventory.devices, currentDirectory: context.currentDirectory)
            for d in picked.diagnostics { out.err(escaping: "error: --sim-hears: \(d.message)" + (d.hint.map { " (\($0))" } ?? "")) }
            if !picked.diagnostics.isEmpty { return ExitCode.invalidInput }
            hears = picked.devices
        }

        // Paths: every output is checked against the inputs and the other outputs before anything is
        // touched; only then is the default `reports/` directory created.
        let inputs = result.inputFiles + (options.defaults.map { [InputFile(role: "the defaults file", path: $0.path)] } ?? [])
        let paths = RunPaths(options, workflowName: workflow.name, inputs: inputs, currentDirectory: context.currentDirectory)
        let pathProblems = paths.plan.problems()
        if !pathProblems.isEmpty {
            for p in pathProblems { out.err(escaping: "error: \(p)") }
            out.err("\(pathProblems.count) error(s) in output paths; nothing was touched")
            return ExitCode.invalidInput
        }
        // `--recheck`: devices of the inventory, and a step to ask them about.
        if !options.recheck.isEmpty {
            let known = Set(inventory.devices.map(\.id))
            if let unknown = options.recheck.sorted().first(where: { !known.contains($0) }) {
                out.err(escaping: "error: --recheck: no device `\(unknown)` in \(options.inventory)")
                return ExitCode.invalidInput
            }
            if workflow.confirmableSteps.isEmpty {
                out.err("error: --recheck: no irreversible step of \(options.workflow) declares a `confirm` read, so there is nothing to ask the devices; resolve them by hand with `provision review --mark`")
                return ExitCode.invalidInput
            }
        }
        let lineRun = options.line.map { $0.runID ?? LineOption.defaultRunID(workflow: workflow.name, inventoryPath: options.inventory) }
        let concurrency = options.effectiveConcurrency
        if options.dryRun {
            Self.printPlan(options, paths: paths, result: result, concurrency: concurrency, lineRun: lineRun, output: out)
            return ExitCode.success
        }
        paths.createDefaultDirectories()

        let setup = Station.Setup(options, paths: paths, workflow: workflow, inventory: inventory, lineRun: lineRun, hears: hears,
                                  interactive: isatty(STDERR_FILENO) == 1 && context.environment["TERM"] != "dumb")
        let station = Station(setup, output: context.output)
        let ran = await station.run { station throws(Station.Failure) -> RunResult in
            if !paths.traces.isEmpty { out.err(escaping: TraceOutputs.secretsNote(paths.traces)) }
            // Without --slots, say when the radios hold fewer links than the concurrency asked for.
            if options.concurrency != nil, let note = AdapterFactory.concurrencyNote(concurrency: concurrency, slots: options.slots, adapters: station.adapters) { out.err(note) }
            let engine = options.engineOptions(paths: paths, concurrency: concurrency, lineRun: lineRun, inventoryMeta: inventory.meta)
            guard let store = station.opened else { throw Station.Failure(code: ExitCode.environment) }
            do {
                return try await Runner.run(workflow: workflow, inventory: inventory, devices: devices, adapters: station.adapters, store: store,
                                            options: engine, events: station.events, controller: station.controller, monitor: station.monitor,
                                            hooks: station.onDevice)
            } catch {
                out.err(escaping: "error: \(error)")
                throw Station.Failure(code: (error as? Runner.StartError) != nil ? ExitCode.invalidInput : ExitCode.environment)
            }
        }
        // Everything is closed: what remains is to say what happened.
        let report: RunResult
        switch ran {
        case .failure(let failure): return failure.code
        case .success(let r): report = r
        }
        Self.noteUnredactedFiles(options, inventory: inventory, output: out)
        var ending = RunEnding(report: report, options: options, paths: paths, line: station.lineStore, output: out)
        ending.writeFiles()
        return ending.finish(stopRequested: station.controller.stopRequests > 0, json: options.json ? context.output : nil)
    }

    /// `--dry-run`: what would run, where it would be written; nothing is touched.
    static func printPlan(_ o: RunCommandOptions, paths: RunPaths, result: ValidationResult, concurrency: Int, lineRun: String?, output out: Output) {
        let devices = result.selectedDevices
        out.out(ValidateCommand.summary(result))
        if let d = o.defaults { out.out(escaping: "defaults: \(d.path)") }
        out.out("plan: \(devices.count) device(s), concurrency \(concurrency), adapters \(o.adapters.map(\.spec).joined(separator: ", "))"
                + (o.slots.map { ", \($0) slot(s) per adapter" } ?? ""))
        if let line = o.line, let lineRun {
            out.out(escaping: "      line \(line.connectionString), run \(lineRun), claiming \(line.policy.heardOnly ? "devices this station hears" : "any device"); spool \(paths.spool), report \(paths.report)")
        } else {
            out.out("      journal \(paths.journal), report \(paths.report)\(o.resume != nil ? " (resuming)" : "")")
        }
        for d in devices.prefix(20) {
            out.out(escaping: "      \(d.id)  \(d.address?.description ?? "-")  \(d.name ?? "-")")
        }
        if devices.count > 20 { out.out("      ... and \(devices.count - 20) more") }
        out.out("dry run: no device was touched")
    }

    /// The device side is kept as the devices received it (that is what it is for: proving what a unit
    /// got), so it holds the secrets in clear. Say so where it is written.
    static func noteUnredactedFiles(_ o: RunCommandOptions, inventory: Inventory, output out: Output) {
        guard !inventory.secrets.isEmpty, o.adapters.contains(.simulator) else { return }
        let names = inventory.secrets.sorted().map { "`\($0)`" }.joined(separator: ", ")
        for (option, path) in [("sim-dump", o.simDump), ("sim-state", o.simState)] {
            guard let path else { continue }
            out.err(escaping: "note: \(path) (--\(option)) holds what the simulated devices received, the secrets \(names) included, unredacted (written readable by its owner only)")
        }
    }

    static func printSummary(_ report: RunReport, output out: Output) {
        printSummary(run: report.run, summary: report.summary, output: out)
    }

    static func printSummary(run: RunInfo, summary s: Summary, output out: Output) {
        let o = s.outcomes
        var line = "\(ControlCharacters.escaped(run.workflow.name ?? "run")): \(s.total) device(s): \(o[.succeeded]) succeeded, \(o[.failed]) failed"
        if o[.interrupted] > 0 { line += ", \(o[.interrupted]) interrupted" }
        if o[.skipped] > 0 { line += ", \(o[.skipped]) skipped" }
        line += String(format: " in %.1f s (%.0f devices/min)", s.wallMs / 1000, s.devicesPerMinute)
        if run.simulated { line += " [simulated]" }
        out.out(line)
        if !s.errors.isEmpty {
            out.out(escaping: "failures by kind: " + s.errors.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        if let d = s.durationMs {
            out.out(String(format: "device time: p50 %.0f ms, p95 %.0f ms, max %.0f ms", d.p50, d.p95, d.max))
        }
        if let stop = run.stopped { out.out(escaping: "stopped: \(stop.message)") }
    }
}
