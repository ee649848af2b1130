import Foundation
import Testing
@testable import Engine
import EngineTestSupport
import TestSupport
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
                                adapter: "sim0", rssi: -61, started: wallTime("2026-11-30T05:00:00.123Z"), durationMs: 12.5,
                                captured: ["fw": "2.1.0", "serial": "SN-0001", "B": "x", "_x": "y", "camelKey": .string(awkward), "é": "z",
                                           "battery": 19, "temperature": 36.4, "offset": -3, "tiny": 1e-8, "big": .integer(.max),
                                           "locked": true, "peak": "Infinity", "key": "***"],
                                measurements: measurements(), steps: steps(), error: failure("verify fw"), resumed: true, carriedOver: false, attRoundTrips: 19,
                                skipReason: nil,
                                security: SecurityRecord(level: .authenticated, method: .passkeyEntry, bond: .made, keySize: 16,
                                                         secureConnections: true, bondLost: true))
        let bare = DeviceRecord(id: awkward, address: nil, name: nil, outcome: .skipped, skipReason: "not started: \(awkward)")
        let negative = DeviceRecord(id: "n", address: nil, name: "", outcome: .succeeded, attempts: 1, rssi: -100, durationMs: -0.0,
                                    captured: [:], steps: [], carriedOver: true, attRoundTrips: 0,
                                    security: SecurityRecord(level: .none))
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
                      options: ["concurrency": "256", "no-fsync": "true", "limit": awkward], started: wallTime("2026-11-30T05:00:00.000Z"),
                      toolVersion: "0.9.0", resumed: false)
    }

    static func lines() -> [JournalLine] {
        var out: [JournalLine] = [
            .header(header(), at: wallTime("2026-11-30T05:00:00.000Z")),
            .started(device: "SN-0001", attempt: 1, at: wallTime("2026-11-30T05:00:00.000Z")),
            .intent(device: awkward, step: "commit", stepIndex: 12, at: wallTime("2026-11-30T05:00:00.000Z")),
            .end(stopped: StopInfo(reason: .interrupted, message: awkward, at: wallTime("2026-11-30T05:00:00.000Z")), at: wallTime("2026-11-30T05:00:00.000Z")),
            .end(stopped: nil, at: wallTime("2026-11-30T05:00:00.000Z")),
        ]
        for r in records() { out.append(.outcome(r, at: wallTime("2026-11-30T05:00:00.000Z"))) }
        var resumedHeader = header()
        resumedHeader.resumed = true
        resumedHeader.options = [:]
        resumedHeader.adapters = []
        resumedHeader.selected = ["SN-0001", awkward]
        out.append(.header(resumedHeader, at: wallTime("2026-11-30T05:00:00.000Z")))
        return out
    }

    static func reports() -> [RunReport] {
        let info = RunInfo(id: "run-1", workflow: FileRef(name: "sensor-v2", path: "w.yaml", sha256: "ab"),
                           inventory: FileRef(path: "i.yaml", sha256: "cd"),
                           adapters: [AdapterInfo(id: "sim0", simulated: true, slots: 256, failure: nil, peakLinks: 200),
                                      AdapterInfo(id: "hci0", simulated: false, slots: 8, failure: awkward, peakLinks: nil)],
                           simulated: true, station: "line-3", toolVersion: "dev", options: ["c": "256"],
                           started: wallTime("2026-11-30T05:00:00.000Z"), finished: wallTime("2026-11-30T05:00:05.000Z"), journal: "/tmp/j.journal",
                           resumed: false, stopped: StopInfo(reason: .failureThreshold, message: "m", at: wallTime("2026-11-30T05:00:00.000Z")), peakConcurrency: 256,
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

    /// A record is encoded once, for its journal line; the report's pretty form is re-indented from it.
    @Test func aRecordReIndentedFromItsJournalLineIsThePrettyRecord() throws {
        let records = Self.records() + RecordGoldenTests.records() + Self.reports().flatMap(\.devices)
        for r in records {
            let line = RecordEncoder.compact(JournalLine.outcome(r, at: wallTime("2026-11-30T05:00:00.123Z")))
            let json = try #require(JournalLine.record(inOutcome: line))
            #expect(Array(json) == RecordEncoder.compact(r))
            for depth in [0, 1, 2, 5] {
                #expect(String(decoding: RecordEncoder.prettify(json, depth: depth), as: UTF8.self)
                        == String(decoding: RecordEncoder.element(r, pretty: true, depth: depth), as: UTF8.self), "\(r.id) at \(depth)")
            }
        }
        // Whole documents, empty containers and strings full of brackets, commas and colons included.
        for report in Self.reports() {
            #expect(RecordEncoder.prettify(RecordEncoder.compact(report)[...], depth: 0) == RecordEncoder.pretty(report))
        }
        let tricky = ["{\"a\":[],\"b\":{},\"c\":\"[{,:}]\\\"x\\\\\",\"d\":[1,[2,{}]]}"]
        for t in tricky {
            let value = try JSONSerialization.jsonObject(with: Data(t.utf8))
            let pretty = try JSONSerialization.data(withJSONObject: value, options: [.prettyPrinted, .sortedKeys])
            #expect(try JSONSerialization.jsonObject(with: Data(RecordEncoder.prettify(Array(t.utf8)[...], depth: 0))) as? NSDictionary
                    == (try JSONSerialization.jsonObject(with: pretty)) as? NSDictionary)
        }
        // Not an outcome line: nothing is taken from it.
        #expect(JournalLine.record(inOutcome: RecordEncoder.compact(JournalLine.started(device: "d", attempt: 1, at: wallTime("2026-11-30T05:00:00.000Z")))) == nil)
        #expect(JournalLine.record(inOutcome: []) == nil)
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
            RunEvent(.runStarted(workflow: "w", total: 3)),
            RunEvent(.stepRetry(.init(device: "SN-1", step: "commit", attempt: 2, delayMs: 1000,
                                      error: FailureRecord(kind: .timeout, step: "commit", message: RecordEncoderTests.awkward)))),
            RunEvent(.deviceFinished(.init(device: "SN-1", outcome: .succeeded, durationMs: 12.25, error: nil, adapter: "sim"))),
            RunEvent(.journalRepaired(message: "cut")),
            RunEvent(.stepProgress(.init(device: "SN-1", step: "image", attempt: 1, bytes: 4096, bytesTotal: 65536, kibPerSecond: 12.5))),
        ]
        for e in events {
            #expect(String(decoding: RecordEncoder.compact(e), as: UTF8.self) == String(decoding: try EngineJSON.encoder(pretty: false).encode(e), as: UTF8.self))
        }
    }

    @Test func numbersAreWrittenAsJSONEncoderWritesThemIntegersAtTheirLimitsAndMillisecondsEitherSideOfTheFastPath() throws {
        var values: [Double] = [0, -0.0, 1, -1, 0.5, -0.5, 0.001, 0.045, 0.12, 12.345, 1234.567, 999_999_999.999, 1e9, 1e9 + 0.5,
                                0.0005, 1e-7, 0.1 + 0.2, 1.0 / 3.0, 123456789012.5, 1e15, 1e16, 1e20, -48003.965, .pi, .leastNonzeroMagnitude,
                                .greatestFiniteMagnitude, Double(Int64.max), 0.30000000000000004]
        // Milliseconds rounded to 3 places as the engine makes them, and their neighbours either side.
        var g = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let ms = (Double(Int64.random(in: -5_000_000_000...5_000_000_000, using: &g)) / 1000).rounded(toPlaces: 3)
            values += [ms, ms.nextUp, ms.nextDown, ms * 1000, Double.random(in: -1e6...1e6, using: &g)]
        }
        let encoder = EngineJSON.encoder(pretty: false)
        func same<T: Encodable>(_ v: T) throws {
            #expect(String(decoding: RecordEncoder.compact(v), as: UTF8.self) == String(decoding: try encoder.encode(v), as: UTF8.self),
                    "\(v)")
        }
        for i in [0, 1, -1, 9, 10, -10, 99, 100, 12345, Int.max, Int.min, Int.max - 1, Int.min + 1] { try same(i) }
        try same(UInt64.max)
        try same(UInt.max - 7)
        try same(Int8.min)
        try same(UInt8.max)
        try same(Int16.min)
        try same(UInt32.max)
        for _ in 0..<100 { try same(Int.random(in: .min ... .max, using: &g)) }
        for v in values {
            #expect(String(decoding: RecordEncoder.compact(v), as: UTF8.self) == String(decoding: try encoder.encode(v), as: UTF8.self),
                    "\(v)")
        }
    }
}
