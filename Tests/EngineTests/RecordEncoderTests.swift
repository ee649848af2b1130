import Foundation
import Testing
@testable import Engine
import Workflow

/// The records' encoder (journal lines, the report) must produce what `JSONEncoder` (with the engine's
/// settings) produces from the same `Codable` definitions: the same bytes, and values that decode back equal.
@Suite struct RecordEncoderTests {
    static let awkward = "quote \" backslash \\ slash / tab \t newline \n cr \r bell \u{07} nul \u{00} us \u{1F} del \u{7F} é 💡 \u{2028} end"

    static func failure(_ step: String?) -> FailureRecord {
        FailureRecord(kind: .verifyFailed, step: step, message: "\"\(awkward)\" does not match", causes: ["first", awkward, ""])
    }

    static func steps() -> [StepRecord] {
        [
            StepRecord(name: "scan", kind: "scan", outcome: .succeeded, attempts: 1, startMs: 0, durationMs: 0.123),
            StepRecord(name: "read fw", kind: "read", outcome: .succeeded, attempts: 2, startMs: 1.5, durationMs: 1234.567),
            StepRecord(name: awkward, kind: "verify", outcome: .failed, attempts: 3, startMs: 48003.965, durationMs: 1e-7,
                       error: failure(awkward)),
            StepRecord(name: "later", kind: "disconnect", outcome: .skipped, attempts: 0, startMs: 123456789012.5, durationMs: 1e20),
            StepRecord(name: "old units only", kind: "write", outcome: .skippedByCondition, attempts: 0, startMs: 2, durationMs: 0,
                       skipReason: "when `firmware < 2.0.0` is false (firmware 2.4.1)"),
            StepRecord(name: "read battery", kind: "read", outcome: .failed, attempts: 1, startMs: 3, durationMs: 4, error: failure("read battery"),
                       optional: true),
            StepRecord(name: "read temp", kind: "read", outcome: .succeeded, attempts: 1, startMs: 5, durationMs: 6, continueOnError: true),
        ]
    }

    static func records() -> [DeviceRecord] {
        let full = DeviceRecord(id: "SN-0001", address: "C0:5E:00:00:00:01", name: "SNS-1", outcome: .failed, attempts: 2,
                                adapter: "sim0", rssi: -61, started: "2026-11-30T05:00:00.123Z", durationMs: 12.5,
                                captured: ["fw": "2.1.0", "serial": "SN-0001", "B": "x", "_x": "y", "camelKey": .string(awkward), "é": "z",
                                           "battery": 19, "temperature": 36.4, "offset": -3, "tiny": 1e-8, "big": .integer(.max),
                                           "locked": true, "peak": "Infinity", "key": "***"],
                                measurements: measurements(), steps: steps(), error: failure("verify fw"), resumed: true, carriedOver: false, attRoundTrips: 19,
                                skipReason: nil)
        let bare = DeviceRecord(id: awkward, address: nil, name: nil, outcome: .skipped, skipReason: "not started: \(awkward)")
        let negative = DeviceRecord(id: "n", address: nil, name: "", outcome: .succeeded, attempts: 1, rssi: -100, durationMs: -0.0,
                                    captured: [:], steps: [], carriedOver: true, attRoundTrips: 0)
        return [full, bare, negative]
    }

    static func measurements() -> [MeasurementRecord] {
        let v = try? SemanticVersion(parsing: "v2.4.1")
        return [
            MeasurementRecord(step: 7, result: MeasurementLimits(min: .integer(20, signed: false), max: .integer(100, signed: false))
                .check(.integer(19, signed: false), name: "battery level", unit: "%")),
            MeasurementRecord(step: 8, result: MeasurementLimits(versionAtLeast: try? SemanticVersion(parsing: "2.0"),
                                                                 versionBelow: try? SemanticVersion(parsing: "3.0.0"))
                .check(v.map { .version($0) }, name: "firmware")),
            MeasurementRecord(step: 9, result: MeasurementLimits(equals: .text(awkward), oneOf: [.text("a"), .text(awkward)], matches: "^q")
                .check(.text(awkward), name: awkward, unit: awkward)),
            MeasurementRecord(step: 10, result: MeasurementLimits(min: .real(-0.5)).check(nil, name: "t", unit: "°C")),
            MeasurementRecord(step: 11, result: MeasurementLimits(equals: .bytes([1, 2])).check(.bytes([1, 2]), name: "cfg"), redacted: true),
        ]
    }

    static func header() -> JournalHeader {
        JournalHeader(runId: "run-20261130T0500-abc", workflow: FileRef(name: "sensor-v2", path: "workflows/sensor-v2.yaml", sha256: "ab12"),
                      inventory: FileRef(path: "inventory/line 1.yaml", sha256: "cd34"), adapters: ["sim0", "hci0"],
                      options: ["concurrency": "256", "no-fsync": "true", "limit": awkward], started: "2026-11-30T05:00:00.000Z",
                      toolVersion: "0.9.0", resumed: false)
    }

    static func lines() -> [JournalLine] {
        var out: [JournalLine] = [
            .header(header(), at: "2026-11-30T05:00:00.000Z"),
            .started(device: "SN-0001", attempt: 1, at: "t"),
            .intent(device: awkward, step: "commit", stepIndex: 12, at: "t"),
            .end(stopped: StopInfo(reason: "interrupted", message: awkward, at: "t"), at: "t"),
            .end(stopped: nil, at: "t"),
        ]
        for r in records() { out.append(.outcome(r, at: "t")) }
        var resumedHeader = header()
        resumedHeader.resumed = true
        resumedHeader.options = [:]
        resumedHeader.adapters = []
        resumedHeader.selected = ["SN-0001", awkward]
        out.append(.header(resumedHeader, at: "t"))
        return out
    }

    static func reports() -> [RunReport] {
        let info = RunInfo(id: "run-1", workflow: FileRef(name: "sensor-v2", path: "w.yaml", sha256: "ab"),
                           inventory: FileRef(path: "i.yaml", sha256: "cd"),
                           adapters: [AdapterInfo(id: "sim0", simulated: true, slots: 256, failure: nil, peakLinks: 200),
                                      AdapterInfo(id: "hci0", simulated: false, slots: 8, failure: awkward, peakLinks: nil)],
                           simulated: true, station: "line-3", toolVersion: "dev", options: ["c": "256"],
                           started: "2026-11-30T05:00:00.000Z", finished: "2026-11-30T05:00:05.000Z", journal: "/tmp/j.journal",
                           resumed: false, stopped: StopInfo(reason: "failure_threshold", message: "m", at: "t"), peakConcurrency: 256,
                           captureTypes: ["battery": .integer(signed: false), "offset": .integer(signed: true), "temperature": .real,
                                          "fw": .version, "serial": .text, "cfg": .bytes, "locked": .boolean])
        let summary = Summary.compute(records(), wall: .milliseconds(5123))
        var bareInfo = info
        bareInfo.adapters = []
        bareInfo.options = [:]
        bareInfo.finished = nil
        bareInfo.journal = nil
        bareInfo.stopped = nil
        bareInfo.peakConcurrency = nil
        bareInfo.captureTypes = nil
        bareInfo.workflow.name = nil
        let empty = Summary.compute([], wall: .zero)
        return [RunReport(run: info, summary: summary, devices: records()), RunReport(run: bareInfo, summary: empty, devices: [])]
    }

    @Test func journalLinesAreTheBytesJSONEncoderWrites() throws {
        let encoder = EngineJSON.encoder(pretty: false)
        for line in Self.lines() {
            let ours = RecordEncoder.compact(line)
            let theirs = [UInt8](try encoder.encode(line))
            #expect(String(decoding: ours, as: UTF8.self) == String(decoding: theirs, as: UTF8.self))
            #expect(try EngineJSON.decoder().decode(JournalLine.self, from: Data(ours)) == line)
        }
    }

    @Test func deviceRecordsAreTheBytesJSONEncoderWrites() throws {
        for pretty in [false, true] {
            let encoder = EngineJSON.encoder(pretty: pretty)
            for r in Self.records() {
                let ours = pretty ? RecordEncoder.pretty(r) : RecordEncoder.compact(r)
                #expect(String(decoding: ours, as: UTF8.self) == String(decoding: try encoder.encode(r), as: UTF8.self))
                #expect(try EngineJSON.decoder().decode(DeviceRecord.self, from: Data(ours)) == r)
            }
        }
    }

    @Test func reportsAreTheBytesJSONEncoderWritesAndReadBack() throws {
        let dir = NSTemporaryDirectory() + "record-json-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for (i, report) in Self.reports().enumerated() {
            var theirs = try EngineJSON.encoder(pretty: true).encode(report)
            theirs.append(0x0A)
            let path = dir + "/report-\(i).json"
            try report.write(to: path)
            let ours = try Data(contentsOf: URL(fileURLWithPath: path))
            #expect(String(decoding: ours, as: UTF8.self) == String(decoding: theirs, as: UTF8.self))
            #expect(try RunReport.read(from: path) == report)
            // And as plain JSON objects (key sets and values), independent of formatting.
            let a = try JSONSerialization.jsonObject(with: ours) as? NSDictionary
            let b = try JSONSerialization.jsonObject(with: theirs) as? NSDictionary
            #expect(a != nil && a == b)
        }
    }

    @Test func stringsAreEscapedAsJSONRequires() throws {
        let bytes = RecordEncoder.compact(Self.awkward)
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.contains("\\\"") && text.contains("\\\\") && text.contains("\\t") && text.contains("\\n"))
        #expect(text.contains("\\u0007") && text.contains("\\u0000") && text.contains("\\u001f"))
        #expect(text.contains(" / "))  // slashes are not escaped
        let back = try JSONSerialization.jsonObject(with: Data(bytes), options: .fragmentsAllowed) as? String
        #expect(back == Self.awkward)
    }
}

/// The encoder's own rules: snake_case keys exactly as `JSONEncoder` converts them, streaming that
/// hands out the same bytes, events.
@Suite struct RecordEncoderRulesTests {
    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ s: String) { stringValue = s }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// A value with whatever key names a test wants.
    struct Keys: Encodable {
        var names: [String]
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Key.self)
            for (i, n) in names.enumerated() { try c.encode(i, forKey: Key(n)) }
        }
    }

    @Test func keysAreConvertedToSnakeCaseAsJSONEncoderDoes() throws {
        let names = ["id", "runId", "attRoundTripsPerDevice", "myURLKey", "URL", "aB", "ABCdef", "sha256", "a1B2", "_leading",
                     "trailing_", "__both__", "x", "already_snake", "HTTPServer2Go", "camelCASE", "é", "ÉtéHiver"]
        let encoder = EngineJSON.encoder(pretty: false)
        for n in names {
            let theirs = String(decoding: try encoder.encode(Keys(names: [n])), as: UTF8.self)
            #expect(String(decoding: RecordEncoder.compact(Keys(names: [n])), as: UTF8.self) == theirs, "key \(n)")
        }
        // And sorted after conversion, all at once.
        let all = Keys(names: names)
        #expect(String(decoding: RecordEncoder.compact(all), as: UTF8.self) == String(decoding: try encoder.encode(all), as: UTF8.self))
        for pretty in [true] {
            #expect(String(decoding: RecordEncoder.pretty(all), as: UTF8.self)
                    == String(decoding: try EngineJSON.encoder(pretty: pretty).encode(all), as: UTF8.self))
        }
    }

    @Test func aStreamedReportIsTheSameBytesInChunks() throws {
        for report in RecordEncoderTests.reports() {
            var chunks: [Data] = []
            try RecordEncoder.stream(report, pretty: true, chunk: 300) { chunks.append($0) }
            let streamed = chunks.reduce(Data(), +)
            #expect(String(decoding: streamed, as: UTF8.self) == String(decoding: RecordEncoder.pretty(report), as: UTF8.self))
            #expect(String(decoding: streamed, as: UTF8.self) == String(decoding: try EngineJSON.encoder(pretty: true).encode(report), as: UTF8.self))
            if !report.devices.isEmpty { #expect(chunks.count > 2, "handed out device by device") }
        }
    }

    @Test func aReportsKeysAreDeclaredInSortedOrderSoItCanBeStreamed() {
        let names = [RunReport.CodingKeys.devices, .run, .schema, .summary].map(\.stringValue)
        #expect(names == names.sorted())
    }

    @Test func eventsAreTheBytesJSONEncoderWrites() throws {
        let events = [
            RunEvent(.runStarted, message: "w", total: 3),
            RunEvent(.stepRetry, device: "SN-1", step: "commit", attempt: 2, delayMs: 1000,
                     error: FailureRecord(kind: .timeout, step: "commit", message: RecordEncoderTests.awkward)),
            RunEvent(.deviceFinished, device: "SN-1", outcome: "succeeded", durationMs: 12.25, adapter: "sim"),
            RunEvent(.journalRepaired, message: "cut"),
        ]
        for e in events {
            #expect(String(decoding: RecordEncoder.compact(e), as: UTF8.self) == String(decoding: try EngineJSON.encoder(pretty: false).encode(e), as: UTF8.self))
        }
    }
}
