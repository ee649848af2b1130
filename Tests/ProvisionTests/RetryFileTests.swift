import Engine
import EngineTestSupport
import Foundation
import Testing
@testable import ProvisionCLI

/// The retry file beside the report, and `--limit @file` reading it back.
@Suite struct RetryFileTests {
    @Test func aRunLeavesTheFailedIdsForLimitAndTheRetryRunsOnlyThem() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 4, faults: [2: "{ firmware: \"1.9.0\" }", 4: "{ firmware: \"1.0.0\" }"])
        let base = ["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--sim-latency", "0", "--quiet"]
        let first = await run(base + ["--report", "r.json"], in: line.directory)
        #expect(first.code == 1)
        #expect(first.out.contains("retry: r.retry\n"))
        let text = try String(contentsOfFile: line.directory + "/r.retry", encoding: .utf8)
        let ids = text.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(ids == ["SN-0002", "SN-0004"])
        #expect(text.hasPrefix("# run-"))
        #expect(text.contains("# Run them again with: provision run … --limit @r.retry\n"))

        // As Ansible: run again with --limit @file; only those two run.
        let again = await run(base + ["--report", "r2.json", "--limit", "@r.retry"], in: line.directory)
        #expect(again.code == 1)
        let r2 = try RunReport.read(from: line.directory + "/r2.json")
        #expect(r2.devices.map(\.id) == ["SN-0002", "SN-0004"])

        // A run where every device succeeds writes none; replacing a report removes the retry file it had.
        let ok = await run(base + ["--report", "r.json", "--limit", "SN-0001,SN-0003", "--journal", "r3.journal", "--force"], in: line.directory)
        #expect(ok.code == 0, "\(ok.err)")
        #expect(!ok.out.contains("retry:"))
        #expect(!FileManager.default.fileExists(atPath: line.directory + "/r.retry"))
    }

    @Test func anExistingRetryFileIsNotReplacedWithoutForce() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 2, faults: [2: "{ firmware: \"1.9.0\" }"])
        try Data("SN-0099\n".utf8).write(to: URL(fileURLWithPath: line.directory + "/r.retry"))
        let r = await run(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet", "--report", "r.json"], in: line.directory)
        #expect(r.code == 2)
        #expect(r.err.contains("the retry file r.retry (beside the report) already exists; it is not replaced unless you add `--force`"))
        #expect(try String(contentsOfFile: line.directory + "/r.retry", encoding: .utf8) == "SN-0099\n")
    }

    @Test func needsReviewDevicesAreNamedInACommentNotListed() throws {
        var report = AuditReportFixture.report()
        report.devices[2].outcome = .failed
        report.devices[2].error = FailureRecord(kind: .needsReview, step: "commit", message: "in doubt")
        report.devices[3].outcome = .skipped
        let text = try #require(RetryFile.text(report, reportPath: "reports/audit.json"))
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.filter { !$0.hasPrefix("#") } == ["SN-0002", "SN-0004", "SN-0007", "SN-0008"])
        #expect(lines.contains("# SN-0003 needs_review: not listed; an irreversible step may have reached it, check it before running it again"))
        #expect(RetryFile.path(forReport: "reports/audit.json") == "reports/audit.retry")
        var ok = AuditReportFixture.report([AuditReportFixture.units[0]])
        ok.devices[0].outcome = .succeeded
        #expect(RetryFile.text(ok, reportPath: "r.json") == nil)
    }
}
