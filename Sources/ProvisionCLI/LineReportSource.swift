import Engine
import Foundation
import LineStore
import PostgresClient

/// The merged report of a line's run, read from its database (`provision report --line URL [--run ID]`).
struct LineReportSource: ReportSource {
    var connectionString: ConnectionString
    /// The run; nil: the most recently started.
    var run: String?

    var label: String { "line \(connectionString)" + (run.map { ", run \($0)" } ?? "") }

    func load() async -> Result<LoadedReport, ReportLoadProblem> {
        do {
            let report = try await LineReport.load(connectionString, run: run)
            return .success(LoadedReport(report: report, label: label, schema: report.schema))
        } catch let e as LineReport.LoadError {
            return .failure(ReportLoadProblem(message: e.description))
        } catch {
            let (message, code) = LineOption.describe(error)
            return .failure(ReportLoadProblem(message: "cannot read the line: \(message)", code: code))
        }
    }
}
