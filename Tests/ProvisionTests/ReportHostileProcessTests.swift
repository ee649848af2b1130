import Engine
import Foundation
import Testing
import EngineTestSupport
import TestSupport
import Workflow

/// Reports from outside are hostile input (issue 17, cases 4, 7, 8 and 10), checked against the binary
/// users run: numbers out of range are errors at their line and column (never SIGILL), device ids are
/// unique, histograms on integers are exact and bounded, enumerations have no order, one percentile
/// definition, and SIGTERM ends `report` with 130 like every other command.
@Suite(.serialized) struct ReportHostileProcessTests {
    /// A report of `devices`, captured values typed by `types`; `timedSummary: false` leaves the
    /// durations out of the summary (so that a hostile duration is only in its device).
    static func report(_ devices: [DeviceRecord], types: [String: ValueType] = [:], timedSummary: Bool = true) -> RunReport {
        let info = RunInfo(id: "run-hostile", workflow: FileRef(name: "audit", path: "workflows/audit.yaml", sha256: String(repeating: "a", count: 64)),
                           inventory: FileRef(path: "inventory/line.yaml", sha256: String(repeating: "b", count: 64)),
                           adapters: [AdapterInfo(id: "sim", simulated: true, slots: 8)], simulated: true, station: "st", toolVersion: "0.1.0",
                           options: [:], started: wallTime("2026-01-05T08:00:00.000Z"), finished: wallTime("2026-01-05T08:01:00.000Z"), captureTypes: types)
        let counted = timedSummary ? devices : devices.map { d in
            var untimed = d
            untimed.durationMs = nil
            return untimed
        }
        return RunReport(run: info, summary: Summary.compute(counted, wall: .seconds(60)), devices: devices)
    }

    static func device(_ i: Int, duration: Double = 100, captured: [String: JSONScalar] = [:]) -> DeviceRecord {
        DeviceRecord(id: String(format: "SN-%04d", i), address: nil, name: nil, outcome: .succeeded, attempts: 1,
                     started: wallTime("2026-01-05T08:00:00.000Z"), durationMs: duration, captured: captured)
    }

    /// Writes `report` as `name`, with `replacements` made in its text (the hostile part).
    static func write(_ report: RunReport, _ replacements: [(String, String)] = [], to dir: String, name: String = "r.json") throws {
        try report.write(to: dir + "/" + name)
        var text = try String(contentsOfFile: dir + "/" + name, encoding: .utf8)
        for (a, b) in replacements {
            #expect(text.contains(a), "the report holds \(a)")
            text = text.replacingOccurrences(of: a, with: b)
        }
        try Data(text.utf8).write(to: URL(fileURLWithPath: dir + "/" + name))
    }

    static func provision(_ args: String, in dir: String) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await ChildProcess.shell("\"$PROVISION\" \(args)", directory: dir)
    }

    /// Where a text is in a file: its line and column (1-based, columns in characters).
    static func position(of needle: String, in path: String) throws -> (Int, Int) {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        guard let r = text.range(of: needle) else { return (0, 0) }
        let before = text[..<r.lowerBound]
        let line = before.filter { $0 == "\n" }.count + 1
        let column = before.count - (before.lastIndex(of: "\n").map { before.distance(from: before.startIndex, to: $0) + 1 } ?? 0) + 1
        return (line, column)
    }

    @Test func aDurationOf1e300IsAnErrorAtItsPlaceNotATrap() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let dir = line.directory
        try Self.write(Self.report([Self.device(1), Self.device(2, duration: 4242.5)], timedSummary: false), [("4242.5", "1e300")], to: dir)
        let (l, c) = try Self.position(of: "1e300", in: dir + "/r.json")
        for args in ["report r.json", "report r.json --html r.html", "report r.json --group-by duration_ms", "report r.json --where 'duration_ms > 1'"] {
            let r = try await Self.provision(args, in: dir)
            #expect(r.status == 2, "\(args): \(r.stderr)")
            #expect(r.stderr == "error: r.json: not a valid provision.report/2 report: line \(l), column \(c): `devices[1].duration_ms`: "
                + "1e+300 ms is not a time a run can take (0 to 1000000000000 ms)\n", "\(args)")
            #expect(r.stdout.isEmpty, "\(args)")
        }
        #expect(!FileManager.default.fileExists(atPath: dir + "/r.html"))
        // The same value in the summary and in a step.
        try Self.write(Self.report([Self.device(1)]), [("\"wall_ms\" : 60000", "\"wall_ms\" : -1.7e308")], to: dir, name: "s.json")
        let s = try await Self.provision("report s.json", in: dir)
        #expect(s.status == 2 && s.stderr.contains("`summary.wall_ms`: -1.7e+308 ms is not a time"), "\(s.stderr)")
    }

    @Test func hugeRealsGroupIntoBoundedBinsAndHugeDurationsAreRefused() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let dir = line.directory
        let devices = [Self.device(1, captured: ["t": .real(1.25)]), Self.device(2, captured: ["t": .real(2.5)]),
                       Self.device(3, captured: ["t": .real(3.75)])]
        try Self.write(Self.report(devices, types: ["t": .real]), [("1.25", "-1.7e308"), ("3.75", "1.7e308")], to: dir)
        let r = try await Self.provision("report r.json --group-by t --json", in: dir)
        #expect(r.status == 0, "\(r.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
        let bins = try #require(doc.first?["histogram"] as? [[String: Any]])
        #expect(bins.count == 10)
        #expect(bins.compactMap { $0["count"] as? Int } == [1, 0, 0, 0, 0, 1, 0, 0, 0, 1])
        let html = try await Self.provision("report r.json --html r.html", in: dir)
        #expect(html.status == 0, "\(html.stderr)")
        // `--group-by duration_ms` on ±1.7e308: such a duration is refused on reading.
        try Self.write(Self.report([Self.device(1, duration: 1.5), Self.device(2, duration: 2.5)], timedSummary: false), [("1.5", "-1.7e308"), ("2.5", "1.7e308")],
                       to: dir, name: "d.json")
        let d = try await Self.provision("report d.json --group-by duration_ms", in: dir)
        #expect(d.status == 2 && d.stderr.contains("`devices[0].duration_ms`: -1.7e+308 ms is not a time a run can take"), "\(d.stderr)")
    }

    @Test func aUintCaptureBeyondInt64IsAnErrorNotNoValue() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let dir = line.directory
        let devices = [Self.device(1, captured: ["uptime": .integer(1)]), Self.device(2, captured: ["uptime": .integer(123_456_789)])]
        try Self.write(Self.report(devices, types: ["uptime": .integer(signed: false)]), [("123456789", "18446744073709551615")], to: dir)
        let (l, c) = try Self.position(of: "18446744073709551615", in: dir + "/r.json")
        for args in ["report r.json", "report r.json --group-by uptime", "report r.json --where 'uptime == null'", "report r.json --csv"] {
            let r = try await Self.provision(args, in: dir)
            #expect(r.status == 2, "\(args)")
            #expect(r.stderr == "error: r.json: not a valid provision.report/2 report: line \(l), column \(c): `devices[1].captured.uptime`: "
                + "18446744073709551615 is out of range for an integer (-9223372036854775808 to 9223372036854775807)\n", "\(args): \(r.stderr)")
        }
        // A negative value of a uint, and a text where a number is typed.
        try Self.write(Self.report(devices, types: ["uptime": .integer(signed: false)]), [("123456789", "-5")], to: dir, name: "n.json")
        let n = try await Self.provision("report n.json", in: dir)
        #expect(n.status == 2 && n.stderr.contains("`devices[1].captured.uptime`: -5 is negative, but the value is an unsigned integer (`run.capture_types` says uint)"),
                "\(n.stderr)")
    }

    @Test func aDeviceListedTwiceIsRefused() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let dir = line.directory
        try Self.write(Self.report([Self.device(1), Self.device(2), Self.device(3)]), [("SN-0003", "SN-0001")], to: dir)
        let r = try await Self.provision("report r.json --where 'outcome == succeeded'", in: dir)
        #expect(r.status == 2)
        #expect(r.stderr.contains("`devices[2].id`: device `SN-0001` is listed twice (also `devices[0]`): one device, one record"), "\(r.stderr)")
    }

    @Test func integersNearTwoToThe63AreHistogrammedExactlyAndPromptly() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let dir = line.directory
        // Uptimes in nanoseconds, close together near 2^63: stepping in Double never advanced.
        let base: Int64 = 9_223_372_036_854_775_000
        let devices = (0..<24).map { i in Self.device(i + 1, captured: ["uptime": .integer(base + Int64(i * 13))]) }
        try Self.write(Self.report(devices, types: ["uptime": .integer(signed: false)]), to: dir)
        let r = try await Self.provision("report r.json --group-by uptime --json", in: dir)
        #expect(r.status == 0, "\(r.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
        let g = try #require(doc.first)
        let bins = try #require(g["histogram"] as? [[String: Any]])
        #expect(bins.count == 10)
        #expect(bins.compactMap { $0["count"] as? Int }.reduce(0, +) == 24)
        // Exact bounds: parsed as text, not through Double.
        let text = r.stdout
        #expect(text.contains("\"from\":9223372036854775000"))
        #expect(text.contains("\"to\":9223372036854775299"))
        // Nearest rank: p50 of 24 values is the 12th.
        #expect(text.contains("\"p50\":\(base + 11 * 13)"))
        let html = try await Self.provision("report r.json --html r.html", in: dir)
        #expect(html.status == 0, "\(html.stderr)")
        let page = try String(contentsOfFile: dir + "/r.html", encoding: .utf8)
        #expect(page.components(separatedBy: "data-bin=").count - 1 == 10)
        #expect(page.contains("data-bin=\"9223372036854775000–9223372036854775029\""))
    }

    @Test func enumerationsHaveNoOrderAndNumbersBeyondADoubleAreRefused() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let dir = line.directory
        try Self.write(Self.report([Self.device(1, captured: ["battery": .integer(0)])], types: ["battery": .integer(signed: false)]), to: dir)
        for (expression, message) in [("outcome < succeeded", "`outcome` is one of succeeded, failed, skipped, interrupted: it has no order"),
                                      ("battery < 1e-400", "`1e-400` is too small for a number"),
                                      ("battery < 1e400", "`1e400` is too large for a number")] {
            let r = try await Self.provision("report r.json --where '\(expression)'", in: dir)
            #expect(r.status == 2, "\(expression)")
            #expect(r.stderr.contains(message), "\(expression): \(r.stderr)")
        }
    }

    @Test func percentilesAreNearestRankEverywhere() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let dir = line.directory
        let devices = (1...24).map { Self.device($0, duration: Double($0)) }
        try Self.write(Self.report(devices), to: dir)
        let g = try await Self.provision("report r.json --group-by duration_ms", in: dir)
        #expect(g.stdout.contains("min 1  p50 12  max 24"), "\(g.stdout)")
        let j = try await Self.provision("report r.json --where 'duration_ms > 0' --json", in: dir)
        let report = try RecordDecoderForTests.report(j.stdout)
        #expect(report.summary.durationMs?.p50 == 12)
        #expect(report.summary.durationMs?.p95 == 23)
        let html = try await Self.provision("report r.json --html r.html", in: dir)
        #expect(html.status == 0)
        #expect(try String(contentsOfFile: dir + "/r.html", encoding: .utf8).contains("device time p50 12.0 ms, p95 23.0 ms"))
    }

    /// SIGTERM while a report is being read: the reading stops and `report` exits 130 (it used to die of
    /// the signal, 143). The child is caught mid-pass: its output pipe is full and unread when the signal
    /// is sent, then drained.
    @Test func sigtermEndsReportWith130() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let dir = line.directory
        try Self.write(Self.report((1...20_000).map { Self.device($0) }), to: dir)
        let script = """
            mkfifo out
            "$PROVISION" report r.json --json > out 2> err &
            pid=$!
            exec 3< out
            head -c 4096 <&3 > /dev/null
            kill -TERM $pid
            cat <&3 > /dev/null
            wait $pid
            echo "status $?"
            cat err
            """
        let r = try await ChildProcess.shell(script, directory: dir)
        #expect(r.stdout.hasPrefix("status 130\n"), "\(r.stdout)")
        #expect(r.stdout.hasSuffix("interrupted\n"), "\(r.stdout)")
    }
}

/// Reads a report printed by `provision report --json` (keys in snake_case).
enum RecordDecoderForTests {
    static func report(_ text: String) throws -> RunReport {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try decoder.decode(RunReport.self, from: Data(text.utf8))
    }
}
