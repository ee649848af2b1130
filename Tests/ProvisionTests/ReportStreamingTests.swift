import Engine
import Foundation
import Testing
import EngineTestSupport
import TestSupport
import Workflow
@testable import ProvisionCLI

/// `provision report` streams a report (docs/report.md, "Reading a report"): what it prints is what it
/// printed when it held the report whole, and every device is checked on the way.
@Suite struct ReportStreamingTests {
    @Test func jsonIsTheReportByteForByte() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let path = try AuditReportFixture.write(AuditReportFixture.report(), to: line.directory)
        let r = await run(["report", "audit.json", "--json"], in: line.directory)
        #expect(r.code == 0)
        #expect(r.out == (try String(contentsOfFile: path, encoding: .utf8)), "devices streamed one by one, as RunReport.write writes them")
        // An empty report too (JSONEncoder's empty list has a blank line).
        let empty = try AuditReportFixture.write(AuditReportFixture.report([]), to: line.directory, name: "empty.json")
        let e = await run(["report", "empty.json", "--json"], in: line.directory)
        #expect(e.out == (try String(contentsOfFile: empty, encoding: .utf8)))
        // A selection: the selected devices, the summary counted over them.
        let s = await run(["report", "audit.json", "--where", "outcome == failed", "--json"], in: line.directory)
        let full = AuditReportFixture.report()
        var selected = full
        selected.devices = full.devices.filter { $0.outcome == .failed }
        selected.summary = Summary.compute(selected.devices, wall: .milliseconds(full.summary.wallMs))
        var expected = Data()
        try selected.writeJSON { expected.append($0) }
        #expect(s.out == String(decoding: expected, as: UTF8.self) + "\n")
    }

    /// Leaving out the parts a query does not read changes no answer.
    @Test func projectionsAnswerAsTheWholeRecordDoes() async throws {
        let line = try TestLine()
        defer { line.remove() }
        try AuditReportFixture.write(AuditReportFixture.report(), to: line.directory)
        let report = AuditReportFixture.report()
        let fields = ReportFields(report)
        for expression in ["firmware < 2.0.0", "battery < 20", "step.scan.duration_ms > 1000 and rssi == null", "measurement.battery_level == fail",
                           "measurements_failed > 0", "error.kind == not_found", "config == null", "captured.model == \"sensor-v2\""] {
            let whole = try DeviceFilter(expression, fields: fields).select(report.devices, fields: fields).map(\.id)
            let r = await run(["report", "audit.json", "--where", expression], in: line.directory)
            #expect(r.code == 0, "\(expression): \(r.err)")
            let printed = r.out.split(separator: "\n").dropFirst().compactMap { $0.split(separator: " ").first.map(String.init) }
            #expect(printed == whole, "\(expression)")
            let projection = ReportProjection(names: Set(try Expression(parsing: expression).names.map(\.name)))
            let slim = report.devices.map(projection.apply)
            #expect(try DeviceFilter(expression, fields: fields).select(slim, fields: fields).map(\.id) == whole, "\(expression)")
        }
    }

    /// The line's merged report is checked as a file is: a rogue row that repeats a device is refused.
    @Test func devicesInMemoryAreCheckedAsAFilesAre() throws {
        let devices = [DeviceRecord(id: "SN-1", address: nil, name: nil, outcome: .succeeded),
                       DeviceRecord(id: "SN-2", address: nil, name: nil, outcome: .failed, rssi: 500),
                       DeviceRecord(id: "SN-1", address: nil, name: nil, outcome: .failed)]
        let stream = MemoryDevices(devices: devices, label: "the line's run r")
        var seen: [String] = []
        do {
            try stream.forEach(checks: ReportChecks(captureTypes: [:]), omitting: [:]) { seen.append($0.id) }
            Issue.record("a bad device was accepted")
        } catch {
            #expect(error.message == "the line's run r: device `SN-2`: `devices[1].rssi`: 500 dBm is not an RSSI (-128 to 127)")
        }
        #expect(seen == ["SN-1"])
        let twice = MemoryDevices(devices: [devices[0], devices[0]], label: "the line's run r")
        #expect(throws: ReportLoadProblem.self) { try twice.forEach(checks: ReportChecks(captureTypes: [:]), omitting: [:]) { _ in } }
    }
}
