import Engine
import EngineTestSupport
import Foundation
import Testing

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
        #expect(rows[0] == "id,address,name,outcome,error_kind,error_step,error_message,adapter,rssi,duration_ms,attempts,run_id,started,station,fw,serial,state")
        #expect(rows[2].hasPrefix("SN-0002,C0:5E:00:00:00:02,SNS-0002,failed,verify_failed,firmware is supported,"))
        #expect(rows[2].contains(",1.9.0,SN-0002,"))
        // A message with a quote is quoted, its quotes doubled.
        #expect(rows[2].contains(",\"firmware is supported \"\"1.9.0\"\" does not match /^2\\./\","))
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
        #expect(r.err == "error: bad.json: not JSON (expected a member name in quotes, found `n` at line 1, column 3)\n")
    }
}

/// What `provision report` does with reports that are missing, broken, or hostile.
@Suite struct ReportCommandHostileInputTests {
    /// A report with the given devices, written to `dir/name`.
    static func write(_ devices: [DeviceRecord], to dir: String, name: String = "r.json") throws {
        let file = FileRef(name: "w", path: "w.yaml", sha256: String(repeating: "0", count: 64))
        let info = RunInfo(id: "run-1", workflow: file, inventory: FileRef(path: "i.yaml", sha256: String(repeating: "1", count: 64)),
                           adapters: [AdapterInfo(id: "sim", simulated: true, slots: 1)], simulated: true, station: "st",
                           toolVersion: "t", options: [:], started: wallTime("2026-01-01T00:00:00Z"), finished: wallTime("2026-01-01T00:00:01Z"))
        try RunReport(run: info, summary: Summary.compute(devices, wall: .seconds(1)), devices: devices).write(to: dir + "/" + name)
    }

    @Test func csvCellsThatBeginLikeFormulasAreNeutralised() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let hostile = ["=HYPERLINK(\"http://x\",\"y\")", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx", "＝1+1"]
        var devices: [DeviceRecord] = []
        for (i, value) in hostile.enumerated() {
            var d = DeviceRecord(id: "SN-\(i)", address: nil, name: value, outcome: .failed, attempts: 1, rssi: -73,
                                 captured: ["fw": .string(value)],
                                 error: FailureRecord(kind: .verifyFailed, step: "check", message: value))
            d.durationMs = 12.5
            devices.append(d)
        }
        try Self.write(devices, to: line.directory)
        let r = await run(["report", "r.json", "--csv"], in: line.directory)
        #expect(r.code == 0)
        let rows = r.out.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        // Split the quoted cells back (RFC 4180) and look at every cell of every row.
        for (i, value) in hostile.enumerated() {
            let row = try #require(rows.first { $0.hasPrefix("SN-\(i),") }, "\(value.debugDescription)")
            let cells = Self.cells(row)
            #expect(cells[2] == "'" + value, "name \(value.debugDescription)")
            #expect(cells[6] == "'" + value, "error message \(value.debugDescription)")
            #expect(cells.last == "'" + value, "captured \(value.debugDescription)")
            // Numbers stay numbers.
            #expect(cells[8] == "-73")
            for cell in cells { #expect(!(cell.first.map { "=+-@\t\r".contains($0) } ?? false) || cell == "-73", "\(cell.debugDescription)") }
        }
    }

    /// RFC 4180 cells of one row.
    static func cells(_ row: String) -> [String] {
        var out: [String] = []
        var cell = ""
        var quoted = false
        var chars = Array(row)[...]
        while let c = chars.popFirst() {
            if quoted {
                if c == "\"" {
                    if chars.first == "\"" { cell.append("\""); chars.removeFirst() } else { quoted = false }
                } else { cell.append(c) }
            } else if c == "\"" { quoted = true } else if c == "," { out.append(cell); cell = "" } else { cell.append(c) }
        }
        out.append(cell)
        return out
    }

    @Test func aMissingOrWrongFileGetsAPlainMessage() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let dir = line.directory
        try Data("{ \"run\": 1,\n  oops".utf8).write(to: URL(fileURLWithPath: dir + "/broken.json"))
        try Data("{ \"hello\": 1 }".utf8).write(to: URL(fileURLWithPath: dir + "/other.json"))
        try Data("{ \"schema\": \"provision.report/9\" }".utf8).write(to: URL(fileURLWithPath: dir + "/future.json"))
        try Data().write(to: URL(fileURLWithPath: dir + "/empty.json"))
        try Self.write([DeviceRecord(id: "SN-1", address: nil, name: nil, outcome: .succeeded)], to: dir, name: "good.json")
        var json = try String(contentsOfFile: dir + "/good.json", encoding: .utf8)
        json = json.replacingOccurrences(of: "\"outcome\" : \"succeeded\"", with: "\"outcome\" : \"exploded\"")
        try Data(json.utf8).write(to: URL(fileURLWithPath: dir + "/odd.json"))
        let cases: [(String, String)] = [
            ("missing.json", "error: missing.json: no such file\n"),
            ("blobs", "error: blobs: is a directory, not a report\n"),
            ("broken.json", "error: broken.json: not JSON (expected a member name in quotes, found `o` at line 2, column 3)\n"),
            ("empty.json", "error: empty.json: the file is empty, not a report\n"),
            ("other.json", "error: other.json: not a provision report (it has no `schema`)\n"),
            ("future.json", "error: future.json: schema `provision.report/9` is not one this version of provision reads (provision.report/1, provision.report/2)\n"),
            ("odd.json", "error: odd.json: not a valid provision.report/2 report: line 9, column 19: `devices[0].outcome`: \"exploded\" is not a value this version of provision knows\n"),
        ]
        for (file, message) in cases {
            let r = await run(["report", file], in: dir)
            #expect(r.code == 2, "\(file)")
            #expect(r.err == message, "\(file)")
            #expect(r.out == "")
        }
        #expect(await run(["report", "good.json", "--compare", "missing.json"], in: dir).err == "error: missing.json: no such file\n")
    }

    @Test func controlCharactersFromAReportAreShownEscaped() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let evil = "1.0\u{1B}[2J\u{07}\n\u{202E}"
        try Self.write([DeviceRecord(id: "SN-1", address: nil, name: nil, outcome: .failed, captured: ["fw": .string(evil)],
                                     error: FailureRecord(kind: .verifyFailed, step: "check \u{1B}]0;x\u{07}", message: "\"\(evil)\" does not match"))],
                       to: line.directory)
        try Self.write([DeviceRecord(id: "SN-1", address: nil, name: nil, outcome: .succeeded, captured: ["fw": "2.0"])],
                       to: line.directory, name: "old.json")
        for args in [["report", "r.json"], ["report", "r.json", "--compare", "old.json"]] {
            let r = await run(args, in: line.directory)
            #expect(r.code == 0)
            #expect(!r.out.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{07}" || $0 == "\u{202E}" }, "\(args)")
            #expect(r.out.contains("1.0\\u{1B}[2J\\u{7}\\u{A}\\u{202E}"), "\(args): \(r.out)")
        }
    }
}
