import Engine
import EngineTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A run survives what happens to its terminal and pipes: a reader that quits (`| head -1`), closed
/// standard streams, a hung-up session (SIGHUP). Each case finishes the run, writes the report and
/// exits with the usual status.
@Suite(.serialized) struct PipeAndSignalProcessTests {
    static let count = 6

    /// A line of `count` devices and the arguments of a run over it that lasts a little while.
    static func line() throws -> (TestLine, [String]) {
        let line = try TestLine()
        let paths = try line.write(count: count)
        return (line, ["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--sim-latency", "0.3",
                       "--concurrency", "2", "--report", "r.json"])
    }

    static func quoted(_ args: [String]) -> String {
        args.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
    }

    /// The report says every device succeeded and the journal holds one outcome for each.
    static func expectCompleteRun(in directory: String, _ comment: Comment) throws {
        let report = try RunReport.read(from: directory + "/r.json")
        #expect(report.devices.count == count, comment)
        #expect(report.devices.allSatisfy { $0.outcome == .succeeded }, comment)
        let journal = try JournalState.read(path: directory + "/r.journal")
        #expect(journal.outcomes.count == count, comment)
    }

    @Test func aReaderThatQuitsAfterTheFirstLineEndsThePrintingNotTheRun() async throws {
        let (line, args) = try Self.line()
        defer { line.remove() }
        let r = try await ChildProcess.shell("\"$PROVISION\" \(Self.quoted(args + ["--events", "-"])) | head -1; exit ${PIPESTATUS[0]}",
                                             directory: line.directory)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.split(separator: "\n").count == 1)
        #expect(r.stdout.contains("\"run_started\""))
        try Self.expectCompleteRun(in: line.directory, "stdout closed by `head -1`")
    }

    @Test func aStderrReaderThatQuitsEndsTheProgressNotTheRun() async throws {
        let (line, args) = try Self.line()
        defer { line.remove() }
        // Without a terminal, progress is a line per finished device on stderr; its reader quits at once.
        let r = try await ChildProcess.shell("\"$PROVISION\" \(Self.quoted(args)) 2> >(head -c 1 >/dev/null)", directory: line.directory)
        #expect(r.status == 0, "\(r.stderr)")
        try Self.expectCompleteRun(in: line.directory, "stderr closed")
    }

    @Test func closedStandardStreamsAreNotReusedAndDoNotStopTheRun() async throws {
        let (line, args) = try Self.line()
        defer { line.remove() }
        // Started with descriptors 1 and 2 closed: the journal must not become descriptor 1 and receive
        // what is printed, and the printing must not stop the run.
        let r = try await ChildProcess.shell("exec \"$PROVISION\" \(Self.quoted(args + ["--events", "-"])) >&- 2>&-", directory: line.directory)
        #expect(r.status == 0)
        try Self.expectCompleteRun(in: line.directory, "stdout and stderr closed")
        let journal = try String(contentsOfFile: line.directory + "/r.journal", encoding: .utf8)
        #expect(journal.split(separator: "\n").allSatisfy { $0.hasPrefix("{\"") && $0.hasSuffix("}") }, "only journal lines in the journal")
        #expect(!journal.contains("run_started"))
    }

    @Test func aHangupStopsLikeCtrlC() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 30)
        let child = try ChildProcess(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet",
                                      "--sim-latency", "0.5", "--concurrency", "3", "--report", "r.json", "--events", "-"],
                                     directory: line.directory)
        var signalled = false
        for await l in child.lines where l.contains("\"device_finished\"") && !signalled {
            child.signal(SIGHUP)
            signalled = true
        }
        #expect(await child.wait() == 130)
        let report = try RunReport.read(from: line.directory + "/r.json")
        #expect(report.run.stopped?.reason == .interrupted)
        #expect(report.summary.outcomes[.interrupted] == 0, "in-flight devices finish, as after one Ctrl-C")
        #expect((report.summary.outcomes[.skipped]) > 0)
        #expect(report.summary.outcomes[.succeeded] == 30 - (report.summary.outcomes[.skipped]))
        let journal = try JournalState.read(path: line.directory + "/r.journal")
        #expect(Set(journal.starts.keys) == Set(journal.outcomes.keys))
    }

    @Test func eventsOnStandardOutputLeaveEveryHumanLineOnStandardError() async throws {
        let (line, args) = try Self.line()
        defer { line.remove() }
        let child = try ChildProcess(args + ["--events", "-"], directory: line.directory)
        var stdout: [String] = []
        for await l in child.lines { stdout.append(l) }
        let stderr = await child.stderr()
        #expect(await child.wait() == 0)
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        for l in stdout { #expect((try? decoder.decode(RunEvent.self, from: Data(l.utf8))) != nil, "not an event: \(l)") }
        #expect(stdout.last?.contains("\"run_finished\"") == true)
        #expect(stderr.contains("\(Self.count) device(s): \(Self.count) succeeded"))
        #expect(stderr.contains("report: r.json"))
    }

    @Test func retryFailedWithoutResumeIsAUsageError() async throws {
        let (line, args) = try Self.line()
        defer { line.remove() }
        let child = try ChildProcess(args + ["--retry-failed"], directory: line.directory)
        let stderr = await child.stderr()
        #expect(await child.wait() == 2)
        #expect(stderr.contains("`--retry-failed` needs `--resume JOURNAL`"))
        #expect(!FileManager.default.fileExists(atPath: line.directory + "/r.journal"), "nothing was started")
    }
}
