import Engine
import Foundation
import Workflow

/// Every file `provision run` writes, with its default filled in, checked together (`OutputPaths`)
/// before anything is touched.
struct RunPaths {
    /// As given, or the default (`reports/<workflow>-<time>.journal`, beside the report).
    var journal: String
    var report: String
    /// A line station's outcomes while the line is away (no journal then).
    var spool: String
    /// The retry file beside the report (`RetryFile`).
    var retry: String
    /// One trace file per adapter (`TraceOutputs` names them), or none.
    var traces: [String]
    /// The check of them all.
    var plan: OutputPaths

    init(_ o: RunCommandOptions, workflowName: String, inputs: [InputFile], currentDirectory: String, stamp: String = RunPaths.timestamp()) {
        // Files kept beside the report go to `reports/` when the report is a FIFO, a device or a stream.
        let beside = OutputPaths.Beside(report: o.report, fallback: "reports/\(Self.slug(workflowName))-\(stamp)", currentDirectory: currentDirectory)
        journal = o.resume ?? o.journal ?? beside.path("journal")
        report = o.report ?? Self.replacingExtension(journal, with: "json")
        spool = o.spool ?? beside.path("spool", report: report)
        retry = beside.path("retry", report: report)
        traces = o.trace.map { TraceOutputs.paths(for: $0, adapters: o.adapters.map(\.spec)) } ?? []
        typealias Output = OutputPaths.Output
        var outputs = [
            o.line != nil
                ? Output(option: "spool", path: spool, kind: .spool, isDefault: o.spool == nil)
                : Output(option: o.resume != nil ? "resume" : "journal", path: journal, kind: .journal, isDefault: o.resume == nil && o.journal == nil),
            Output(option: "report", path: report, kind: .document, isDefault: o.report == nil),
        ]
        let others: [(String, String?, OutputPaths.Kind)] = [
            ("events", { if case .file(let p)? = o.events { return p } else { return nil } }(), .stream),
            ("junit", o.junit, .document), ("html", o.html, .document), ("bonds", o.bonds, .state),
            ("sim-state", o.simState, .state), ("sim-dump", o.simDump, .document),
        ]
        for case let (option, path?, kind) in others { outputs.append(Output(option: option, path: path, kind: kind)) }
        outputs.append(Output(option: "retry", path: retry, kind: .document, isDefault: beside.isDefault(o.report),
                              shownAs: "the retry file \(retry) (beside the report)"))
        for path in traces { outputs.append(Output(option: "trace", path: path, kind: .stream)) }
        plan = OutputPaths(outputs: outputs, inputs: inputs, currentDirectory: currentDirectory)
        plan.force = o.force
        plan.resume = o.resume != nil
        if o.resume != nil {
            plan.resumedRunID = (try? JournalState.read(path: plan.absolute(journal)))?.headers.first?.runId
        }
    }

    /// A path as the engine and the adapters use it: relative ones start from the command's directory.
    func absolute(_ path: String) -> String { plan.absolute(path) }

    /// Creates the directory of every default path (`reports/`): only for a real run, once every path
    /// has been checked.
    func createDefaultDirectories() {
        for output in plan.outputs where output.isDefault {
            try? FileManager.default.createDirectory(atPath: InventoryParser.directory(of: plan.absolute(output.path)),
                                                     withIntermediateDirectories: true)
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
