import Engine
import Foundation
import Testing
import EngineTestSupport
import TestSupport

/// Run metadata (operator, lot, work order) from the inventory's `meta:` and `--meta KEY=VALUE`, in
/// every report the binary writes or shows.
@Suite(.serialized) struct MetaProcessTests {
    @Test func theRunsMetadataIsInTheJSONTextHTMLAndJUnitReports() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 2)
        var inventory = try String(contentsOfFile: paths.inventory, encoding: .utf8)
        inventory = "meta: { lot: L-42, operator: ana }\n" + inventory
        try inventory.write(toFile: paths.inventory, atomically: true, encoding: .utf8)
        let base = ["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet", "--sim-latency", "0"]
        let ran = try await RunProcessTests.run(base + ["--meta", "operator=ben", "--meta", "work_order=WO 7", "--report", "r.json", "--junit", "r.xml"],
                                                in: line.directory)
        #expect(ran.status == 0)
        let report = try RunReport.read(from: line.directory + "/r.json")
        #expect(report.run.meta == ["lot": "L-42", "operator": "ben", "work_order": "WO 7"], "the command line wins over the inventory")
        let junit = try String(contentsOfFile: line.directory + "/r.xml", encoding: .utf8)
        #expect(junit.contains("<property name=\"meta.operator\" value=\"ben\"/>"), "\(junit.prefix(600))")
        let text = try await RunProcessTests.run(["report", "r.json", "--html", "r.html"], in: line.directory)
        #expect(text.stdout.contains("  meta      lot=L-42, operator=ben, work_order=WO 7"), "\(text.stdout)")
        let html = try String(contentsOfFile: line.directory + "/r.html", encoding: .utf8)
        #expect(html.contains("data-figure=\"run-meta\">lot=L-42, operator=ben, work_order=WO 7</p>"))

        let bad = try await RunProcessTests.run(base + ["--meta", "operator", "--report", "bad.json"], in: line.directory)
        #expect(bad.status == 2)
        #expect(!FileManager.default.fileExists(atPath: line.directory + "/bad.json"))
    }
}
