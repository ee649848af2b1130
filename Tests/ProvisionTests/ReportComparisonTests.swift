import Engine
import EngineTestSupport
import Foundation
import Testing
import Workflow

/// `provision report NEWER --compare OLDER` as text, CSV and JSON.
@Suite struct ReportComparisonTests {
    /// Last week: SN-0004 still on 2.4.1, SN-0008 passed, SN-0012 not in the line yet; SN-0013 was.
    static func write(_ dir: String) throws {
        try AuditReportFixture.write(AuditReportFixture.report(), to: dir, name: "now.json")
        var units = AuditReportFixture.units
        units[3].firmware = "2.4.1"
        units[7].battery = 60
        units[7].outcome = .succeeded
        units[7].kind = nil
        units.removeLast()
        units.append(AuditReportFixture.Unit(id: "SN-0013", firmware: "2.4.1", battery: 50))
        try AuditReportFixture.write(AuditReportFixture.report(units, id: "run-old", started: "2025-12-29T08:00:00.000Z"), to: dir, name: "then.json")
    }

    @Test func textSaysWhatChangedPerDeviceAndTheCountsByOutcome() async throws {
        let line = try TestLine()
        defer { line.remove() }
        try Self.write(line.directory)
        let r = await run(["report", "now.json", "--compare", "then.json"], in: line.directory)
        #expect(r.code == 0, "\(r.err)")
        #expect(r.out == """
            SN-0004: firmware 2.4.1 → 10.0.0
            SN-0008: outcome succeeded → failed; error.kind - → verify_failed; battery 60 → 12; measurement.battery level pass → fail
            SN-0012: only in run-20260105T080000-aaaaaa (succeeded)
            SN-0013: only in run-old (succeeded)
            changes by field: battery 1, error.kind 1, firmware 1, measurement.battery level 1, outcome 1
            outcomes: succeeded 10 → 9, failed 2 → 3
            4 of 13 device(s) differ between run-old and run-20260105T080000-aaaaaa

            """)
        // Restricted to what --where selects.
        let low = await run(["report", "now.json", "--compare", "then.json", "--where", "battery < 20"], in: line.directory)
        #expect(low.out.hasPrefix("SN-0008: outcome succeeded → failed"))
        #expect(low.out.contains("1 of 2 device(s) differ"))
    }

    @Test func csvHasARowPerChangeAndJSONTheWholeComparison() async throws {
        let line = try TestLine()
        defer { line.remove() }
        try Self.write(line.directory)
        let csv = await run(["report", "now.json", "--compare", "then.json", "--csv"], in: line.directory)
        let rows = csv.out.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        #expect(rows.first == "id,change,field,before,after,older_run,newer_run")
        #expect(rows.contains("SN-0004,changed,captured.firmware,2.4.1,10.0.0,run-old,run-20260105T080000-aaaaaa"))
        #expect(rows.contains("SN-0013,only_in_older,outcome,succeeded,,run-old,run-20260105T080000-aaaaaa"))
        let expectedRows = 8  // the header, SN-0004's change, SN-0008's four, the two devices in one run only
        #expect(rows.count == expectedRows)

        let json = await run(["report", "now.json", "--compare", "then.json", "--json"], in: line.directory)
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any])
        let differ = doc["differ"] as? Int, total = doc["total"] as? Int
        #expect(differ == 4)
        #expect(total == 13)
        #expect((doc["older"] as? [String: Any])?["id"] as? String == "run-old")
        #expect((doc["outcomes_after"] as? [String: Int])?["failed"] == 3)
        let devices = try #require(doc["devices"] as? [[String: Any]])
        let sn8 = try #require(devices.first { $0["id"] as? String == "SN-0008" })
        let battery = try #require((sn8["changes"] as? [[String: Any]])?.first { $0["field"] as? String == "captured.battery" })
        let before = battery["before"] as? Int, after = battery["after"] as? Int
        #expect(before == 60, "typed values stay numbers")
        #expect(after == 12)
        #expect(devices.first { $0["id"] as? String == "SN-0012" }?["only_in"] as? String == "newer")
    }
}
