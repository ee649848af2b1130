import Engine
import Foundation
import LineStore
import SystemIO
import Workflow

/// How `provision run` ends once its station has closed: the files written from the report (the retry
/// file, `--html`), the summary, where everything is, the command that resumes a stopped run, and the
/// exit status — as text, or with `--json` as one object on standard output.
struct RunEnding {
    let report: RunResult
    let options: RunCommandOptions
    let paths: RunPaths
    let line: LineRunStore?
    let output: Output
    /// Written beside the report, shown as given.
    private(set) var retry: String?
    private(set) var html: String?

    init(report: RunResult, options: RunCommandOptions, paths: RunPaths, line: LineRunStore?, output: Output) {
        self.report = report
        self.options = options
        self.paths = paths
        self.line = line
        self.output = output
    }

    /// The retry file beside the report and the HTML page, when asked; a failure is said, never fatal.
    mutating func writeFiles() {
        do {
            try RetryFile.write(report, reportPath: paths.report, to: paths.absolute(paths.retry))
            if !report.notSucceeded.isEmpty { retry = paths.retry }
        } catch {
            output.err(escaping: "error: cannot write the retry file \(paths.retry): \(error)")
        }
        if let htmlPath = options.html {
            do {
                let page = HTMLReport(report: try RunReport.read(from: paths.absolute(paths.report)), source: paths.report)
                try AtomicFile.write(Array(page.html.utf8), to: paths.absolute(htmlPath))
                html = htmlPath
            } catch {
                output.err(escaping: "error: cannot write \(htmlPath): \(error)")
            }
        }
    }

    /// The command that continues this run from its journal, when devices are left to run (skipped or
    /// interrupted) and the record is a journal (a line station rejoins with the same command).
    var resumeCommand: String? {
        guard line == nil, report.summary.outcomes[.skipped] + report.summary.outcomes[.interrupted] > 0 else { return nil }
        let adapters = options.adapters.map(\.spec)
        let words = ResumeCommand.words(options.words, journal: paths.journal, options: RunCommandOptions.specs) { option, path in
            let files = option == "trace" ? TraceOutputs.paths(for: path, adapters: adapters) : [path]
            return files.contains { FileManager.default.fileExists(atPath: paths.absolute($0)) }
        }
        return ResumeCommand.shellLine(["provision", "run"] + words)
    }

    /// Prints the ending (text on `output`; with `json`, one object there instead) and returns the exit status.
    func finish(stopRequested: Bool, json: Output?) -> Int32 {
        RunCommand.printSummary(run: report.run, summary: report.summary, output: output)
        let resume = resumeCommand
        output.out("report: \(paths.report)")
        if let line { output.out(escaping: line.location) } else { output.out("journal: \(paths.journal)") }
        if let retry { output.out("retry: \(retry)") }
        if let html { output.out("html: \(html)") }
        if let resume { output.out(escaping: "resume: \(resume)") }
        let code = exitCode(stopRequested: stopRequested)
        if let json { json.out(self.json(resume: resume, exitCode: code)) }
        return code
    }

    private func exitCode(stopRequested: Bool) -> Int32 {
        if let line {
            if line.outcomesRefused > 0 {
                output.err(escaping: "note: the line refused \(line.outcomesRefused) outcome(s) of this station (other stations had claimed those devices since); they stay on record in \(paths.spool)")
            }
            if line.unwrittenOutcomes > 0 {
                output.err(escaping: "error: \(line.unwrittenOutcomes) outcome(s) could not reach the line and wait in \(paths.spool); write them with `provision line flush \(paths.spool) --line URL` once it is reachable")
                return ExitCode.environment
            }
        }
        if stopRequested { return ExitCode.interrupted }
        let failed = !report.notSucceeded.isEmpty
        if failed, report.summary.outcomes[.succeeded] == 0, report.run.adapters.allSatisfy({ $0.failure != nil }) {
            return ExitCode.environment
        }
        return failed ? ExitCode.someDevicesFailed : ExitCode.success
    }

    /// `--json`: `{"run", "report", "journal" | "line", "retry", "html", "resume", "summary": {"total",
    /// "outcomes", "errors"}, "stopped": {"reason", "message"}, "exit"}` (absent fields left out), keys sorted.
    func json(resume: String?, exitCode: Int32) -> String {
        var o: [String: Any] = [
            "run": report.run.id, "report": paths.report, "exit": Int(exitCode),
            "summary": ["total": report.summary.total, "errors": report.summary.errors,
                        "outcomes": Dictionary(uniqueKeysWithValues: DeviceOutcome.allCases.map { ($0.rawValue, report.summary.outcomes[$0]) })]
                as [String: Any],
        ]
        if let line { o["line"] = line.location } else { o["journal"] = paths.journal }
        if let retry { o["retry"] = retry }
        if let html { o["html"] = html }
        if let resume { o["resume"] = resume }
        if let stop = report.run.stopped { o["stopped"] = ["reason": stop.reason.rawValue, "message": stop.message] }
        let data = (try? JSONSerialization.data(withJSONObject: o, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
