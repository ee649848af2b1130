import Engine
import Foundation
import LineStore
import PostgresClient
import Workflow

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
        one of them. --line URL (or PROVISION_LINE) instead of REPORT: the merged report of a line's run
        (--run ID, default the most recently started), every device once, whichever station worked it.
        --json: the report itself (the usual schema). Exit status: 0 done, 2 unreadable report, 3 the
        line cannot be reached.
        """
    public let positionals = [PositionalSpec("REPORT", help: "a report written by `provision run` (or --line)", isOptional: true)]
    public let options = [
        OptionSpec("compare", kind: .value("OTHER"), help: "an earlier report to compare against"),
        OptionSpec("csv", kind: .flag, help: "one CSV row per device"),
        OptionSpec("json", kind: .flag, help: "print the report as JSON (the usual schema)"),
        LineOption.spec,
        LineOption.runSpec,
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        func load(_ p: String) -> RunReport? {
            switch Self.read(p, currentDirectory: context.currentDirectory) {
            case .success(let report): return report
            case .failure(let problem):
                out.err(escaping: "error: \(p): \(problem.message)")
                return nil
            }
        }
        let report: RunReport
        switch await Self.source(arguments, context) {
        case .failure(let problem):
            out.err(escaping: "error: \(problem.message)")
            return problem.code
        case .success(.line(let merged)):
            report = merged
        case .success(.file(let path)):
            guard let r = load(path) else { return ExitCode.invalidInput }
            report = r
        }
        if arguments.flag("json") {
            if arguments.flag("csv") || arguments.value("compare") != nil {
                out.err("error: `--json` prints the report itself; give it without `--csv` and `--compare`")
                return ExitCode.invalidInput
            }
            out.writeOut(String(decoding: RecordEncoder.pretty(report), as: UTF8.self) + "\n")
            return ExitCode.success
        }
        if let otherPath = arguments.value("compare") {
            guard let older = load(otherPath) else { return ExitCode.invalidInput }
            for line in Self.compare(older: older, newer: report) { out.out(escaping: line) }
            return ExitCode.success
        }
        if arguments.flag("csv") {
            out.writeOut(Self.csv(report))
            return ExitCode.success
        }
        let r = report.run
        out.out(escaping: "run \(r.id)\(r.simulated ? " [simulated]" : "")\(r.resumed ? " (resumed)" : "")")
        out.out(escaping: "  workflow  \(r.workflow.name ?? "-")  \(r.workflow.path)  sha256 \(r.workflow.sha256.prefix(12))…")
        out.out(escaping: "  inventory \(r.inventory.path)  sha256 \(r.inventory.sha256.prefix(12))…")
        out.out(escaping: "  adapters  \(r.adapters.map { $0.id + ($0.failure.map { " (failed: \($0))" } ?? "") }.joined(separator: ", "))")
        out.out(escaping: "  station \(r.station), \(r.started) → \(r.finished ?? "?"), provision \(r.toolVersion)")
        if let stop = r.stopped { out.out(escaping: "  stopped: \(stop.message)") }
        RunCommand.printSummary(report, output: out)
        let notOK = report.devices.filter { $0.outcome != .succeeded }
        if !notOK.isEmpty {
            out.out(escaping: "devices that did not succeed:")
            for d in notOK {
                let why = d.error.map { "\($0.kind.rawValue) at `\($0.step ?? "?")`: \($0.message)" } ?? (d.skipReason ?? "")
                out.out(escaping: "  \(d.id)  \(d.outcome.rawValue)  \(why)")
            }
        }
        return ExitCode.success
    }

    /// Why a report could not be read, in words (not Foundation's).
    struct ReadProblem: Error {
        var message: String
        var code: Int32 = ExitCode.invalidInput
    }

    /// Where the report comes from: a file, or a line's run (merged from its database).
    enum Source {
        case file(String)
        case line(RunReport)
    }

    /// The report's source: `REPORT`, or `--line URL [--run ID]` (never both).
    static func source(_ arguments: ParsedArguments, _ context: CommandContext) async -> Result<Source, ReadProblem> {
        let line = LineOption.connectionString(arguments, context)
        let path = arguments.positionals.first
        if arguments.value("line") != nil, path != nil {
            return .failure(ReadProblem(message: "give REPORT or `--line URL`, not both"))
        }
        if let path {
            if arguments.value("run") != nil { return .failure(ReadProblem(message: "`--run` names a run of a line: give `--line URL` instead of REPORT")) }
            return .success(.file(path))
        }
        switch line {
        case nil:
            return .failure(ReadProblem(message: "missing REPORT (a report file, or `--line URL` for a line's merged report)"))
        case .failure(let e)?:
            return .failure(ReadProblem(message: e.message))
        case .success(let cs)?:
            do {
                return .success(.line(try await LineReport.load(cs, run: arguments.value("run"))))
            } catch let e as LineReport.LoadError {
                return .failure(ReadProblem(message: e.description))
            } catch {
                let (message, code) = LineOption.describe(error)
                return .failure(ReadProblem(message: "cannot read the line: \(message)", code: code))
            }
        }
    }

    /// Reads a report, with a message for each way it can fail: missing, a directory, unreadable, not
    /// JSON (with the position), not a provision report, another schema version, or a field missing or
    /// of the wrong type (named by its path, `devices[3].outcome`).
    static func read(_ path: String, currentDirectory: String) -> Result<RunReport, ReadProblem> {
        let full = path.hasPrefix("/") ? path : currentDirectory + "/" + path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory) else {
            return .failure(ReadProblem(message: "no such file"))
        }
        if isDirectory.boolValue { return .failure(ReadProblem(message: "is a directory, not a report")) }
        guard let data = FileManager.default.contents(atPath: full) else {
            return .failure(ReadProblem(message: "cannot read the file (permissions?)"))
        }
        if data.isEmpty { return .failure(ReadProblem(message: "the file is empty, not a report")) }
        struct Header: Decodable { var schema: String? }
        let header: Header
        do {
            header = try JSONDecoder().decode(Header.self, from: data)
        } catch DecodingError.dataCorrupted(let c) where c.codingPath.isEmpty {
            return .failure(ReadProblem(message: "not JSON (\(jsonSyntaxError(data)))"))
        } catch {
            return .failure(ReadProblem(message: "not a provision report: " + describe(error)))
        }
        guard let schema = header.schema else {
            return .failure(ReadProblem(message: "not a provision report (it has no `schema`)"))
        }
        guard schema == RunReport.schemaVersion else {
            return .failure(ReadProblem(message: "schema `\(schema)` is not `\(RunReport.schemaVersion)`, the one this version of provision reads"))
        }
        do {
            return .success(try RunReport.read(from: full))
        } catch {
            return .failure(ReadProblem(message: "not a valid \(RunReport.schemaVersion) report: " + describe(error)))
        }
    }

    /// Where JSON text breaks, as `invalid value at line 2, column 7` (the parser counts characters).
    static func jsonSyntaxError(_ data: Data) -> String {
        do {
            _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
            return "unexpected content"
        } catch {
            let text = ((error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String) ?? "malformed"
            guard let m = text.firstMatch(of: /(.*) around character ([0-9]+)\.?/), let offset = Int(m.2) else { return text }
            var line = 1, column = 1
            for b in data.prefix(offset) where b & 0xC0 != 0x80 {
                if b == 0x0A { line += 1; column = 1 } else { column += 1 }
            }
            return "\(m.1.prefix(1).lowercased() + m.1.dropFirst()) at line \(line), column \(column)"
        }
    }

    /// A decoding error in words: where in the document and what was wrong.
    static func describe(_ error: any Error) -> String {
        func at(_ path: [any CodingKey]) -> String {
            var text = ""
            for key in path {
                if let i = key.intValue { text += "[\(i)]" } else { text += (text.isEmpty ? "" : ".") + key.stringValue }
            }
            return text.isEmpty ? "the top level" : "`\(text)`"
        }
        guard let e = error as? DecodingError else { return "\(error)" }
        switch e {
        case .dataCorrupted(let c):
            return c.codingPath.isEmpty ? "not JSON" : "\(at(c.codingPath)) has a value this version does not know"
        case .keyNotFound(let key, let c):
            return "\(at(c.codingPath + [key])) is missing"
        case .typeMismatch(let type, let c):
            let expected: String
            switch "\(type)" {
            case "String": expected = "text"
            case "Bool": expected = "true or false"
            case "Int", "Double", "Int64", "UInt64": expected = "a number"
            case let t where t.hasPrefix("Array"): expected = "a list"
            case let t where t.hasPrefix("Dictionary"): expected = "an object"
            default: expected = "an object"
            }
            return "\(at(c.codingPath)) is not \(expected)"
        case .valueNotFound(_, let c):
            return "\(at(c.codingPath)) is null"
        @unknown default:
            return "\(error)"
        }
    }

    /// RFC 4180 CSV: a header, then one row per device. A cell a spreadsheet would take for a formula
    /// (it begins with `=`, `+`, `-`, `@`, a tab or a carriage return, OWASP's list) is written with a
    /// leading `'`, so it is shown as text instead of run; plain numbers (`-73`) are left as they are.
    static func csv(_ report: RunReport) -> String {
        let keys = Set(report.devices.flatMap { $0.captured.keys }).sorted()
        func field(_ raw: String) -> String {
            let s = neutralised(raw)
            return s.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" })
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

    /// `'` before a cell that begins like a formula (see `csv`).
    static func neutralised(_ cell: String) -> String {
        guard let first = cell.unicodeScalars.first else { return cell }
        // OWASP's characters, and their full-width forms, which some spreadsheets also accept.
        let triggers: Set<Unicode.Scalar> = ["=", "+", "-", "@", "\t", "\r", "\u{FF1D}", "\u{FF0B}", "\u{FF0D}", "\u{FF20}"]
        guard triggers.contains(first) else { return cell }
        if cell.wholeMatch(of: /[+-]?[0-9]+(\.[0-9]+)?/) != nil { return cell }
        return "'" + cell
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
