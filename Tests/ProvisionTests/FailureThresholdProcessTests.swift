import Engine
import Foundation
import Testing
import EngineTestSupport
import TestSupport

/// `--max-failures` and `--max-consecutive-failures` on the binary: product rejects do not stop the
/// line as "a fixture problem"; failures in a row do when asked.
@Suite(.serialized) struct FailureThresholdProcessTests {
    @Test func productRejectsAreNotAFixtureProblemAndFailuresInARowStopTheLine() async throws {
        let line = try TestLine()
        defer { line.remove() }
        var faults: [Int: String] = [:]
        for n in 1...3 { faults[n] = "{ firmware: \"1.0.0\" }" }
        faults[4] = "{ faults: { no_advertise: true } }"
        let paths = try line.write(count: 8, faults: faults)
        let base = ["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet", "--sim-latency", "0", "--concurrency", "1"]

        let kept = try await RunProcessTests.run(base + ["--max-failures", "2", "--report", "kept.json"], in: line.directory)
        #expect(kept.status == 1)
        let keptReport = try RunReport.read(from: line.directory + "/kept.json")
        #expect(keptReport.run.stopped == nil, "three old-firmware units and one not found: one fixture failure")
        #expect(keptReport.summary.outcomes[.failed] == 4 && keptReport.summary.outcomes[.succeeded] == 4)

        let stopped = try await RunProcessTests.run(base + ["--max-consecutive-failures", "3", "--report", "row.json"], in: line.directory)
        #expect(stopped.status == 1)
        let row = try RunReport.read(from: line.directory + "/row.json")
        #expect(row.run.stopped?.reason == .failureThreshold)
        #expect(row.run.stopped?.message == "line stopped: 3 devices failed in a row (--max-consecutive-failures 3); no fixture failure, product rejects 3")
        #expect(row.run.options["max_consecutive_failures"] == "3")
        #expect(row.summary.outcomes[.skipped] == 5)

        #expect(try await RunProcessTests.run(base + ["--max-consecutive-failures", "0"], in: line.directory).status == 2)
    }
}
