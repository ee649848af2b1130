import Engine
import EngineTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The fault storm: a simulated line with every simulator fault kind at once, `provision run` killed
/// with SIGKILL at random moments and resumed after each kill, then run to the end. Every device must end
/// with exactly one outcome, and no device may be committed twice.
///
/// The suite runs a small storm (200 devices, 5 kills). The full one of docs/reliability.md:
///
///     PROVISION_STORM_DEVICES=2000 PROVISION_STORM_KILLS=20 swift test --filter FaultStormTests
///
/// (`PROVISION_STORM_SEED` picks the kill points and the fault mix; each run prints its figures.)
@Suite(.serialized, .timeLimit(.minutes(20))) struct FaultStormTests {
    struct Storm {
        var devices: Int
        var kills: Int
        var seed: UInt64
        var concurrency = 32
        var latency = "0.2"

        static func fromEnvironment() -> Storm {
            let env = ProcessInfo.processInfo.environment
            return Storm(devices: env["PROVISION_STORM_DEVICES"].flatMap(Int.init) ?? 200,
                         kills: env["PROVISION_STORM_KILLS"].flatMap(Int.init) ?? 5,
                         seed: env["PROVISION_STORM_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64.max))
        }
    }

    /// A small deterministic generator for the fault mix and the kill points.
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return state >> 11
        }
        mutating func unit() -> Double { Double(next() % 1_000_000) / 1_000_000 }
        mutating func int(_ range: ClosedRange<Int>) -> Int { range.lowerBound + Int(next() % UInt64(range.count)) }
    }

    /// Every fault kind of the simulator, mixed per device: probabilistic faults on every device, the
    /// quirks and old firmware on some.
    static func faults(count: Int, random: inout Random) -> [Int: String] {
        var out: [Int: String] = [:]
        for n in 1...count {
            var f = ["connect_fail: 0.1", "connect_timeout: 0.02", "drop: 0.004", "ack_loss: 0.15", "busy_ack: 0.05"]
            var extra: [String] = []
            let r = random.unit()
            switch r {
            case ..<0.01: f.append("no_advertise: true")
            case ..<0.03: f.append("notify_undeclared: true")
            case ..<0.05: f.append("full_discovery_only: true")
            case ..<0.10: f.append("mtu_cap: 23")
            case ..<0.15: f.append("slow: 3")
            case ..<0.17: extra.append("firmware: \"1.9.0\"")
            default: break
            }
            out[n] = "{ " + (extra + ["faults: { " + f.joined(separator: ", ") + " }"]).joined(separator: ", ") + " }"
        }
        return out
    }

    struct Figures: CustomStringConvertible {
        var devices = 0
        var kills = 0
        var runs = 0
        var wall: Duration = .zero
        var succeeded = 0
        var failed = 0
        var needsReview = 0
        var errors: [String: Int] = [:]
        var faultsInjected: [String: Int] = [:]
        var maxCommits = 0
        /// One failure message per kind, to read what happened.
        var examples: [String: String] = [:]

        var description: String {
            "fault storm: \(devices) devices, \(kills) SIGKILLs, \(runs) runs in \(wall): \(succeeded) succeeded, \(failed) failed "
                + "(\(needsReview) needs_review); failures by kind \(errors.sorted { $0.key < $1.key }); faults injected "
                + "\(faultsInjected.sorted { $0.key < $1.key }); most commits on one device: \(maxCommits); examples: "
                + examples.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: " | ")
        }
    }

    static func run(_ storm: Storm) async throws -> Figures {
        let line = try TestLine()
        defer { line.remove() }
        var random = Random(state: storm.seed)
        let workflow = TestLine.workflow(ackTimeout: "300ms", resend: "[50ms]", retryAttempts: 4, reconnect: "{ attempts: 2, delay: 20ms }")
        let paths = try line.write(count: storm.devices, workflow: workflow, faults: Self.faults(count: storm.devices, random: &random))
        let common = ["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet", "--sim-latency", storm.latency,
                      "--sim-state", "sim.state", "--report", "run.json", "--concurrency", "\(storm.concurrency)", "--events", "-"]
        // About 20 events per device: kill somewhere in the next stretch of the line.
        let stretch = max(40, storm.devices * 20 / max(1, storm.kills + 1))
        var figures = Figures(devices: storm.devices)
        let clock = ContinuousClock()
        let start = clock.now
        while figures.kills < storm.kills {
            let resume = figures.runs == 0 ? ["--journal", "run.journal"] : ["--resume", "run.journal"]
            let child = try ChildProcess(common + resume, directory: line.directory)
            figures.runs += 1
            let killAfter = random.int(1...stretch)
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
            if killed && status != 0 && status != 1 {
                figures.kills += 1
            } else {
                #expect(status == 0 || status == 1, "run \(figures.runs) ended with \(status)")
                break
            }
        }
        // The last resume runs to the end.
        let final = try ChildProcess(common + ["--resume", "run.journal", "--sim-dump", "dump.json"], directory: line.directory)
        for await _ in final.lines {}
        let status = await final.wait()
        figures.runs += 1
        figures.wall = clock.now - start
        #expect(status == 0 || status == 1, "the last resume ended with \(status)")
        #expect(figures.kills == storm.kills, "only \(figures.kills) of \(storm.kills) kills landed before the line was done")

        // Every device exactly one outcome: in the report, and one final outcome line in the journal.
        let report = try RunReport.read(from: line.directory + "/run.json")
        #expect(report.devices.count == storm.devices)
        #expect(Set(report.devices.map(\.id)).count == storm.devices)
        var finals: [String: Int] = [:]
        let journal = FileManager.default.contents(atPath: line.directory + "/run.journal") ?? Data()
        for raw in journal.split(separator: 0x0A) {
            guard let object = try? JSONSerialization.jsonObject(with: Data(raw)) as? [String: Any], object["type"] as? String == "outcome",
                  let record = object["record"] as? [String: Any], let id = record["id"] as? String,
                  let outcome = record["outcome"] as? String, outcome == "succeeded" || outcome == "failed" else { continue }
            finals[id, default: 0] += 1
        }
        #expect(finals.count == storm.devices, "devices with a final outcome in the journal: \(finals.count)")
        #expect(finals.values.allSatisfy { $0 == 1 }, "devices with two final outcomes: \(finals.filter { $0.value > 1 }.keys.sorted())")

        // The device side: none committed twice; every success committed once, with its config and blob.
        let dump = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: line.directory + "/dump.json"))) as? [String: Any])
        let devices = try #require(dump["devices"] as? [[String: Any]])
        #expect(devices.count == storm.devices)
        let records = Dictionary(uniqueKeysWithValues: report.devices.map { ($0.id, $0) })
        for d in devices {
            let id = d["id"] as? String ?? "?"
            let commits = d["commits"] as? Int ?? -1
            figures.maxCommits = max(figures.maxCommits, commits)
            #expect(commits <= 1, "\(id) committed \(commits) times")
            for (k, v) in d["faults"] as? [String: Int] ?? [:] { figures.faultsInjected[k, default: 0] += v }
            guard let r = records[id] else { continue }
            if let e = r.error, figures.examples[e.kind.rawValue] == nil { figures.examples[e.kind.rawValue] = "\(id) at `\(e.step ?? "?")`: \(e.message)" }
            #expect(r.outcome == .succeeded || r.outcome == .failed, "\(id) ended \(r.outcome)")
            if r.outcome == .succeeded {
                #expect(commits == 1, "\(id) succeeded with \(commits) commits")
                #expect(d["state"] as? String == "02")
                #expect((d["blob"] as? [String: Any])?["ended"] as? Bool == true)
            }
        }
        figures.succeeded = report.summary.outcomes[.succeeded]
        figures.failed = report.summary.outcomes[.failed]
        figures.needsReview = report.summary.errors["needs_review"] ?? 0
        figures.errors = report.summary.errors
        #expect(figures.succeeded + figures.failed == storm.devices)
        return figures
    }

    @Test func aLineKilledAtRandomMomentsAndResumedEndsEveryDeviceOnceAndCommitsNoneTwice() async throws {
        let storm = Storm.fromEnvironment()
        let figures = try await Self.run(storm)
        print("\(figures) (seed \(storm.seed))")
        #expect(figures.succeeded > storm.devices / 2, "most devices get through the storm")
        #expect(Set(figures.faultsInjected.keys).isSuperset(of: ["ack_loss", "busy_ack", "connect_fail", "drop"]), "\(figures.faultsInjected)")
    }
}
