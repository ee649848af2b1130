import Foundation
import Testing
@testable import Engine
import EngineTestSupport
import TestSupport
import Workflow

/// The bytes of the report, the journal, the events and JUnit, fixed: every record shape written by a
/// fixed set of values must match the files in Tests/Fixtures/golden, made by the engine before its
/// records carried enums and typed times (commit b806694). `RecordEncoderTests` proves the encoder
/// writes what `JSONEncoder` writes from the same `Codable` definitions; these prove the definitions
/// themselves still write what they wrote.
///
/// `PROVISION_WRITE_GOLDEN=1 swift test --filter RecordGoldenTests` writes the files again (only
/// when a format changes on purpose, with docs/report.md).
@Suite struct RecordGoldenTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/golden").path

    static let awkward = RecordEncoderTests.awkward

    static func steps() -> [StepRecord] {
        [
            StepRecord(name: "scan", kind: "scan", outcome: .succeeded, attempts: 1, startMs: 0, durationMs: 0.123),
            StepRecord(name: "read fw", kind: "read", outcome: .succeeded, attempts: 2, startMs: 1.5, durationMs: 1234.567),
            StepRecord(name: awkward, kind: "verify", outcome: .failed, attempts: 3, startMs: 48003.965, durationMs: 1e-7,
                       error: RecordEncoderTests.failure(awkward)),
            StepRecord(name: "later", kind: "disconnect", outcome: .skipped, attempts: 0, startMs: 123456789012.5, durationMs: 1e20),
            StepRecord(name: "old units only", kind: "write", outcome: .skippedByCondition, attempts: 0, startMs: 2, durationMs: 0,
                       skipReason: "when `firmware < 2.0.0` is false (firmware 2.4.1)"),
            StepRecord(name: "read battery", kind: "read", outcome: .failed, attempts: 1, startMs: 3, durationMs: 4,
                       error: RecordEncoderTests.failure("read battery"), optional: true),
            StepRecord(name: "read temp", kind: "read", outcome: .succeeded, attempts: 1, startMs: 5, durationMs: 6, continueOnError: true),
            StepRecord(name: "blob", kind: "write_blob", outcome: .succeeded, attempts: 1, startMs: 7, durationMs: 8),
            StepRecord(name: "ack", kind: "await", outcome: .succeeded, attempts: 1, startMs: 9, durationMs: 10),
            StepRecord(name: "pair", kind: "pair", outcome: .succeeded, attempts: 1, startMs: 11, durationMs: 12),
            StepRecord(name: "derive", kind: "set", outcome: .succeeded, attempts: 1, startMs: 13, durationMs: 14),
        ]
    }

    static func records() -> [DeviceRecord] {
        let full = DeviceRecord(id: "SN-0001", address: "C0:5E:00:00:00:01", name: "SNS-1", outcome: .failed, attempts: 2,
                                adapter: "sim0", rssi: -61, started: wallTime("2026-11-30T05:00:00.123Z"), durationMs: 12.5,
                                captured: ["fw": "2.1.0", "serial": "SN-0001", "camelKey": .string(awkward), "battery": 19,
                                           "temperature": 36.4, "offset": -3, "big": .integer(.max), "locked": true, "key": "***"],
                                measurements: RecordEncoderTests.measurements(), steps: steps(),
                                error: RecordEncoderTests.failure("verify fw"), resumed: true, carriedOver: false, attRoundTrips: 19,
                                security: SecurityRecord(level: .authenticated, method: .passkeyEntry, bond: .made, keySize: 16,
                                                         secureConnections: true, bondLost: true))
        let bare = DeviceRecord(id: awkward, address: nil, name: nil, outcome: .skipped, skipReason: "not started: \(awkward)")
        let carried = DeviceRecord(id: "n", address: nil, name: "", outcome: .succeeded, attempts: 1, rssi: -100,
                                   started: wallTime("2026-11-29T23:59:59.999Z"), durationMs: -0.0, captured: [:], steps: [], carriedOver: true,
                                   attRoundTrips: 0, security: SecurityRecord(level: .none))
        let interrupted = DeviceRecord(id: "SN-0004", address: "C0:5E:00:00:00:04", name: "SNS-4", outcome: .interrupted, attempts: 1,
                                       adapter: "hci0", started: wallTime("2026-11-30T05:00:01.000Z"), durationMs: 30001,
                                       steps: [StepRecord(name: "connect", kind: "connect", outcome: .failed, attempts: 1, startMs: 0,
                                                          durationMs: 30001,
                                                          error: FailureRecord(kind: .interrupted, step: "connect", message: "cut while stopping"))],
                                       error: FailureRecord(kind: .interrupted, step: "connect", message: "cut while stopping",
                                                            causes: ["cancelled"]),
                                       security: SecurityRecord(level: .encrypted, method: .justWorks, bond: .used, keySize: 7,
                                                                secureConnections: false))
        return [full, bare, carried, interrupted]
    }

    static func header(resumed: Bool = false) -> JournalHeader {
        JournalHeader(runId: "run-20261130T0500-abc", workflow: FileRef(name: "sensor-v2", path: "workflows/sensor-v2.yaml", sha256: "ab12"),
                      inventory: FileRef(path: "inventory/line 1.yaml", sha256: "cd34"), adapters: resumed ? [] : ["sim0", "hci0"],
                      options: resumed ? [:] : ["concurrency": "256", "limit": awkward], started: wallTime("2026-11-30T05:00:00.000Z"),
                      toolVersion: "0.9.0", resumed: resumed, selected: resumed ? ["SN-0001", awkward] : nil)
    }

    static func lines() -> [JournalLine] {
        var out: [JournalLine] = [
            .header(header(), at: wallTime("2026-11-30T05:00:00.001Z")),
            .started(device: "SN-0001", attempt: 1, at: wallTime("2026-11-30T05:00:00.002Z")),
            .intent(device: awkward, step: "commit", stepIndex: 12, at: wallTime("2026-11-30T05:00:00.003Z")),
        ]
        for r in records() { out.append(.outcome(r, at: wallTime("2026-11-30T05:00:00.010Z"))) }
        out += [
            .end(stopped: StopInfo(reason: .interrupted, message: awkward, at: wallTime("2026-11-30T05:00:01.500Z")), at: wallTime("2026-11-30T05:00:02.000Z")),
            .header(header(resumed: true), at: wallTime("2026-11-30T06:00:00.000Z")),
            .end(stopped: StopInfo(reason: .failureThreshold, message: "line stopped", at: wallTime("2026-11-30T06:00:01.000Z")),
                 at: wallTime("2026-11-30T06:00:01.100Z")),
            .end(stopped: StopInfo(reason: .journalFailed, message: "disk full", at: wallTime("2026-11-30T06:00:01.000Z")),
                 at: wallTime("2026-11-30T06:00:01.100Z")),
            .end(stopped: nil, at: wallTime("2026-11-30T06:00:02.000Z")),
        ]
        return out
    }

    static func report() -> RunReport {
        let info = RunInfo(id: "run-1", workflow: FileRef(name: "sensor-v2", path: "w.yaml", sha256: "ab"),
                           inventory: FileRef(path: "i.yaml", sha256: "cd"),
                           adapters: [AdapterInfo(id: "sim0", simulated: true, slots: 256, failure: nil, peakLinks: 200),
                                      AdapterInfo(id: "hci0", simulated: false, slots: 8, failure: awkward, peakLinks: nil)],
                           simulated: true, station: "line-3", toolVersion: "dev", options: ["c": "256"],
                           started: wallTime("2026-11-30T05:00:00.000Z"), finished: wallTime("2026-11-30T05:00:05.000Z"), journal: "/tmp/j.journal",
                           resumed: true, stopped: StopInfo(reason: .failureThreshold, message: "m", at: wallTime("2026-11-30T05:00:04.000Z")),
                           peakConcurrency: 256,
                           captureTypes: ["battery": .integer(signed: false), "offset": .integer(signed: true), "temperature": .real,
                                          "fw": .version, "serial": .text, "cfg": .bytes, "locked": .boolean])
        return RunReport(run: info, summary: Summary.compute(records(), wall: .milliseconds(5123)), devices: records())
    }

    static func events() -> [RunEvent] {
        let failure = FailureRecord(kind: .timeout, step: "commit", message: awkward, causes: ["a"])
        var events = [
            RunEvent(.runStarted(workflow: "sensor-v2", total: 3)),
            RunEvent(.deviceStarted(device: "SN-1", attempt: 1)),
            RunEvent(.stepFinished(.init(device: "SN-1", step: "scan", attempt: 1, outcome: .succeeded, durationMs: 0.5))),
            RunEvent(.stepFinished(.init(device: "SN-1", step: "commit", attempt: 3, outcome: .failed, durationMs: 1200.25, error: failure))),
            RunEvent(.stepFinished(.init(device: "SN-1", step: "old", attempt: 0, outcome: .skippedByCondition, durationMs: 0))),
            RunEvent(.stepRetry(.init(device: "SN-1", step: "commit", attempt: 2, delayMs: 1000, error: failure))),
            RunEvent(.deviceFinished(.init(device: "SN-1", outcome: .succeeded, durationMs: 12.25, error: nil, adapter: "sim"))),
            RunEvent(.deviceFinished(.init(device: "SN-2", outcome: .failed, durationMs: 3, error: failure, adapter: "hci0"))),
            RunEvent(.deviceFinished(.init(device: "SN-3", outcome: .interrupted, durationMs: 4, error: failure, adapter: nil))),
            RunEvent(.stopRequested(message: "stop requested")),
            RunEvent(.adapterFailed(device: "SN-2", adapter: "hci0", message: "the controller is gone")),
            RunEvent(.journalRepaired(message: "cut")),
            RunEvent(.leaseLost(device: "SN-4", message: "cut: lease lost")),
            RunEvent(.storeUnavailable(message: "cannot claim")),
            RunEvent(.storeAvailable(message: "back")),
            RunEvent(.runFinished(message: "3 device(s): 1 succeeded, 1 failed, 1 interrupted", total: 3)),
        ]
        for i in events.indices { events[i].at = wallTime(String(format: "2026-11-30T05:00:%02d.%03dZ", i, i * 7)) }
        return events
    }

    static func check(_ name: String, _ bytes: [UInt8]) throws {
        let path = directory + "/" + name
        if ProcessInfo.processInfo.environment["PROVISION_WRITE_GOLDEN"] == "1" {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return
        }
        let golden = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(String(decoding: bytes, as: UTF8.self) == String(decoding: golden, as: UTF8.self), "\(name) changed")
    }

    @Test func theReportIsTheGoldenBytes() throws {
        let path = NSTemporaryDirectory() + "golden-report-\(UInt32.random(in: 0...UInt32.max)).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Self.report().write(to: path)
        try Self.check("report.json", [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))))
        #expect(try RunReport.read(from: path) == Self.report())
    }

    /// The report and JUnit a run writes: each device's record kept on disk as it ends (here in the
    /// reverse order), the plan's records (the carried-over one) added at the end.
    @Test func theStreamedReportAndJUnitAreTheGoldenBytes() async throws {
        let dir = NSTemporaryDirectory() + "golden-stream-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let report = Self.report()
        let stream = try ReportStream(reportPath: dir + "/report.json", junitPath: dir + "/junit.xml", run: report.run)
        // Half of them from their compact JSON (as a run gives them, from their journal lines).
        for (k, r) in report.devices.reversed().enumerated() where r.carriedOver != true {
            stream.add(r, compact: k % 2 == 0 ? RecordEncoder.compact(r)[...] : nil)
        }
        let items: [ReportStream.Item] = report.devices.map { $0.carriedOver == true ? .record($0) : .ran($0.id) }
        let finished = await stream.finish(items, info: report.run, wall: .milliseconds(5123))
        #expect(finished.error == nil)
        #expect(finished.summary == report.summary)
        #expect(finished.notSucceeded == report.devices.filter { $0.outcome != .succeeded }.map(DeviceBrief.init))
        try Self.check("report.json", [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/report.json"))))
        try Self.check("junit.xml", [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/junit.xml"))))
        let names = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        #expect(names == ["junit.xml", "report.json"], "nothing left behind")
    }

    @Test func journalLinesAreTheGoldenBytes() throws {
        var bytes: [UInt8] = []
        for line in Self.lines() { bytes += RecordEncoder.compact(line) + [0x0A] }
        try Self.check("journal.jsonl", bytes)
        let back = try JournalFile.parse(Data(bytes), path: "golden")
        #expect(back.lines == Self.lines())
    }

    @Test func eventsAreTheGoldenBytes() throws {
        var bytes: [UInt8] = []
        for e in Self.events() { bytes += [UInt8](e.jsonLine()) + [0x0A] }
        try Self.check("events.jsonl", bytes)
        for (e, line) in zip(Self.events(), bytes.split(separator: 0x0A)) {
            #expect(try EngineJSON.decoder().decode(RunEvent.self, from: Data(line)) == e)
        }
    }

    @Test func junitIsTheGoldenBytes() throws {
        try Self.check("junit.xml", Array(Self.report().junitXML().utf8))
    }
}
