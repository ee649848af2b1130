import Engine
import EngineTestSupport
import Foundation
import Testing
import Workflow
@testable import ProvisionCLI

/// `provision report --where` and `--group-by` over typed report fields.
@Suite struct ReportQueryTests {
    static func ids(_ out: String) -> [String] {
        out.split(separator: "\n").dropFirst().map { $0.trimmingCharacters(in: .whitespaces).split(separator: " ").first.map(String.init) ?? "" }
    }

    @Test func whereComparesVersionsAsVersionsAndNumbersAsNumbers() async throws {
        let line = try TestLine()
        defer { line.remove() }
        try AuditReportFixture.write(AuditReportFixture.report(), to: line.directory)
        // 10.0.0 is not below 2.0.0 (text order would say it is).
        let old = await run(["report", "audit.json", "--where", "firmware < 2.0.0"], in: line.directory)
        #expect(old.code == 0, "\(old.err)")
        #expect(old.out == """
            2 of 12 device(s) where firmware < 2.0.0:
              SN-0002  failed  firmware 1.9.0
              SN-0006  succeeded  firmware 1.9.0

            """)
        let low = await run(["report", "audit.json", "--where", "battery < 20"], in: line.directory)
        #expect(Self.ids(low.out) == ["SN-0002", "SN-0008"])
        let both = await run(["report", "audit.json", "-w", "firmware >= 2 and battery in [12, 40, 100] or error.kind == not_found"], in: line.directory)
        #expect(Self.ids(both.out) == ["SN-0004", "SN-0007", "SN-0008", "SN-0010"])
        let failed = await run(["report", "audit.json", "--where", "outcome == failed"], in: line.directory)
        #expect(Self.ids(failed.out) == ["SN-0002", "SN-0007", "SN-0008"])
        let measured = await run(["report", "audit.json", "--where", "measurement.battery_level == fail"], in: line.directory)
        #expect(Self.ids(measured.out) == ["SN-0002", "SN-0008"])
        let steps = await run(["report", "audit.json", "--where", "step.scan.duration_ms > 1000 and rssi == null"], in: line.directory)
        #expect(Self.ids(steps.out) == ["SN-0007"])
        // A redacted secret is no value: it never matches, whatever the comparison.
        let secret = await run(["report", "audit.json", "--where", "config == null and outcome == succeeded"], in: line.directory)
        #expect(Self.ids(secret.out) == ["SN-0005"])
    }

    @Test func aBadExpressionNamesItsColumn() async throws {
        let line = try TestLine()
        defer { line.remove() }
        try AuditReportFixture.write(AuditReportFixture.report(), to: line.directory)
        let r = await run(["report", "audit.json", "--where", "firmware < 2.0.0 and batery < 20"], in: line.directory)
        #expect(r.code == 2)
        #expect(r.out == "")
        #expect(r.err == """
            error: --where: column 22: unknown name `batery`
                firmware < 2.0.0 and batery < 20
                                     ^
                hint: did you mean `battery`?

            """)
        let typed = await run(["report", "audit.json", "--where", "battery == \"20\""], in: line.directory)
        #expect(typed.code == 2)
        #expect(typed.err.hasPrefix("error: --where: column 12: cannot compare `battery` (an unsigned integer) with the text \"20\""))
        let syntax = await run(["report", "audit.json", "--where", "battery < "], in: line.directory)
        #expect(syntax.code == 2 && syntax.err.hasPrefix("error: --where: column "))
    }

    @Test func groupByCountsVersionsInVersionOrderAndSummarisesNumbers() async throws {
        let line = try TestLine()
        defer { line.remove() }
        try AuditReportFixture.write(AuditReportFixture.report(), to: line.directory)
        let r = await run(["report", "audit.json", "--group-by", "firmware"], in: line.directory)
        #expect(r.code == 0)
        let rows = r.out.split(separator: "\n").map(String.init)
        #expect(rows.first == "firmware (a version): 12 device(s), 11 with a value")
        #expect(rows.dropFirst().map { $0.split(separator: "  ", omittingEmptySubsequences: true).prefix(2).map { $0.trimmingCharacters(in: .whitespaces) } }
            == [["1.9.0", "2"], ["2.0.0", "3"], ["2.4.1", "5"], ["10.0.0", "1"], ["(no value)", "1"]])

        let json = await run(["report", "audit.json", "--group-by", "battery", "--json"], in: line.directory)
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [[String: Any]])
        let battery = try #require(doc.first)
        #expect(battery["field"] as? String == "battery" && battery["type"] as? String == "uint")
        #expect(battery["missing"] as? Int == 1)
        let stats = try #require(battery["statistics"] as? [String: Int])
        #expect(stats == ["min": 12, "p50": 64, "max": 100])
        let bins = try #require(battery["histogram"] as? [[String: Any]])
        #expect(bins.compactMap { $0["count"] as? Int }.reduce(0, +) == 11)
        #expect(bins.first?["from"] as? Int == 12)

        // With --where: the distribution of the selected devices only.
        let failed = await run(["report", "audit.json", "--where", "outcome == failed", "--group-by", "error.kind"], in: line.directory)
        #expect(failed.out.contains("2 of 12") == false)
        #expect(failed.out.contains("  verify_failed       2"))
        #expect(failed.out.contains("  not_found           1"))

        let unknown = await run(["report", "audit.json", "--group-by", "firmwre"], in: line.directory)
        #expect(unknown.code == 2)
        #expect(unknown.err == "error: --group-by: unknown field `firmwre`\n    hint: did you mean `firmware`?\n")
    }

    @Test func jsonOfASelectionIsAReportOfTheSelectedDevices() async throws {
        let line = try TestLine()
        defer { line.remove() }
        try AuditReportFixture.write(AuditReportFixture.report(), to: line.directory)
        let r = await run(["report", "audit.json", "--where", "firmware < 2.0.0", "--json"], in: line.directory)
        #expect(r.code == 0)
        try Data(r.out.utf8).write(to: URL(fileURLWithPath: line.directory + "/selected.json"))
        let selected = try RunReport.read(from: line.directory + "/selected.json")
        #expect(selected.devices.map(\.id) == ["SN-0002", "SN-0006"])
        #expect(selected.summary.total == 2 && selected.summary.outcomes[.failed] == 1)
        #expect(selected.devices[0].captured["battery"] == .integer(19))
        #expect(selected.run.captureTypes?["firmware"] == .version)
        // Without --where, the report as written.
        let all = await run(["report", "audit.json", "--json"], in: line.directory)
        #expect(all.out == (try String(contentsOfFile: line.directory + "/audit.json", encoding: .utf8)))
    }

    @Test func anOlderReportIsReadWithItsValuesAsTextAndSaysSoOnce() async throws {
        let line = try TestLine()
        defer { line.remove() }
        _ = try AuditReportFixture.writeVersion1(to: line.directory)
        let r = await run(["report", "old.json", "--where", "firmware == \"1.9.0\""], in: line.directory)
        #expect(r.code == 0)
        #expect(Self.ids(r.out) == ["SN-0002", "SN-0006"])
        #expect(r.err == "note: old.json is a provision.report/1 report: its captured values have no types and are read as text"
            + " (compare them with quoted text, e.g. `firmware == \"2.4.1\"`; reports of this version keep their types)\n")
        let typed = await run(["report", "old.json", "--where", "firmware < 2.0.0"], in: line.directory)
        #expect(typed.code == 2)
        #expect(typed.err.contains("error: --where: column 12: cannot compare text with a version: `firmware` (text) and 2.0.0"))
        let summary = await run(["report", "old.json"], in: line.directory)
        #expect(summary.code == 0 && summary.out.contains("12 device(s): 9 succeeded, 3 failed"))
    }

    @Test func fieldsAreListedWithTheirTypes() async throws {
        let line = try TestLine()
        defer { line.remove() }
        try AuditReportFixture.write(AuditReportFixture.report(), to: line.directory)
        let r = await run(["report", "audit.json", "--fields"], in: line.directory)
        let rows = r.out.split(separator: "\n").map(String.init)
        for expected in ["outcome  one of succeeded, failed, skipped, interrupted", "rssi  int", "duration_ms  real", "firmware  version",
                         "captured.battery  uint", "config  bytes", "step.read_firmware.duration_ms  real",
                         "measurement.battery_level  one of pass, fail", "measurement.battery_level.value  uint",
                         "measurement.firmware.value  version"] {
            #expect(rows.contains(expected), "\(expected)")
        }
    }

    @Test func slugsAreUniqueAndReadable() {
        #expect(ReportFields.slugs(["set configuration", "Set Configuration!", "read 2A26", "--", ""]) ==
            ["set_configuration", "set_configuration_2", "read_2a26", "--", "unnamed"])
    }
}
