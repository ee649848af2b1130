import Engine
import Foundation

/// `provision report REPORT [--compare OTHER] [--csv]`: reads run reports back for an audit — the
/// summary, one row per device with its outcome and captured values, or what changed between two runs.
public struct ReportCommand: Command {
    public init() {}

    public let name = "report"
    public let summary = "summarise a run report, list its devices as CSV, or compare two runs"
    public let discussion = """
        Without options: the run, its summary and every device that did not succeed. --csv: one row per
        device (id, outcome, error kind, failed step, adapter, RSSI, duration, then every captured value),
        for a spreadsheet or an MES import. --compare OTHER: per device, what changed from OTHER (the
        older run) to REPORT: outcome, error kind, captured values (e.g. firmware), and devices only in
        one of them. Exit status: 0 done, 2 unreadable report.
        """
    public let positionals = [PositionalSpec("REPORT", help: "a report written by `provision run`")]
    public let options = [
        OptionSpec("compare", kind: .value("OTHER"), help: "an earlier report to compare against"),
        OptionSpec("csv", kind: .flag, help: "one CSV row per device"),
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        guard let path = arguments.positionals.first else { return ExitCode.invalidInput }
        func load(_ p: String) -> RunReport? {
            let resolved = p.hasPrefix("/") ? p : context.currentDirectory + "/" + p
            do {
                let report = try RunReport.read(from: resolved)
                guard report.schema == RunReport.schemaVersion else {
                    out.err("error: \(p): schema `\(report.schema)` is not `\(RunReport.schemaVersion)`")
                    return nil
                }
                return report
            } catch {
                out.err("error: \(p) is not a readable provision report: \(error)")
                return nil
            }
        }
        guard let report = load(path) else { return ExitCode.invalidInput }
        if let otherPath = arguments.value("compare") {
            guard let older = load(otherPath) else { return ExitCode.invalidInput }
            for line in Self.compare(older: older, newer: report) { out.out(line) }
            return ExitCode.success
        }
        if arguments.flag("csv") {
            out.writeOut(Self.csv(report))
            return ExitCode.success
        }
        let r = report.run
        out.out("run \(r.id)\(r.simulated ? " [simulated]" : "")\(r.resumed ? " (resumed)" : "")")
        out.out("  workflow  \(r.workflow.name ?? "-")  \(r.workflow.path)  sha256 \(r.workflow.sha256.prefix(12))…")
        out.out("  inventory \(r.inventory.path)  sha256 \(r.inventory.sha256.prefix(12))…")
        out.out("  adapters  \(r.adapters.map { $0.id + ($0.failure.map { " (failed: \($0))" } ?? "") }.joined(separator: ", "))")
        out.out("  station \(r.station), \(r.started) → \(r.finished ?? "?"), provision \(r.toolVersion)")
        if let stop = r.stopped { out.out("  stopped: \(stop.message)") }
        RunCommand.printSummary(report, output: out)
        let notOK = report.devices.filter { $0.outcome != .succeeded }
        if !notOK.isEmpty {
            out.out("devices that did not succeed:")
            for d in notOK {
                let why = d.error.map { "\($0.kind.rawValue) at `\($0.step ?? "?")`: \($0.message)" } ?? (d.skipReason ?? "")
                out.out("  \(d.id)  \(d.outcome.rawValue)  \(why)")
            }
        }
        return ExitCode.success
    }

    /// RFC 4180 CSV: a header, then one row per device.
    static func csv(_ report: RunReport) -> String {
        let keys = Set(report.devices.flatMap { $0.captured.keys }).sorted()
        func field(_ s: String) -> String {
            s.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" })
                ? "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : s
        }
        var rows = [(["id", "address", "name", "outcome", "error_kind", "error_step", "error_message", "adapter", "rssi", "duration_ms", "attempts"] + keys)
            .map(field).joined(separator: ",")]
        for d in report.devices {
            var cells = [d.id, d.address ?? "", d.name ?? "", d.outcome.rawValue, d.error?.kind.rawValue ?? "", d.error?.step ?? "",
                         d.error?.message ?? d.skipReason ?? "", d.adapter ?? "", d.rssi.map(String.init) ?? "",
                         d.durationMs.map { String(format: "%.1f", $0) } ?? "", String(d.attempts)]
            cells += keys.map { d.captured[$0] ?? "" }
            rows.append(cells.map(field).joined(separator: ","))
        }
        return rows.joined(separator: "\r\n") + "\r\n"
    }

    /// What changed from `older` to `newer`, one line per change; a last line counts them.
    static func compare(older: RunReport, newer: RunReport) -> [String] {
        var lines: [String] = []
        let before = Dictionary(older.devices.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let after = Dictionary(newer.devices.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        if older.run.workflow.sha256 != newer.run.workflow.sha256 {
            lines.append("workflow changed: \(older.run.workflow.path) \(older.run.workflow.sha256.prefix(12))… → \(newer.run.workflow.path) \(newer.run.workflow.sha256.prefix(12))…")
        }
        var changed = 0
        for d in newer.devices {
            guard let old = before[d.id] else {
                lines.append("\(d.id): only in \(newer.run.id) (\(d.outcome.rawValue))")
                changed += 1
                continue
            }
            var parts: [String] = []
            if old.outcome != d.outcome { parts.append("outcome \(old.outcome.rawValue) → \(d.outcome.rawValue)") }
            if old.error?.kind != d.error?.kind, old.outcome == d.outcome {
                parts.append("error \(old.error?.kind.rawValue ?? "none") → \(d.error?.kind.rawValue ?? "none")")
            }
            for key in Set(old.captured.keys).union(d.captured.keys).sorted() where old.captured[key] != d.captured[key] {
                parts.append("\(key) \(old.captured[key] ?? "-") → \(d.captured[key] ?? "-")")
            }
            if !parts.isEmpty {
                lines.append("\(d.id): " + parts.joined(separator: "; "))
                changed += 1
            }
        }
        for d in older.devices where after[d.id] == nil {
            lines.append("\(d.id): only in \(older.run.id) (\(d.outcome.rawValue))")
            changed += 1
        }
        lines.append("\(changed) of \(Set(before.keys).union(after.keys).count) device(s) differ between \(older.run.id) and \(newer.run.id)")
        return lines
    }
}
