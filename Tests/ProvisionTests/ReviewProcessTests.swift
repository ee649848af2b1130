import Engine
import Foundation
import Testing
import EngineTestSupport
import TestSupport

/// `provision review` as a child process: the devices a journal leaves in doubt, settled by asking the
/// device (`run --resume --recheck`) or by an operator's note, each recorded in the journal and report.
@Suite(.serialized) struct ReviewProcessTests {
    static func run(_ args: [String], in dir: String) async throws -> (status: Int32, stdout: [String]) {
        try await RunProcessTests.run(args, in: dir)
    }

    @Test func devicesInDoubtAreListedAskedAgainOrResolvedWithANote() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 3)
        let loaded = try line.load(paths)
        // A journal as an earlier run left it: SN-0002 recorded needs_review on its commit (the device
        // could not be asked then), SN-0003 cut after its commit intent.
        func t(_ s: Int) -> WallTime { wallTime("2026-12-01T10:00:0\(s).000Z") }
        try await TestLine.writeJournal(line.directory + "/run.journal", for: loaded, at: t(0), [
            .started(device: "SN-0002", attempt: 1, at: t(1)), .intent(device: "SN-0002", step: "commit", stepIndex: 10, at: t(2)),
            .outcome(DeviceRecord(id: "SN-0002", address: nil, name: nil, outcome: .failed, attempts: 1,
                                  error: FailureRecord(kind: .needsReview, step: "commit", message: "the confirm read timed out")), at: t(3)),
            .started(device: "SN-0003", attempt: 1, at: t(1)), .intent(device: "SN-0003", step: "commit", stepIndex: 10, at: t(4)),
        ])
        let listed = try await Self.run(["review", "run.journal"], in: line.directory)
        #expect(listed.status == 1)
        #expect(listed.stdout.first == "2 devices in doubt in run.journal:", "\(listed.stdout)")
        #expect(listed.stdout.contains("  SN-0002  step `commit`"))
        #expect(listed.stdout.contains("    last outcome failed (needs_review): the confirm read timed out; started 1 time"))
        #expect(listed.stdout.contains("    the intent to send `commit` (2026-12-01T10:00:04.000Z) has no final outcome; started 1 time"))
        #expect(listed.stdout.contains { $0.hasSuffix("--resume run.journal --recheck SN-0002,SN-0003") }, "\(listed.stdout)")
        let json = try await Self.run(["review", "run.journal", "--json"], in: line.directory)
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.joined().utf8)) as? [String: Any]
        #expect((object?["in_doubt"] as? [[String: Any]])?.compactMap { $0["device"] as? String } == ["SN-0002", "SN-0003"])

        // A resolution without a note is refused; with one it is recorded.
        #expect(try await Self.run(["review", "run.journal", "--mark", "succeeded", "--device", "SN-0003"], in: line.directory).status == 2)
        #expect(try await Self.run(["review", "run.journal", "--mark", "succeeded", "--device", "SN-0001", "--note", "x"], in: line.directory).status == 2,
                "SN-0001 is not in doubt")
        let marked = try await Self.run(["review", "run.journal", "--mark", "succeeded", "--device", "SN-0003", "--note", "state reads 02 on the bench",
                                         "--by", "ana"], in: line.directory)
        #expect(marked.status == 0)
        #expect(marked.stdout == ["SN-0003: recorded succeeded (was in doubt on `commit`), by ana: state reads 02 on the bench"])

        // Asking SN-0002 again: its commit never reached it, so it is provisioned now; SN-0003 is carried over.
        let resumed = try await Self.run(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet", "--sim-latency", "0",
                                          "--resume", "run.journal", "--recheck", "SN-0002", "--report", "r.json", "--sim-dump", "dump.json"],
                                         in: line.directory)
        #expect(resumed.status == 0)
        let report = try RunReport.read(from: line.directory + "/r.json")
        #expect(report.devices.map(\.outcome) == [.succeeded, .succeeded, .succeeded], "\(report.summary.errors)")
        let three = try #require(report.devices.first { $0.id == "SN-0003" })
        #expect(three.carriedOver == true && three.review?.by == "ana" && three.review?.note == "state reads 02 on the bench")
        #expect(three.review?.previous?.kind == .needsReview)
        let dump = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: line.directory + "/dump.json"))) as? [String: Any]
        let commits = Dictionary(uniqueKeysWithValues: ((dump?["devices"] as? [[String: Any]]) ?? []).map { ($0["id"] as? String ?? "", $0["commits"] as? Int ?? -1) })
        #expect(commits == ["SN-0001": 1, "SN-0002": 1, "SN-0003": 0], "SN-0003 was settled by hand, never touched")
        let after = try await Self.run(["review", "run.journal"], in: line.directory)
        #expect(after.status == 0 && after.stdout == ["nothing in doubt in run.journal"])
    }
}
