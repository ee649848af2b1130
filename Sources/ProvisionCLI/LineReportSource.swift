import Engine
import Foundation
import LineStore
import PostgresClient

/// The merged report of a line's run, read from its database (`provision report --line URL [--run ID]`).
/// Its devices are checked as a file's are (`ReportChecks`, each id once): a rogue row is refused, not
/// counted.
struct LineReportSource: ReportSource {
    var connectionString: ConnectionString
    /// The run; nil: the most recently started.
    var run: String?

    var label: String { "line \(connectionString)" + (run.map { ", run \($0)" } ?? "") }

    func open() async -> Result<OpenedReport, ReportLoadProblem> {
        do {
            let report = try await LineReport.load(connectionString, run: run)
            if let p = ReportChecks.check(report.run) ?? ReportChecks.check(report.summary) {
                return .failure(ReportLoadProblem(message: "not a valid report: `\(RecordDecodingError.text(p.path))`: \(p.message)"))
            }
            return .success(OpenedReport(label: label, schema: report.schema, run: report.run, summary: report.summary,
                                         devices: MemoryDevices(devices: report.devices, label: "the line's run \(report.run.id)")))
        } catch let e as LineReport.LoadError {
            return .failure(ReportLoadProblem(message: e.description))
        } catch {
            let (message, code) = LineOption.describe(error)
            return .failure(ReportLoadProblem(message: "cannot read the line: \(message)", code: code))
        }
    }
}
