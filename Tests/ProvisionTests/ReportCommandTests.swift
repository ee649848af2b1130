import Engine
import Foundation
import Testing
import TestSupport

/// `provision report`: what an auditor reads back from runs.
@Suite struct ReportCommandTests {
    /// Two runs of one line: the first with an old-firmware unit, the second after it was updated.
    static func twoRuns(_ line: TestLine) async throws -> (String, String) {
        let first = try line.load(try line.write(count: 3, faults: [2: "{ firmware: \"1.9.0\" }"]))
        _ = try await Runner.run(workflow: first.workflow, inventory: first.inventory, devices: first.devices,
                                 adapters: [try line.simulator(first)], options: line.options("first"))
        let second = try line.load(try line.write(count: 3, faults: [2: "{ firmware: \"2.5.0\" }"]))
        _ = try await Runner.run(workflow: second.workflow, inventory: second.inventory, devices: second.devices,
                                 adapters: [try line.simulator(second)], options: line.options("second"))
        return (line.directory + "/first.json", line.directory + "/second.json")
    }

    @Test func theSummaryListsTheDevicesThatDidNotSucceed() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let (first, _) = try await Self.twoRuns(line)
        let r = await run(["report", first], in: line.directory)
        #expect(r.code == 0)
        #expect(r.out.contains("3 device(s): 2 succeeded, 1 failed"))
        #expect(r.out.contains("SN-0002  failed  verify_failed at `firmware is supported`"))
        #expect(!r.out.contains("SN-0001  "))
    }

    @Test func csvHasOneRowPerDeviceWithItsCapturedValues() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let (first, _) = try await Self.twoRuns(line)
        let r = await run(["report", first, "--csv"], in: line.directory)
        let rows = r.out.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        #expect(rows.count == 4)
        #expect(rows[0] == "id,address,name,outcome,error_kind,error_step,error_message,adapter,rssi,duration_ms,attempts,fw,serial,state")
        #expect(rows[2].hasPrefix("SN-0002,C0:5E:00:00:00:02,SNS-0002,failed,verify_failed,firmware is supported,"))
        #expect(rows[2].contains(",1.9.0,SN-0002,"))
        // A message with a quote is quoted, its quotes doubled.
        #expect(rows[2].contains("\"\"\"1.9.0\"\" does not match"))
    }

    @Test func compareNamesWhatChangedPerDevice() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let (first, second) = try await Self.twoRuns(line)
        let r = await run(["report", second, "--compare", first], in: line.directory)
        #expect(r.code == 0)
        let lines = r.out.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("SN-0002: outcome failed → succeeded; fw 1.9.0 → 2.5.0; state - → 02") })
        #expect(lines.last?.hasPrefix("1 of 3 device(s) differ") == true)
    }

    @Test func anUnreadableReportIsAnInputError() async throws {
        let line = try TestLine()
        defer { line.remove() }
        try Data("{ not json".utf8).write(to: URL(fileURLWithPath: line.directory + "/bad.json"))
        let r = await run(["report", "bad.json"], in: line.directory)
        #expect(r.code == 2)
        #expect(r.err.contains("bad.json is not a readable provision report"))
    }
}
