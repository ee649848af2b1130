import Engine
import Foundation
import LineStore
import PostgresClient
import SystemIO
import Workflow

/// `provision report REPORT [--where EXPR] [--group-by FIELD] [--compare OLDER] [--csv | --json]
/// [--html PATH]`: the auditor's tool. A report is loaded from its source (`ReportSource`), its devices
/// selected (`--where`), then grouped, compared or listed, and rendered as text, CSV, JSON or HTML.
public struct ReportCommand: Command {
    public init() {}

    public let name = "report"
    public let summary = "question run reports: filter, group, compare; text, CSV, JSON or HTML"
    public let discussion = """
        Without options: the run, its summary and every device that did not succeed.
        --where EXPR selects devices with the workflow's expression language over the report's fields:
        'firmware < 2.0.0', 'battery < 20', 'outcome == failed', 'error.kind in [timeout, not_found]'
        (typed: versions compare as versions). --fields lists the fields of a report with their types.
        --group-by FIELD counts devices per value (versions in version order); for numbers also min, p50,
        max and a histogram. --compare OLDER says per device what changed from OLDER to REPORT (outcome,
        error kind, captured values, measurements) and the counts by outcome before and after.
        --csv: one row per device (or per change with --compare); --json: the selected devices as a
        report (or the grouping, or the comparison); --html PATH: a self-contained page that opens offline.
        --line URL (or PROVISION_LINE) instead of REPORT: the merged report of a line's run (--run ID,
        default the most recently started), every device once, whichever station worked it; every option
        works on it. Exit status: 0 done, 2 an unreadable report or a bad option or expression, 3 the line
        cannot be reached.
        """
    public let positionals = [PositionalSpec("REPORT", help: "a report written by `provision run` (or --line)", isOptional: true)]
    public let options = [
        OptionSpec("where", short: "w", kind: .value("EXPR"), help: "only devices where EXPR holds ('firmware < 2.0.0')"),
        OptionSpec("group-by", short: "g", kind: .repeated("FIELD"), help: "count devices per value of FIELD (numbers: min/p50/max, histogram)"),
        OptionSpec("compare", kind: .value("OLDER"), role: .input, help: "an earlier report: what changed since"),
        OptionSpec("csv", kind: .flag, help: "CSV: one row per device (with --compare: per change)"),
        OptionSpec("json", kind: .flag, help: "JSON: the selected devices as a report, or the grouping, or the comparison"),
        OptionSpec("html", kind: .value("PATH"), role: .output, help: "also write a self-contained HTML report"),
        OptionSpec("fields", kind: .flag, help: "list the fields --where and --group-by can use, with their types"),
        OptionSpec("force", kind: .flag, help: "replace an existing --html file"),
        LineOption.spec,
        LineOption.runSpec,
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        let groupBy = arguments.values("group-by")
        if arguments.flag("csv") && arguments.flag("json") { return usageError(out, "give one of `--csv` and `--json`") }
        if !groupBy.isEmpty, arguments.flag("csv") { return usageError(out, "`--group-by` prints text or JSON (`--json`), not CSV") }
        if !groupBy.isEmpty, arguments.value("compare") != nil { return usageError(out, "give `--group-by` or `--compare`, not both") }

        // Open: the report's top level, and the older one's to compare with.
        let source: any ReportSource
        switch Self.source(arguments, context) {
        case .success(let s): source = s
        case .failure(let problem): return usageError(out, problem.message)
        }
        let sources: [any ReportSource] = [source]
            + (arguments.value("compare").map { [ReportFile(path: $0, currentDirectory: context.currentDirectory)] } ?? [])
        var opened: [OpenedReport] = []
        for source in sources {
            switch await source.open() {
            case .success(let o):
                opened.append(o)
                if let note = o.note { out.err(escaping: note) }
            case .failure(let problem):
                return fail(problem, source.label, out)
            }
        }
        let newer = opened[0]

        // The names a condition or a grouping reads decide what of each device is kept (a report is
        // streamed: only the parts a query needs stay in memory, never the whole run).
        let whereText = arguments.value("where")
        var named: Set<String> = Set(groupBy)
        if let whereText, let parsed = try? Expression(parsing: whereText) { named.formUnion(parsed.names.map(\.name)) }
        var keep = ReportProjection(names: named)
        if whereText == nil, groupBy.isEmpty, !arguments.flag("csv"), !arguments.flag("json"), opened.count == 1, arguments.value("html") == nil {
            keep.failedMeasurements = true  // the plain summary counts them
        }
        if arguments.flag("csv") { keep.allCaptured = true }
        if opened.count > 1 { keep.allCaptured = true; keep.measurementOutcomes = true }
        if arguments.value("html") != nil { keep = .everything }

        if arguments.flag("fields") {
            // Every part of every device decoded (its fields are what it holds), none kept.
            var catalog = ReportCatalog()
            do throws(ReportLoadProblem) {
                try newer.forEachDevice { catalog.add($0) }
            } catch {
                return fail(error, newer.label, out)
            }
            let fields = ReportFields(run: newer.run, catalog: catalog)
            for name in fields.names {
                guard let t = fields.type(of: name) else { continue }
                let values = t.symbols.isEmpty ? t.type.name : "one of " + t.symbols.joined(separator: ", ")
                out.out(escaping: "\(name)  \(values)")
            }
            return ExitCode.success
        }

        // Pass over the devices: the fields they make, and what of each the query needs.
        let kept: ReadDevices
        switch Self.read(newer, keeping: keep) {
        case .success(let r): kept = r
        case .failure(let problem): return fail(problem, newer.label, out)
        }
        let fields = ReportFields(run: newer.run, catalog: kept.catalog)

        // Select.
        var selected = kept.devices
        var filter: DeviceFilter?
        if let text = whereText {
            do {
                let f = try DeviceFilter(text, fields: fields)
                selected = try f.select(selected, fields: fields)
                filter = f
            } catch {
                for line in error.lines { out.err(escaping: line) }
                return ExitCode.invalidInput
            }
        }
        let report = RunReport(run: newer.run, summary: newer.summary, devices: kept.devices)

        // Compare.
        var comparison: ReportComparison?
        if opened.count > 1 {
            let olderOpened = opened[1]
            var olderKeep = keep
            olderKeep.names.formUnion(filter?.expression.names ?? [])
            let olderKept: ReadDevices
            switch Self.read(olderOpened, keeping: olderKeep) {
            case .success(let r): olderKept = r
            case .failure(let problem): return fail(problem, olderOpened.label, out)
            }
            let older = RunReport(run: olderOpened.run, summary: olderOpened.summary, devices: olderKept.devices)
            var olderDevices = older.devices
            if let filter {
                // The selected devices as they were, and devices of the older run only that it selects there.
                let ids = Set(selected.map(\.id)), newerIDs = Set(kept.devices.map(\.id))
                let olderFields = ReportFields(run: older.run, catalog: olderKept.catalog)
                let gone = older.devices.filter { !newerIDs.contains($0.id) }
                let goneSelected = (try? DeviceFilter(filter.expression.source, fields: olderFields)).flatMap { try? $0.select(gone, fields: olderFields) } ?? []
                let goneIDs = Set(goneSelected.map(\.id))
                olderDevices = older.devices.filter { ids.contains($0.id) || goneIDs.contains($0.id) }
            }
            comparison = ReportComparison(older: older, newer: report, olderDevices: olderDevices, newerDevices: selected)
        }

        // The HTML page, beside whatever else is printed.
        if let htmlPath = arguments.value("html") {
            var plan = OutputPaths(outputs: [OutputPaths.Output(option: "html", path: htmlPath, kind: .document)],
                                   inputs: opened.map { InputFile(role: "a report read here", path: $0.label) },
                                   currentDirectory: context.currentDirectory)
            plan.force = arguments.flag("force")
            if let problem = plan.problems().first {
                out.err(escaping: "error: \(problem)")
                return ExitCode.invalidInput
            }
            let page = HTMLReport(report: report, devices: selected, source: newer.label, comparison: comparison,
                                  selection: filter?.expression.source)
            do {
                try AtomicFile.write(Array(page.html.utf8), to: plan.absolute(htmlPath))
            } catch {
                out.err(escaping: "error: cannot write \(htmlPath): \(error)")
                return ExitCode.environment
            }
            out.err(escaping: "html: \(htmlPath)")
        }

        if let comparison {
            if let warning = comparison.warning { out.err(escaping: "warning: \(warning)") }
            if arguments.flag("json") {
                out.out(comparison.json)
            } else if arguments.flag("csv") {
                out.writeOut(comparison.csv)
            } else {
                for line in comparison.text { out.out(escaping: line) }
            }
            return ExitCode.success
        }

        if !groupBy.isEmpty {
            var groupings: [Grouping] = []
            for field in groupBy {
                do {
                    groupings.append(try Grouping(selected, by: field, fields: fields))
                } catch {
                    out.err(escaping: "error: --group-by: \(error.message)")
                    if let hint = error.hint { out.err(escaping: "    hint: \(hint)") }
                    return ExitCode.invalidInput
                }
            }
            if arguments.flag("json") {
                out.out("[" + groupings.map(\.json).joined(separator: ",") + "]")
            } else {
                if let filter { out.out(escaping: "\(selected.count) of \(kept.devices.count) device(s) where \(filter.expression.source)") }
                for (i, g) in groupings.enumerated() {
                    if i > 0 { out.out("") }
                    for line in g.text { out.out(escaping: line) }
                }
            }
            return ExitCode.success
        }

        if arguments.flag("csv") {
            ReportCSV.devices(selected, run: newer.run) { out.writeOut($0) }
            return ExitCode.success
        }
        if arguments.flag("json") {
            // The devices again, whole this time, straight from the report to the output.
            var summary = newer.summary
            var ids: Set<String>?
            if filter != nil {
                summary = Summary.compute(selected, wall: .milliseconds(newer.summary.wallMs))
                ids = Set(selected.map(\.id))
            }
            let writer = ReportJSONWriter(run: newer.run, schema: newer.schema, summary: summary) { out.writeOut($0) }
            do throws(ReportLoadProblem) {
                try newer.forEachDevice { d in
                    if ids?.contains(d.id) ?? true { writer.device(d) }
                }
            } catch {
                return fail(error, newer.label, out)
            }
            writer.finish()
            return ExitCode.success
        }

        if let filter {
            out.out(escaping: "\(selected.count) of \(kept.devices.count) device(s) where \(filter.expression.source)\(selected.isEmpty ? "" : ":")")
            // The fields the condition reads (a measurement's value beside its outcome).
            var named = filter.expression.names.filter { $0 != "outcome" && $0 != "id" }
            for n in named where n.hasPrefix("measurement.") && !n.hasSuffix(".value") && fields.type(of: n + ".value") != nil {
                named.insert(n + ".value")
            }
            let shown = named.sorted()
            for d in selected {
                let values = fields.values(d)
                let parts = shown.map { "\($0) \(values[$0]?.description ?? "-")" }
                out.out(escaping: "  \(d.id)  \(d.outcome.rawValue)" + (parts.isEmpty ? "" : "  " + parts.joined(separator: "  ")))
            }
            return ExitCode.success
        }
        printSummary(report, output: out)
        return ExitCode.success
    }

    /// What one pass over a report's devices kept.
    struct ReadDevices {
        var devices: [DeviceRecord] = []
        var catalog = ReportCatalog()
    }

    /// One pass over the devices: each adds to the catalog of fields, and its projection is kept.
    static func read(_ report: OpenedReport, keeping keep: ReportProjection) -> Result<ReadDevices, ReportLoadProblem> {
        var read = ReadDevices()
        do throws(ReportLoadProblem) {
            try report.forEachDevice(omitting: keep.omitted) { d in
                read.catalog.add(d)
                read.devices.append(keep.apply(d))
            }
        } catch {
            return .failure(error)
        }
        return .success(read)
    }

    private func fail(_ problem: ReportLoadProblem, _ label: String, _ out: Output) -> Int32 {
        if problem.code == ExitCode.interrupted {
            out.err("interrupted")
        } else {
            out.err(escaping: "error: \(label): \(problem.message)")
        }
        return problem.code
    }

    /// The run, its summary and every device that did not succeed.
    private func printSummary(_ report: RunReport, output out: Output) {
        let r = report.run
        out.out(escaping: "run \(r.id)\(r.simulated ? " [simulated]" : "")\(r.resumed ? " (resumed)" : "")")
        out.out(escaping: "  workflow  \(r.workflow.name ?? "-")  \(r.workflow.path)  sha256 \(r.workflow.sha256.prefix(12))…")
        out.out(escaping: "  inventory \(r.inventory.path)  sha256 \(r.inventory.sha256.prefix(12))…")
        out.out(escaping: "  adapters  \(r.adapters.map { $0.id + ($0.failure.map { " (failed: \($0))" } ?? "") }.joined(separator: ", "))")
        out.out(escaping: "  station \(r.station), \(r.started) → \(r.finished?.iso ?? "?"), provision \(r.toolVersion)")
        if let meta = r.metaText { out.out(escaping: "  meta      \(meta)") }
        if let stop = r.stopped { out.out(escaping: "  stopped: \(stop.message)") }
        if let hooks = r.onDevice {
            out.out(escaping: "  on-device \(hooks.sentence)")
            for f in hooks.failed { out.out(escaping: "    \(f.device)  \(f.message)") }
        }
        RunCommand.printSummary(report, output: out)
        let failedMeasurements = report.devices.reduce(0) { $0 + ($1.measurements ?? []).filter { !$0.result.passed }.count }
        if failedMeasurements > 0 { out.out("measurements failed: \(failedMeasurements)") }
        let notOK = report.devices.filter { $0.outcome != .succeeded }
        if !notOK.isEmpty {
            out.out(escaping: "devices that did not succeed:")
            for d in notOK {
                let why = d.error.map { "\($0.kind.rawValue) at `\($0.step ?? "?")`: \($0.message)" } ?? (d.skipReason ?? "")
                out.out(escaping: "  \(d.id)  \(d.outcome.rawValue)  \(why)")
            }
        }
    }

    private func usageError(_ out: Output, _ message: String) -> Int32 {
        out.err("error: \(message)")
        out.err("usage: \(usage)")
        return ExitCode.invalidInput
    }

    /// The report's source: `REPORT`, or the merged report of a line's run (`--line URL [--run ID]`),
    /// never both.
    static func source(_ arguments: ParsedArguments, _ context: CommandContext) -> Result<any ReportSource, ReportLoadProblem> {
        let line = LineOption.connectionString(arguments, context)
        let path = arguments.positionals.first
        if arguments.value("line") != nil, path != nil {
            return .failure(ReportLoadProblem(message: "give REPORT or `--line URL`, not both"))
        }
        if let path {
            if arguments.value("run") != nil { return .failure(ReportLoadProblem(message: "`--run` names a run of a line: give `--line URL` instead of REPORT")) }
            return .success(ReportFile(path: path, currentDirectory: context.currentDirectory))
        }
        switch line {
        case nil: return .failure(ReportLoadProblem(message: "missing REPORT (a report file, or `--line URL` for a line's merged report)"))
        case .failure(let e)?: return .failure(ReportLoadProblem(message: e.message))
        case .success(let cs)?: return .success(LineReportSource(connectionString: cs, run: arguments.value("run")))
        }
    }

}
