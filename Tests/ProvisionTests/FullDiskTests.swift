import Engine
import EngineTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A disk that fills mid-run, for real: `provision run` in a child process whose file size limit
/// (RLIMIT_FSIZE, with SIGXFSZ ignored so that write(2) fails with EFBIG) stops the journal mid-line.
@Suite(.serialized, .timeLimit(.minutes(3))) struct FullDiskTests {
    /// Runs `provision ARGS` under `ulimit -f BLOCKS` (512-byte blocks) with SIGXFSZ ignored; returns the
    /// exit status and standard error.
    static func runLimited(_ args: [String], blocks: Int?, in dir: String) async throws -> (status: Int32, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        let limit = blocks.map { "ulimit -f \($0); " } ?? ""
        process.arguments = ["-c", "\(limit)trap '' XFSZ; exec \"$0\" \"$@\" >out.txt 2>err.txt", ChildProcess.binary] + args
        process.currentDirectoryURL = URL(fileURLWithPath: dir)
        var env = ProcessInfo.processInfo.environment
        env["NO_COLOR"] = "1"
        process.environment = env
        let (exited, continuation) = AsyncStream.makeStream(of: Int32.self)
        process.terminationHandler = { p in
            continuation.yield(p.terminationStatus)
            continuation.finish()
        }
        try process.run()
        var status: Int32 = -1
        for await s in exited { status = s }
        let err = (try? String(contentsOfFile: dir + "/err.txt", encoding: .utf8)) ?? ""
        return (status, err)
    }

    @Test func aFullDiskStopsTheRunWithExit3AndTheJournalResumesTwice() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let count = 40
        let paths = try line.write(count: count)
        // Small blobs: the simulator's state file (which records blob bytes) stays well below the journal,
        // so the journal is the file that meets the limit.
        for b in 0..<3 { try Data(repeating: UInt8(b + 1), count: 16).write(to: URL(fileURLWithPath: line.directory + "/blobs/cert-\(b).bin")) }
        let common = ["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet", "--sim-latency", "0.05",
                      "--sim-state", "sim.state", "--report", "run.json", "--concurrency", "4"]
        // 64 KiB: the journal's header and about twenty devices; the simulator's state file stays below it.
        let first = try await Self.runLimited(common + ["--journal", "run.journal"], blocks: 128, in: line.directory)
        #expect(first.status == 3, "exit 3 (environment), not \(first.status): \(first.stderr)")
        #expect(first.stderr.contains("could not be written"), "\(first.stderr)")
        #expect(first.stderr.contains("File too large"), "\(first.stderr)")
        // Output paths are resolved against the working directory, so the journal is named in full.
        #expect(first.stderr.contains("resume with --resume \(line.directory)/run.journal"), "\(first.stderr)")
        let journalSize = (try FileManager.default.attributesOfItem(atPath: line.directory + "/run.journal")[.size] as? Int) ?? 0
        #expect(journalSize <= 128 * 512 && journalSize > 10_000, "the journal stopped at the limit (\(journalSize) bytes)")
        // The report, when it fits under the limit, says why the run stopped; otherwise stderr says it could not be written.
        print("full disk: report written: \(FileManager.default.fileExists(atPath: line.directory + "/run.json")), journal \(journalSize) bytes, stderr: \(first.stderr)")
        if FileManager.default.fileExists(atPath: line.directory + "/run.json") {
            #expect(try RunReport.read(from: line.directory + "/run.json").run.stopped?.reason == .journalFailed)
        } else {
            #expect(first.stderr.contains("the report could not be written either"), "\(first.stderr)")
        }
        let before = try JournalState.read(path: line.directory + "/run.journal")
        #expect(before.outcomes.count < count, "the run stopped early")
        // Every commit the devices received in that run had its intent on disk first.
        let intents = Set(Self.jsonLines(line.directory + "/run.journal").filter { $0["type"] as? String == "intent" }.compactMap { $0["device"] as? String })
        let committed = Set(Self.jsonLines(line.directory + "/sim.state").filter {
            $0["event"] as? String == "control" && ($0["hex"] as? String)?.hasPrefix("02") == true && $0["busy"] as? Bool == false
        }.compactMap { $0["id"] as? String })
        #expect(!committed.isEmpty)
        #expect(committed.isSubset(of: intents), "committed without a durable intent: \(committed.subtracting(intents).sorted())")

        // Room again: resume, and resume again (the torn line was cut the first time).
        let resume = common.filter { $0 != "--sim-latency" && $0 != "0.05" } + ["--sim-latency", "0", "--resume", "run.journal"]
        let second = try await Self.runLimited(resume, blocks: nil, in: line.directory)
        #expect(second.status == 0 || second.status == 1, "\(second.stderr)")
        let third = try await Self.runLimited(resume + ["--sim-dump", "dump.json"], blocks: nil, in: line.directory)
        #expect(third.status == 0 || third.status == 1, "\(third.stderr)")

        let report = try RunReport.read(from: line.directory + "/run.json")
        #expect(report.devices.count == count)
        #expect(report.devices.allSatisfy { $0.outcome == .succeeded || $0.error?.kind == .needsReview }, "\(report.summary.errors)")
        let state = try JournalState.read(path: line.directory + "/run.journal")
        #expect(state.outcomes.count == count && !state.truncatedTail)
        // The device side: nothing committed twice, nothing committed without its intent on disk.
        let dump = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: line.directory + "/dump.json"))) as? [String: Any])
        let devices = try #require(dump["devices"] as? [[String: Any]])
        for d in devices {
            let id = d["id"] as? String ?? "?"
            let commits = d["commits"] as? Int ?? -1
            #expect(commits <= 1, "\(id) committed \(commits) times")
            if report.devices.first(where: { $0.id == id })?.outcome == .succeeded { #expect(commits == 1, "\(id)") }
        }
    }

    /// The JSON objects of a JSON-lines file (a torn last line is left out).
    static func jsonLines(_ path: String) -> [[String: Any]] {
        let data = FileManager.default.contents(atPath: path) ?? Data()
        return data.split(separator: 0x0A).compactMap { try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any] }
    }
}
