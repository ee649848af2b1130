import Engine
import Foundation
import Testing
import EngineTestSupport
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `provision run --resume` after a double Ctrl-C during a commit whose workflow declares a `confirm`
/// read: the devices are asked, not marked for review (docs/reliability.md, "In-doubt commits").
@Suite(.serialized) struct ResumeConfirmProcessTests {
    /// The test workflow with the commit retried after a long backoff when the device answers busy: a
    /// busy commit has its intent on disk and no outcome, and the run can be cut in that backoff.
    static func workflow() -> String {
        // Busy answers are retried often enough that a device reaches its commit and ends: at half the
        // answers busy, 10 attempts left a step of some device (of 8, over two runs) out of attempts now
        // and then (`begin blob` answered busy ten times), which is not what this test is about.
        let base = TestLine.workflow(retryAttempts: 40)
        let marker = "  - read: { id: state"
        return base.replacingOccurrences(of: marker, with: "    retry: { attempts: 10, backoff: [2s], on: [timeout, disconnected, busy] }\n" + marker)
    }

    @Test func aDoubleInterruptDuringACommitThenResumeEndsEveryDeviceByItsConfirmReadNeverInReview() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let count = 8
        // Every command is answered busy (and not executed) half the time: some commit is busy first.
        let faults = Dictionary(uniqueKeysWithValues: (1...count).map { ($0, "{ faults: { busy_ack: 0.5 } }") })
        let paths = try line.write(count: count, workflow: Self.workflow(), faults: faults)
        let common = ["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet", "--sim-latency", "0",
                      "--sim-state", "sim.state", "--concurrency", String(count), "--events", "-"]
        let child = try ChildProcess(common + ["--journal", "run.journal", "--report", "cut.json"], directory: line.directory)
        var signals = 0
        var inDoubt: String?
        for await l in child.lines {
            if signals == 0, l.contains("\"step_retry\""), l.contains("\"step\":\"commit\"") {
                // This device's commit went out (its intent is durable) and it waits to send it again: Ctrl-C.
                inDoubt = RunProcessTests.events([l]).first?.device
                child.signal(SIGINT)
                signals = 1
            } else if signals == 1, l.contains("\"stop_requested\"") {
                child.signal(SIGINT)
                signals = 2
            }
        }
        #expect(await child.wait() == 130)
        let device = try #require(inDoubt, "no commit was answered busy: the scenario did not happen")
        let cut = try JournalState.read(path: line.directory + "/run.journal")
        #expect(cut.pendingIntents[device] == "commit", "the interrupted run left \(device)'s commit in doubt")
        #expect(cut.outcomes[device]?.outcome == .interrupted)

        // Resume: every device in doubt is asked (the confirm read) before anything is sent.
        let resumed = try ChildProcess(common + ["--resume", "run.journal", "--report", "resumed.json", "--sim-dump", "dump.json"],
                                       directory: line.directory)
        for await _ in resumed.lines {}
        let status = await resumed.wait()
        #expect(status == 0 || status == 1)
        let report = try RunReport.read(from: line.directory + "/resumed.json")
        #expect(report.devices.count == count)
        for d in report.devices {
            #expect(d.outcome == .succeeded || d.outcome == .failed, "\(d.id): \(d.outcome)")
            #expect(d.error?.kind != .needsReview, "\(d.id) needs review: \(d.error?.message ?? "")")
        }
        let settled = try #require(report.devices.first { $0.id == device })
        #expect(settled.outcome == .succeeded, "\(settled.error.map { "\($0.kind) \($0.step ?? "") \($0.message)" } ?? "")")
        #expect(try JournalState.read(path: line.directory + "/run.journal").pendingIntents.isEmpty)
        // The device side: committed once each, whatever the cut.
        let dump = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: line.directory + "/dump.json"))) as? [String: Any]
        let devices = try #require(dump?["devices"] as? [[String: Any]])
        for d in devices {
            let id = d["id"] as? String ?? "?"
            let commits = d["commits"] as? Int ?? -1
            let succeeded = report.devices.first { $0.id == id }?.outcome == .succeeded
            #expect(succeeded ? commits == 1 : commits <= 1, "\(id) committed \(commits) times")
        }
        // `provision read` on the simulator sees the state the runs left (`--sim-state`); without it, a fresh device.
        let base = ["read", "--adapter", "sim", "--inventory", paths.inventory, device, "FFF0", "FFF2", "--as", "hex", "--timeout", "5s"]
        var state: [String] = []
        let kept = try ChildProcess(base + ["--sim-state", "sim.state"], directory: line.directory)
        for await l in kept.lines { state.append(l) }
        #expect(await kept.wait() == 0)
        #expect(state == ["02"], "the committed state of \(device)")
        var fresh: [String] = []
        let other = try ChildProcess(base, directory: line.directory)
        for await l in other.lines { fresh.append(l) }
        #expect(await other.wait() == 0)
        #expect(fresh != ["02"] && fresh.count == 1, "\(fresh)")
    }
}
