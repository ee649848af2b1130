import Engine
import Foundation
import PostgresClient
import LineDatabase
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

/// `provision review --line`: a device a station could not settle (its irreversible write went out, the
/// ack never came, and the step is neither idempotent nor confirmable) is under review on the line,
/// listed with why, and resolved there by an operator's note — recorded in the line, shown by the merged
/// report, never silent, once.
@Suite(.serialized, .enabled(if: PostgresCluster.shouldRun, "needs PostgreSQL: run `make test`, or apt-get install postgresql"))
struct LineReviewProcessTests {
    static let workflow = """
        name: review-on-a-line
        defaults:
          timeout: 2s
        steps:
          - set: { id: config_crc, crc: CRC-16/CCITT-FALSE, of: "${config}" }
          - scan: { name: "${name}", services: [FFF0], timeout: 500ms }
          - connect: { mtu: 247, timeout: 1s }
          - subscribe: { id: acks, service: FFF0, characteristic: FFF3 }
          - name: set configuration
            await:
              subscription: acks
              trigger: { service: FFF0, characteristic: FFF1, value: { hex: "01${config}" }, irreversible: true }
              equals: { hex: "0100" }
              timeout: 300ms
          - disconnect: {}
        """

    @Test func aDeviceInDoubtOnALineIsListedAndResolvedByAnOperatorOnce() async throws {
        let line = try await ProcessLine.make(devices: 3, workflow: Self.workflow)
        defer { line.close() }
        // SN-0002 executes its configuration and never acknowledges it.
        let paths = try line.line.write(count: 3, workflow: Self.workflow, faults: [2: "{ faults: { ack_loss: 1.0 } }"])
        let station = try ChildProcess(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet", "--sim-latency", "0",
                                        "--line", line.connectionString, "--run", line.runID, "--station", "a", "--idle", "2s",
                                        "--report", "a.json"], directory: line.directory)
        for await _ in station.lines {}
        let stationErr = await station.stderr()
        #expect(await station.wait() == 1, "\(stationErr)")
        let own = try RunReport.read(from: line.directory + "/a.json")
        #expect(own.devices.first { $0.id == "SN-0002" }?.error?.kind == .needsReview, "\(own.summary.errors)")

        let run = ["--line", line.connectionString, "--run", line.runID]
        let listed = try await line.provision(["review"] + run)
        #expect(listed.status == 1, "\(listed.stderr)")
        let lines = listed.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "1 device in doubt in run \(line.runID):", "\(lines)")
        #expect(lines.contains("  SN-0002  step `set configuration`"), "\(lines)")
        #expect(lines.contains("    the device was sent the irreversible step `set configuration` and its station could not learn whether it took effect"), "\(lines)")
        let json = try await line.provision(["review", "--json"] + run)
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect((object?["in_doubt"] as? [[String: Any]])?.compactMap { $0["device"] as? String } == ["SN-0002"], "\(json.stdout)")
        let status = try await line.provision(["line", "status", "--json"] + run)
        let counts = (try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])?["counts"] as? [String: Int]
        #expect(counts?["needs_review"] == 1 && counts?["succeeded"] == 2, "\(status.stdout)")

        // Refused: a device not in doubt, a resolution without a note; nothing is written.
        let notInDoubt = try await line.provision(["review", "--mark", "succeeded", "--device", "SN-0001", "--note", "x"] + run)
        #expect(notInDoubt.status == 2 && notInDoubt.stderr.contains("SN-0001 is not in doubt in run \(line.runID) (it is succeeded"), "\(notInDoubt.stderr)")
        #expect(try await line.provision(["review", "--mark", "succeeded", "--device", "SN-0002"] + run).status == 2)

        let marked = try await line.provision(["review", "--mark", "succeeded", "--device", "SN-0002", "--note", "config reads back 0A on the bench",
                                               "--by", "ana"] + run)
        #expect(marked.status == 0, "\(marked.stderr)")
        #expect(marked.stdout == "SN-0002: recorded succeeded on run \(line.runID) (was in doubt on `set configuration`), by ana: config reads back 0A on the bench\n")
        // Once: a second resolution is refused.
        let again = try await line.provision(["review", "--mark", "failed", "--device", "SN-0002", "--note", "changed my mind", "--by", "bo"] + run)
        #expect(again.status == 2, "\(again.stderr)")
        let after = try await line.provision(["review"] + run)
        #expect(after.status == 0 && after.stdout == "nothing in doubt in run \(line.runID)\n", "\(after.stdout)")

        // The line keeps the resolution (who, which database role, the doubt it replaced) ...
        let rows = try await line.admin.query("""
            SELECT outcome, step, review_reason, note, resolved_by, role = current_user AS same_role FROM provision.resolutions WHERE run_id = $1
            """, [.text(line.runID)])
        #expect(rows.count == 1)
        #expect(try rows[0].decode("review_reason", as: String.self) == "outcome_unknown" && rows[0].decode("resolved_by", as: String.self) == "ana")
        #expect(try rows[0].decode("step", as: String.self) == "set configuration" && rows[0].decode("same_role", as: Bool.self))
        // ... and the merged report shows it, the doubt beside it.
        let merged = try await line.provision(["report", "--json"] + run)
        let report = try JSONDecoder.snakeCase.decode(RunReport.self, from: Data(merged.stdout.utf8))
        #expect(report.summary.outcomes[.succeeded] == 3)
        // Checksums show as each station's own report shows them (run.checksums).
        #expect(report.run.checksums == ["config_crc": 16] && own.run.checksums == ["config_crc": 16])
        let csv = try await line.provision(["report", "--csv"] + run)
        #expect(csv.stdout.split(separator: "\r\n").dropFirst().allSatisfy { $0.contains(",0x") }, "\(csv.stdout)")
        let two = try #require(report.devices.first { $0.id == "SN-0002" })
        #expect(two.outcome == .succeeded && two.error == nil)
        #expect(two.review?.by == "ana" && two.review?.note == "config reads back 0A on the bench" && two.review?.resolution == .succeeded)
        #expect(two.review?.previous?.kind == .needsReview && two.review?.previous?.step == "set configuration")
        #expect(two.station == "a")
    }

    @Test func devicesUnderReviewOnALineAreAskedAgainByTheirConfirmReadNotByHand() async throws {
        let line = try await ProcessLine.make(devices: 3)
        defer { line.close() }
        // The device side: SN-0002 received its commit in an earlier run; SN-0003 never did.
        let earlier = try await line.provision(["run", line.workflow, "--inventory", line.inventory, "--adapter", "sim", "--quiet", "--sim-latency", "0",
                                                "--sim-state", "devices.state", "--sim-hears", "SN-0002", "--journal", "earlier.journal",
                                                "--report", "earlier.json"])
        #expect(try RunReport.read(from: line.directory + "/earlier.json").devices.first { $0.id == "SN-0002" }?.outcome == .succeeded, "\(earlier.stderr)")
        #expect(try await line.deviceSide().device("SN-0002")?.commits == 1)
        // The line, as a station left it that announced both commits and died (its leases expired).
        let runs = LineRuns(connection: line.admin)
        let run = LineRun(id: line.runID, workflow: LineFile(name: "test-provisioning", path: line.workflow, sha256: try TestLine.sha256(ofFile: line.workflow)),
                          inventory: LineFile(path: line.inventory, sha256: try TestLine.sha256(ofFile: line.inventory)), toolVersion: "test")
        try await LineSchema.migrate(line.admin, toolVersion: "test")
        try await runs.join(run, createdBy: "x/1")
        try await runs.addDevices(["SN-0001", "SN-0002", "SN-0003"], run: line.runID)
        try await runs.register(LineStationInfo(id: "x/1", name: "x", host: "gone", adapters: ["sim"], toolVersion: "test"), run: line.runID)
        let x = LineClaims(connection: line.admin, run: line.runID, station: "x/1")
        let held = try await x.claim(among: ["SN-0002", "SN-0003"], limit: 2, lease: .seconds(60))
        #expect(held.count == 2)
        let intents = try await x.write(intents: held.map { LineIntent(device: $0.device, attempt: $0.attempt, stepIndex: 11, step: "commit") })
        #expect(intents.intents.values.allSatisfy { $0 == .recorded(.claimed) })
        try await line.admin.query("UPDATE provision.devices SET lease_expires_at = now() - interval '1 second' WHERE run_id = $1 AND state = 'claimed'",
                                   [.text(line.runID)])

        let lineArgs = ["--line", line.connectionString, "--run", line.runID]
        let listed = try await line.provision(["review"] + lineArgs)
        #expect(listed.status == 1)
        #expect(listed.stdout.contains("2 devices in doubt in run \(line.runID):"), "\(listed.stdout)")
        #expect(listed.stdout.contains("--recheck SN-0002,SN-0003"), "the command that asks them: \(listed.stdout)")

        // A station that asks them again: only the devices under review it was given (SN-0001 is pending,
        // not under review: left to the line's ordinary stations).
        let b = try await line.provision(["run", line.workflow, "--inventory", line.inventory, "--adapter", "sim", "--quiet", "--sim-latency", "0",
                                          "--sim-state", "devices.state", "--station", "b", "--idle", "5s", "--report", "b.json",
                                          "--recheck", "SN-0001,SN-0002,SN-0003"] + lineArgs)
        #expect(b.status == 0, "\(b.stderr)")
        let worked = try RunReport.read(from: line.directory + "/b.json")
        #expect(worked.devices.map(\.id).sorted() == ["SN-0002", "SN-0003"])
        #expect(worked.devices.allSatisfy { $0.outcome == .succeeded && $0.attempts == 2 }, "\(worked.summary.errors)")
        // SN-0002's confirm read showed the commit had taken effect: not sent again. SN-0003's showed it had
        // not: sent now, once.
        let side = try await line.deviceSide()
        #expect(side.device("SN-0002")?.commits == 1 && side.device("SN-0003")?.commits == 1)
        #expect(side.device("SN-0001")?.commits == 0)
        let after = try await line.provision(["review"] + lineArgs)
        #expect(after.status == 0 && after.stdout == "nothing in doubt in run \(line.runID)\n", "\(after.stdout)")
        let devices = try await line.devices()
        #expect(devices["SN-0001"]?.state == "pending" && devices["SN-0002"]?.state == "succeeded" && devices["SN-0003"]?.state == "succeeded")

        // An ordinary station finishes the line; every device was committed exactly once.
        let c = try await line.provision(["run", line.workflow, "--inventory", line.inventory, "--adapter", "sim", "--quiet", "--sim-latency", "0",
                                          "--sim-state", "devices.state", "--station", "c", "--idle", "5s", "--report", "c.json"] + lineArgs)
        #expect(c.status == 0, "\(c.stderr)")
        try await line.expectEveryDeviceExactlyOnce(allSucceeded: true, "asked again")
    }
}
