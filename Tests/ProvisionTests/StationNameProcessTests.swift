import Engine
import EngineTestSupport
import Foundation
import Testing
import TestSupport

/// `provision run --station NAME` on a station's own journal (no line): the name is the report's
/// `run.station` and every device record's `station`, reports group by it, and a name a line or a report
/// could not keep is refused before anything is touched. The defaults file can say it too.
@Suite(.serialized) struct StationNameProcessTests {
    @Test func aStationWithoutALineNamesItselfOnTheReportAndEveryRecord() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 3)
        let base = ["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet", "--sim-latency", "0"]
        let ran = try await RunProcessTests.run(base + ["--station", "bench-2", "--report", "r.json"], in: line.directory)
        #expect(ran.status == 0)
        let report = try RunReport.read(from: line.directory + "/r.json")
        #expect(report.run.station == "bench-2")
        #expect(report.devices.count == 3 && report.devices.allSatisfy { $0.station == "bench-2" },
                "\(report.devices.map { "\($0.id) \($0.station ?? "-")" })")
        let grouped = try await RunProcessTests.run(["report", "r.json", "--group-by", "station"], in: line.directory)
        #expect(grouped.status == 0)
        #expect(grouped.stdout.first == "station (text): 3 device(s), 3 with a value", "\(grouped.stdout)")
        #expect(grouped.stdout.contains { $0.hasPrefix("  bench-2 ") && $0.contains(" 3 ") }, "\(grouped.stdout)")
        let selected = try await RunProcessTests.run(["report", "r.json", "--where", "station == \"bench-2\"", "--csv"], in: line.directory)
        #expect(selected.status == 0 && selected.stdout.count == 4, "a header and the three devices: \(selected.stdout)")

        // A name no line or report could keep: refused before the journal, the report or any device.
        for name in ["a/b", "", String(repeating: "x", count: 101), "tab\there"] {
            let bad = try await ChildProcess.shell("\"$PROVISION\" run workflow.yaml --inventory inventory.yaml --adapter sim --station '\(name)' "
                                                   + "--report bad.json --events bad.jsonl --sim-state bad.state", directory: line.directory)
            #expect(bad.status == 2, "\(name.debugDescription): \(bad.stderr)")
            #expect(bad.stderr.contains("`--station` must be a name of 1 to 100 characters without `/` or control characters"), "\(bad.stderr)")
            for file in ["bad.json", "bad.journal", "bad.jsonl", "bad.state"] {
                #expect(!FileManager.default.fileExists(atPath: line.directory + "/" + file), "\(name.debugDescription): \(file)")
            }
        }
    }

    @Test func theDefaultsFileCanNameTheStationAndTheCommandLineWins() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 2)
        try "adapter: sim\nstation: bench-3\n".write(toFile: line.directory + "/.provision.yaml", atomically: true, encoding: .utf8)
        let base = ["run", paths.workflow, "--inventory", paths.inventory, "--quiet", "--sim-latency", "0"]
        #expect(try await RunProcessTests.run(base + ["--report", "file.json"], in: line.directory).status == 0)
        let fromFile = try RunReport.read(from: line.directory + "/file.json")
        #expect(fromFile.run.station == "bench-3" && fromFile.devices.allSatisfy { $0.station == "bench-3" })
        #expect(try await RunProcessTests.run(base + ["--station", "bench-2", "--report", "given.json"], in: line.directory).status == 0)
        let given = try RunReport.read(from: line.directory + "/given.json")
        #expect(given.run.station == "bench-2" && given.devices.allSatisfy { $0.station == "bench-2" }, "the command line wins")

        // A bad name in the file is refused at its position, even when `--station` is given.
        try "adapter: sim\nstation: line/2\n".write(toFile: line.directory + "/bad.yaml", atomically: true, encoding: .utf8)
        let bad = try await ChildProcess.shell("\"$PROVISION\" run workflow.yaml --inventory inventory.yaml --config bad.yaml --station bench-2 --report bad.json",
                                               directory: line.directory)
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("bad.yaml:2:10: error: `station` must be a name of 1 to 100 characters without `/` or control characters"),
                "\(bad.stderr)")
        #expect(!FileManager.default.fileExists(atPath: line.directory + "/bad.json"))
    }
}
