import Engine
import Foundation
import Testing
import EngineTestSupport
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Stopping a run from the keyboard, as an operator does (issue 20, item 8): the summary says exactly how
/// to resume; "stopping:" is said once; a second Ctrl-C promises no grace period; a stop does not wait
/// out the scan of a unit nothing was sent to.
@Suite(.serialized, .timeLimit(.minutes(2))) struct InterruptProcessTests {
    static func interrupt(_ args: [String], in dir: String, _ signals: [Int32] = [SIGINT]) async throws -> (status: Int32, events: [String], stderr: String) {
        try await ChildProcess.interrupt(args, in: dir, signals)
    }

    static func lines(_ text: String, containing needle: String) -> [String] {
        text.split(separator: "\n").map(String.init).filter { $0.contains(needle) }
    }

    @Test func theSummaryOfAStoppedRunPrintsTheCommandThatResumesItAndThatCommandWorks() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 20)
        let r = try await Self.interrupt(["run", paths.workflow, "--inventory", "inventory.yaml", "--adapter", "sim", "--quiet",
                                          "--sim-latency", "0.5", "--concurrency", "2", "--report", "r.json", "--trace", "att.jsonl",
                                          "--events", "-"], in: line.directory)
        #expect(r.status == 130, "\(r.stderr)")
        let printed = try #require(Self.lines(r.stderr, containing: "resume: ").first, "\(r.stderr)")
        // The trace this run wrote is kept: the resumed run writes its own beside it.
        #expect(printed == "resume: provision run \(paths.workflow) --inventory inventory.yaml --adapter sim --quiet --sim-latency 0.5 "
                + "--concurrency 2 --report r.json --trace att-2.jsonl --events - --resume r.journal")
        let trace = try Data(contentsOf: URL(fileURLWithPath: line.directory + "/att.jsonl"))
        let command = String(printed.dropFirst("resume: provision".count))
        let resumed = try await ChildProcess.shell("\"$PROVISION\"\(command) >/dev/null", directory: line.directory)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let report = try RunReport.read(from: line.directory + "/r.json")
        #expect(report.devices.count == 20 && report.devices.allSatisfy { $0.outcome == .succeeded })
        #expect(report.run.resumed)
        #expect(try Data(contentsOf: URL(fileURLWithPath: line.directory + "/att.jsonl")) == trace)
        #expect(FileManager.default.fileExists(atPath: line.directory + "/att-2.jsonl"))
        #expect(!resumed.stderr.contains("resume: "), "a run that finished prints no resume command")
    }

    @Test func oneCtrlCSaysStoppingOnce() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 20)
        // With the progress display on (lines on stderr, no terminal).
        let r = try await Self.interrupt(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--sim-latency", "0.5",
                                          "--concurrency", "2", "--report", "r.json", "--events", "-"], in: line.directory)
        #expect(r.status == 130)
        #expect(Self.lines(r.stderr, containing: "stopping:").count == 1, "\(r.stderr)")
        #expect(Self.lines(r.stderr, containing: "stopping: no new devices; in-flight devices may finish for up to 30s").count == 1)
    }

    @Test func aSecondCtrlCPromisesNoGracePeriod() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 20)
        let r = try await Self.interrupt(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--sim-latency", "1",
                                          "--concurrency", "4", "--report", "r.json", "--events", "-"], in: line.directory, [SIGINT, SIGINT])
        #expect(r.status == 130)
        #expect(Self.lines(r.stderr, containing: "stopping:").count == 1, "\(r.stderr)")
        let afterSecond = try #require(r.stderr.range(of: "cutting in-flight devices"), "\(r.stderr)")
        #expect(!r.stderr[afterSecond.lowerBound...].contains("may finish"), "\(r.stderr)")
        #expect(Self.lines(r.stderr, containing: "stopped: stop requested twice: in-flight devices cut").count == 1, "\(r.stderr)")
        let report = try RunReport.read(from: line.directory + "/r.json")
        #expect(report.run.stopped?.message == "stop requested twice: in-flight devices cut")
    }

    @Test func aStopDoesNotWaitOutTheScanOfAUnitNothingWasSentTo() async throws {
        let line = try TestLine()
        defer { line.remove() }
        // SN-0001 never advertises, and its scan would last ten minutes; so would the grace period.
        let workflow = TestLine.workflow().replacingOccurrences(of: "timeout: 500ms, retry: { attempts: 1 }", with: "timeout: 10m, retry: { attempts: 1 }")
        #expect(workflow.contains("timeout: 10m"))
        let paths = try line.write(count: 4, workflow: workflow, faults: [1: "{ faults: { no_advertise: true } }"])
        let r = try await Self.interrupt(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--sim-latency", "0.5",
                                          "--concurrency", "4", "--stop-grace", "10m", "--report", "r.json", "--events", "-"], in: line.directory)
        // The suite's time limit is what fails if the stop waited for the scan.
        #expect(r.status == 130, "\(r.stderr)")
        let report = try RunReport.read(from: line.directory + "/r.json")
        let absent = try #require(report.devices.first { $0.id == "SN-0001" })
        #expect(absent.outcome == .skipped, "\(absent)")
        #expect(absent.skipReason?.contains("before anything was sent to it") == true, "\(absent.skipReason ?? "-")")
        #expect(report.devices.filter { $0.outcome == .interrupted }.isEmpty, "nothing connected was cut by one Ctrl-C")
        // On record: its start and its outcome; a resume runs it again.
        let journal = try JournalState.read(path: line.directory + "/r.journal")
        #expect(Set(journal.starts.keys) == Set(journal.outcomes.keys))
        #expect(journal.outcomes["SN-0001"]?.outcome == .skipped)
    }
}
