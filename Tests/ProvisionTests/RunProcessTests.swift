import Engine
import EngineTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `provision run` as a child process: exit codes, crash safety under SIGKILL, Ctrl-C once and twice.
@Suite(.serialized) struct RunProcessTests {
    static func run(_ args: [String], in dir: String) async throws -> (status: Int32, stdout: [String]) {
        let child = try ChildProcess(args, directory: dir)
        var out: [String] = []
        for await line in child.lines { out.append(line) }
        return (await child.wait(), out)
    }

    static func events(_ lines: [String]) -> [RunEvent] {
        let d = JSONDecoder()
        d.keyDecodingStrategy = .convertFromSnakeCase
        return lines.compactMap { try? d.decode(RunEvent.self, from: Data($0.utf8)) }
    }

    @Test func exitCodesSayWhatHappened() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let faults = [3: "{ firmware: \"1.0.0\" }"]
        let paths = try line.write(count: 4, faults: faults)
        let base = [paths.workflow, "--inventory", paths.inventory, "--quiet", "--sim-latency", "0"]
        // No adapter: refused, nothing touched.
        #expect(try await Self.run(["run"] + base, in: line.directory).status == 2)
        // A malformed adapter spec.
        #expect(try await Self.run(["run"] + base + ["--adapter", "hci:bogus"], in: line.directory).status == 2)
        #expect(!FileManager.default.fileExists(atPath: line.directory + "/reports"), "nothing was started")
        // Dry run: the plan, no journal.
        let dry = try await Self.run(["run"] + base + ["--adapter", "sim", "--dry-run", "--journal", "dry.journal"], in: line.directory)
        #expect(dry.status == 0)
        #expect(!FileManager.default.fileExists(atPath: line.directory + "/dry.journal"))
        // One device with old firmware: exit 1, and the report says why.
        let some = try await Self.run(["run"] + base + ["--adapter", "sim", "--report", "some.json"], in: line.directory)
        #expect(some.status == 1)
        let report = try RunReport.read(from: line.directory + "/some.json")
        #expect(report.devices[2].error?.kind == .verifyFailed)
        // Only the good ones: exit 0.
        let all = try await Self.run(["run"] + base + ["--adapter", "sim", "--report", "all.json", "--limit", "SN-0001,SN-0002"], in: line.directory)
        #expect(all.status == 0)
    }

    /// Kills the run with SIGKILL at random points (after a random number of events), resumes each
    /// time, and finally runs to the end: every device ends with exactly one success or a recorded
    /// failure, and the device side shows no device committed twice.
    @Test func aRunKilledAtRandomPointsLosesNothingAndCommitsNothingTwice() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let count = 16
        let paths = try line.write(count: count)
        let common = ["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet",
                      "--sim-latency", "0.3", "--sim-state", "sim.state", "--journal", "run.journal", "--report", "run.json",
                      "--concurrency", "4", "--events", "-"]
        var rng = SystemRandomNumberGenerator()
        var g = UInt64.random(in: 1...UInt64.max, using: &rng)
        var kills = 0
        for round in 0..<5 {
            let resume = FileManager.default.fileExists(atPath: line.directory + "/run.journal") ? ["--resume", "run.journal"] : []
            let child = try ChildProcess((round == 0 ? common : common.filter { $0 != "--journal" && $0 != "run.journal" } + resume), directory: line.directory)
            g = g &* 6364136223846793005 &+ 1442695040888963407
            let killAfter = 5 + Int(g >> 33) % 60
            var seen = 0
            var killed = false
            for await l in child.lines where l.hasPrefix("{") {
                seen += 1
                if seen == killAfter {
                    child.signal(SIGKILL)
                    killed = true
                }
            }
            let status = await child.wait()
            if killed && status != 0 && status != 1 { kills += 1 }
            if !killed { break }
        }
        #expect(kills >= 1, "the test should have killed at least one run")
        // Finish the run.
        let final = try await Self.run(common.filter { $0 != "--journal" && $0 != "run.journal" } + ["--resume", "run.journal", "--sim-dump", "dump.json"],
                                       in: line.directory)
        #expect(final.status == 0 || final.status == 1)
        let report = try RunReport.read(from: line.directory + "/run.json")
        #expect(report.devices.count == count)
        for d in report.devices {
            #expect(d.outcome == .succeeded || (d.outcome == .failed && d.error != nil), "\(d.id): \(d.outcome)")
            if d.outcome == .failed { #expect(d.error?.kind == .needsReview, "\(d.id) failed: \(d.error?.message ?? "")") }
        }
        // The journal holds exactly one final outcome per device.
        let state = try JournalState.read(path: line.directory + "/run.journal")
        #expect(state.outcomes.count == count)
        // The device side: nobody committed twice.
        let dump = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: line.directory + "/dump.json"))) as? [String: Any]
        let devices = try #require(dump?["devices"] as? [[String: Any]])
        #expect(devices.count == count)
        for d in devices {
            let commits = d["commits"] as? Int ?? -1
            #expect(commits <= 1, "\(d["id"] ?? "?") committed \(commits) times")
            let id = d["id"] as? String ?? ""
            if report.devices.first(where: { $0.id == id })?.outcome == .succeeded { #expect(commits == 1) }
        }
    }

    @Test func ctrlCOnceLetsInFlightDevicesFinish() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 30)
        let child = try ChildProcess(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet",
                                      "--sim-latency", "0.5", "--concurrency", "3", "--report", "r.json", "--events", "-"],
                                     directory: line.directory)
        var finished = 0
        var signalled = false
        for await l in child.lines where l.contains("\"device_finished\"") {
            finished += 1
            if finished == 3 && !signalled {
                child.signal(SIGINT)
                signalled = true
            }
        }
        #expect(await child.wait() == 130)
        let report = try RunReport.read(from: line.directory + "/r.json")
        #expect(report.run.stopped?.reason == .interrupted)
        #expect(report.summary.outcomes[.interrupted] == 0, "in-flight devices finish after one Ctrl-C")
        #expect((report.summary.outcomes[.skipped]) > 0)
        #expect(report.summary.outcomes[.succeeded] == 30 - (report.summary.outcomes[.skipped]))
    }

    @Test func ctrlCTwiceCutsInFlightDevicesAndMarksThemInterrupted() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 30)
        let child = try ChildProcess(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet",
                                      "--sim-latency", "1", "--concurrency", "4", "--report", "r.json", "--events", "-"],
                                     directory: line.directory)
        var signalled = 0
        for await l in child.lines {
            if signalled == 0 && l.contains("\"device_finished\"") {
                child.signal(SIGINT)
                signalled = 1
            } else if signalled == 1 && l.contains("\"stop_requested\"") {
                child.signal(SIGINT)
                signalled = 2
            }
        }
        #expect(await child.wait() == 130)
        let report = try RunReport.read(from: line.directory + "/r.json")
        #expect((report.summary.outcomes[.interrupted]) >= 1)
        #expect(report.devices.filter { $0.outcome == .interrupted }.allSatisfy { $0.error?.kind == .interrupted })
        // The journal is complete: every device that started has its outcome.
        let state = try JournalState.read(path: line.directory + "/r.journal")
        #expect(Set(state.starts.keys) == Set(state.outcomes.keys))
    }
}
