import BLESimulator
import Engine
import EngineTestSupport
import Foundation
import PostgresClient
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A line of `provision run --line` station processes on one PostgreSQL database: a small production
/// line (TestLine) on the simulator, each station with its own simulated radio hearing part of it, all
/// on one device side (a shared `--sim-state` file).
struct ProcessLine: Sendable {
    let cluster: PostgresCluster
    let connectionString: String
    let admin: PostgresConnection
    let line: TestLine
    let workflow: String
    let inventory: String
    let runID: String
    var directory: String { line.directory }

    static func make(devices: Int, cluster: PostgresCluster? = nil, workflow: String = TestLine.workflow()) async throws -> ProcessLine {
        let cluster = if let cluster { cluster } else { try await PostgresCluster.shared() }
        let cs = try await cluster.createDatabase()
        let admin = try await cluster.connect(cs)
        let line = try TestLine()
        let paths = try line.write(count: devices, workflow: workflow)
        return ProcessLine(cluster: cluster, connectionString: cs, admin: admin, line: line, workflow: paths.workflow,
                           inventory: paths.inventory, runID: "line-test-\(UUID().uuidString.prefix(6))")
    }

    /// A station process on the simulator: its events on stdout, its report `NAME.json`.
    func station(_ name: String, hears: String? = nil, latency: String = "0.3", lease: String = "3s", idle: String = "5s",
                 concurrency: Int = 4, seed: Int = 1, extra: [String] = []) throws -> ChildProcess {
        var args = ["run", workflow, "--inventory", inventory, "--adapter", "sim", "--quiet", "--sim-latency", latency,
                    "--sim-state", "devices.state", "--seed", "\(seed)",
                    "--line", connectionString, "--run", runID, "--station", name, "--lease", lease, "--idle", idle,
                    "--concurrency", "\(concurrency)", "--report", "\(name).json", "--events", "-"]
        if let hears { args += ["--sim-hears", hears] }
        return try ChildProcess(args + extra, directory: directory)
    }

    /// Runs `provision` to its end: status, stdout, stderr.
    func provision(_ args: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        let child = try ChildProcess(args, directory: directory)
        var out = ""
        for await l in child.lines { out += l + "\n" }
        let err = await child.stderr()
        return (await child.wait(), out, err)
    }

    /// Per device: its state on the line, its attempt, and its outcome rows in attempt order (a station's
    /// verdict that it could not learn the outcome reads `failed:needs_review`).
    func devices() async throws -> [String: (state: String, attempt: Int, outcomes: [String])] {
        let rows = try await admin.query("""
            SELECT d.device_id, d.state, d.attempt,
                   coalesce(array_to_json(array_agg(o.outcome || CASE WHEN o.error_kind = 'needs_review' THEN ':needs_review' ELSE '' END
                                             ORDER BY o.attempt) FILTER (WHERE o.outcome IS NOT NULL)), '[]') AS outcomes
            FROM provision.devices AS d LEFT JOIN provision.outcomes AS o ON o.run_id = d.run_id AND o.device_id = d.device_id
            WHERE d.run_id = $1 GROUP BY d.device_id, d.state, d.attempt
            """, [.text(runID)])
        var out: [String: (state: String, attempt: Int, outcomes: [String])] = [:]
        for row in rows {
            out[try row.decode("device_id")] = (try row.decode("state"), try row.decode("attempt"), try row.decodeJSON("outcomes", as: [String].self))
        }
        return out
    }

    /// The device side as every station left it (the shared state file, folded).
    func deviceSide() async throws -> SimulatorDump {
        let loaded = try line.load((workflow, inventory))
        return try await line.simulator(loaded, latency: 0, statePath: directory + "/devices.state").dump()
    }

    /// The end every line test asks for: each device finished exactly once (one final outcome on the
    /// line) or under review (no final outcome but a station's `failed:needs_review`), none pending or
    /// claimed; the device side shows no device committed twice,
    /// and every device the line calls succeeded committed once.
    func expectEveryDeviceExactlyOnce(allSucceeded: Bool, _ comment: Comment) async throws {
        let devices = try await devices()
        let side = try await deviceSide()
        #expect(!devices.isEmpty, comment)
        for (id, d) in devices.sorted(by: { $0.key < $1.key }) {
            let finals = d.outcomes.filter { $0 == "succeeded" || $0 == "failed" }
            let commits = side.device(id)?.commits ?? -1
            #expect(commits <= 1, "\(comment): \(id) committed \(commits) times")
            switch d.state {
            case "succeeded":
                #expect(finals == ["succeeded"], "\(comment): \(id) has outcomes \(d.outcomes)")
                #expect(commits == 1, "\(comment): \(id) succeeded with \(commits) commits on the device side")
            case "needs_review":
                #expect(!allSucceeded, "\(comment): \(id) needs review")
                #expect(finals.isEmpty, "\(comment): \(id) needs review but has outcomes \(d.outcomes)")
            default:
                Issue.record("\(comment): \(id) ended \(d.state) with outcomes \(d.outcomes)")
            }
        }
    }

    func close() {
        admin.close()
        line.remove()
    }

    /// Reads a station's events (stdout, JSON lines) to its end, calling `each` with every event type.
    static func drain(_ child: ChildProcess) async -> [String] {
        await drain(child) { _ in }
    }

    /// Reads a station's events to the end, returning its exit status.
    static func finish(_ child: ChildProcess) async -> Int32 {
        _ = await drain(child)
        return await child.wait()
    }

    static func drain(_ child: ChildProcess, each: (String) async throws -> Void) async rethrows -> [String] {
        var types: [String] = []
        for await l in child.lines {
            guard let data = l.data(using: .utf8), let o = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                  let type = o["type"] as? String else { continue }
            types.append(type)
            try await each(type)
        }
        return types
    }
}

@Suite(.serialized, .enabled(if: PostgresCluster.shouldRun, "needs PostgreSQL: run `make test`, or apt-get install postgresql"))
struct LineProcessTests {
    @Test func threeStationsEachHearingTwoThirdsOfTheLineWorkEveryDeviceOnce() async throws {
        let line = try await ProcessLine.make(devices: 30)
        defer { line.close() }
        // Every device is heard by at least two of the three stations (SN-0020 by all three).
        let ranges = ["a": "SN-000*,SN-001*,SN-0020", "b": "SN-0011,SN-0012,SN-0013,SN-0014,SN-0015,SN-0016,SN-0017,SN-0018,SN-0019,SN-002*,SN-0030",
                      "c": "SN-000*,SN-0010,SN-002*,SN-0030"]
        let stations = try ranges.sorted { $0.key < $1.key }.enumerated().map { i, r in
            try line.station(r.key, hears: r.value, seed: i + 1)
        }
        let statuses = await withTaskGroup(of: Int32.self) { group in
            for s in stations { group.addTask { await ProcessLine.finish(s) } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses == [0, 0, 0])
        var worked: [String: Set<String>] = [:]
        for name in ranges.keys {
            let report = try RunReport.read(from: line.directory + "/\(name).json")
            #expect(report.run.id == line.runID)
            #expect(report.devices.allSatisfy { $0.outcome == .succeeded })
            worked[name] = Set(report.devices.map(\.id))
        }
        let all = Set((1...30).map { String(format: "SN-%04d", $0) })
        #expect(worked.values.reduce(0) { $0 + $1.count } == 30, "no device in two stations' reports")
        #expect(worked.values.reduce(Set<String>()) { $0.union($1) } == all)
        #expect(worked.values.filter { !$0.isEmpty }.count >= 2, "the line shared the work: \(worked.mapValues(\.count))")
        try await line.expectEveryDeviceExactlyOnce(allSucceeded: true, "three stations")
        #expect(try await line.devices().values.allSatisfy { $0.attempt == 1 }, "no device was claimed twice")

        // The merged report: every device once, in the usual schema.
        let merged = try await line.provision(["report", "--line", line.connectionString, "--run", line.runID, "--json"])
        #expect(merged.status == 0, "\(merged.stderr)")
        let report = try JSONDecoder.snakeCase.decode(RunReport.self, from: Data(merged.stdout.utf8))
        #expect(report.schema == RunReport.schemaVersion)
        #expect(report.devices.map(\.id) == all.sorted())
        #expect(report.summary.outcomes[.succeeded] == 30)
        #expect(report.run.station == "a, b, c")
        // Captured values keep the workflow's types (report schema 2), as in each station's own report.
        let own = try RunReport.read(from: line.directory + "/a.json")
        #expect(own.run.captureTypes?.isEmpty == false)
        #expect(report.run.captureTypes == own.run.captureTypes)
        for d in own.devices { #expect(report.devices.first { $0.id == d.id }?.captured == d.captured, "\(d.id)") }
        let csv = try await line.provision(["report", "--line", line.connectionString, "--run", line.runID, "--csv"])
        #expect(csv.stdout.split(separator: "\r\n").count == 31)
        // The line's status: every device done, three stations that stopped.
        let status = try await line.provision(["line", "status", "--line", line.connectionString, "--run", line.runID, "--json"])
        #expect(status.status == 0, "\(status.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
        #expect((object["counts"] as? [String: Int])?["succeeded"] == 30)
        let rows = try #require(object["stations"] as? [[String: Any]])
        #expect(rows.count == 3 && rows.allSatisfy { $0["stopped"] != nil && ($0["leases"] as? Int) == 0 })
        #expect(rows.map { $0["outcomes"] as? Int ?? 0 }.reduce(0, +) == 30)
    }

    @Test func aStationKilledMidRunLosesItsDevicesToTheOtherWhenItsLeasesExpire() async throws {
        let line = try await ProcessLine.make(devices: 20)
        defer { line.close() }
        let a = try line.station("a", latency: "0.6", lease: "2s", idle: "15s", seed: 1)
        let b = try line.station("b", latency: "0.6", lease: "2s", idle: "15s", seed: 2)
        let bStatus = Task { await ProcessLine.finish(b) }
        // a dies (SIGKILL) with devices in flight: after its third device started, before any finished.
        var started = 0
        _ = await ProcessLine.drain(a) { type in
            if type == "device_started" {
                started += 1
                if started == 3 { a.signal(SIGKILL) }
            }
        }
        #expect(await a.wait() != 0)
        let bs = await bStatus.value
        #expect(bs == 0 || bs == 1)
        try await line.expectEveryDeviceExactlyOnce(allSucceeded: false, "a station killed")
        // What a held when it died went back to the line: b took over the devices a had not announced a
        // write for (a later attempt), and the ones it had are under review.
        let devices = try await line.devices()
        let takenOver = devices.values.filter { $0.attempt >= 2 && $0.state == "succeeded" }.count
        let underReview = devices.values.filter { $0.state == "needs_review" }.count
        #expect(takenOver + underReview >= 1, "the killed station's devices were not taken over: \(devices)")
        // b's report holds what b worked; the merged report every device once, under review or not.
        let merged = try await line.provision(["report", "--line", line.connectionString, "--run", line.runID, "--json"])
        let report = try JSONDecoder.snakeCase.decode(RunReport.self, from: Data(merged.stdout.utf8))
        #expect(report.devices.count == 20)
        #expect(report.devices.filter { $0.error?.kind == .needsReview }.count == underReview)
        #expect(report.devices.filter { $0.outcome == .succeeded }.count == 20 - underReview)
    }

    @Test func aCutConnectionIsMadeAgainAndNothingIsLostOrDoneTwice() async throws {
        let line = try await ProcessLine.make(devices: 20)
        defer { line.close() }
        let a = try line.station("a", latency: "0.4", seed: 1)
        let b = try line.station("b", latency: "0.4", seed: 2)
        let bStatus = Task { await ProcessLine.finish(b) }
        // Every station connection is terminated by the server, twice, while devices are in flight.
        var finished = 0
        let admin = line.admin
        _ = try await ProcessLine.drain(a) { type in
            guard type == "device_finished" else { return }
            finished += 1
            if finished == 2 || finished == 5 {
                let cut = try await admin.query("""
                    SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity
                    WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
                    """)
                #expect(try cut[0].decode("n", as: Int.self) >= 2)
            }
        }
        #expect(await a.wait() == 0)
        #expect(await bStatus.value == 0)
        try await line.expectEveryDeviceExactlyOnce(allSucceeded: true, "connections cut")
        #expect(!FileManager.default.fileExists(atPath: line.directory + "/a.spool"), "a's spool was written to the line")
        #expect(!FileManager.default.fileExists(atPath: line.directory + "/b.spool"), "b's spool was written to the line")
    }

    @Test func aSecretNeverReachesTheLineDatabaseInAnyRendering() async throws {
        let line = try RedactionProcessTests.line(steps: #"  - verify: { value: "${echo_key} ${echo_password} ${echo_password_b64} ${echo_password_text}", equals: "nothing" }"#)
        defer { line.remove() }
        let cluster = try await PostgresCluster.shared()
        let cs = try await cluster.createDatabase()
        let admin = try await cluster.connect(cs)
        defer { admin.close() }
        let child = try ChildProcess(["run", "workflow.yaml", "--inventory", "inventory.yaml", "--adapter", "sim", "--sim-latency", "0",
                                      "--quiet", "--line", cs, "--report", "r.json", "--idle", "2s"], directory: line.directory)
        for await _ in child.lines {}
        let stderr = await child.stderr()
        #expect(await child.wait() == 1, "\(stderr)")
        // Every table of the line, every row as text.
        var text = ""
        for table in ["runs", "stations", "devices", "intents", "outcomes"] {
            text += try await Self.dump(admin, table)
        }
        #expect(text.contains("SN-0001") && text.contains("***"), "the record is on the line, redacted")
        for secret in RedactionProcessTests.renderings {
            #expect(!text.lowercased().contains(secret.lowercased()), "the line database shows \(secret)")
        }
    }

    /// Every row of a table of the line as text.
    static func dump(_ db: PostgresConnection, _ table: String) async throws -> String {
        let rows: PostgresRows
        switch table {
        case "runs": rows = try await db.query("SELECT coalesce(string_agg(t::text, E'\\n'), '') AS rows FROM provision.runs AS t")
        case "stations": rows = try await db.query("SELECT coalesce(string_agg(t::text, E'\\n'), '') AS rows FROM provision.stations AS t")
        case "devices": rows = try await db.query("SELECT coalesce(string_agg(t::text, E'\\n'), '') AS rows FROM provision.devices AS t")
        case "intents": rows = try await db.query("SELECT coalesce(string_agg(t::text, E'\\n'), '') AS rows FROM provision.intents AS t")
        default: rows = try await db.query("SELECT coalesce(string_agg(t::text, E'\\n'), '') AS rows FROM provision.outcomes AS t")
        }
        return try rows[0].decode("rows", as: String.self) + "\n"
    }
}

/// The line database restarted under running stations (a cluster of the test's own).
@Suite(.serialized, .enabled(if: PostgresCluster.shouldRun, "needs PostgreSQL: run `make test`, or apt-get install postgresql"))
struct LineRestartProcessTests {
    @Test func theDatabaseRestartedMidRunLosesNoOutcomeAndClaimsNoDeviceTwice() async throws {
        try await PostgresCluster.with { cluster in
            let line = try await ProcessLine.make(devices: 20, cluster: cluster)
            defer { line.close() }
            let a = try line.station("a", latency: "0.4", lease: "10s", idle: "20s", seed: 1)
            let b = try line.station("b", latency: "0.4", lease: "10s", idle: "20s", seed: 2)
            let bStatus = Task { await ProcessLine.finish(b) }
            var finished = 0
            var restarted = false
            _ = try await ProcessLine.drain(a) { type in
                guard type == "device_finished" else { return }
                finished += 1
                if finished == 3 {
                    try await cluster.restart(mode: "fast")
                    restarted = true
                }
            }
            #expect(restarted)
            let aStatus = await a.wait()
            #expect(aStatus == 0 || aStatus == 1)
            let bs = await bStatus.value
        #expect(bs == 0 || bs == 1)
            let admin = try await cluster.connect(line.connectionString)
            defer { admin.close() }
            let after = ProcessLine(cluster: cluster, connectionString: line.connectionString, admin: admin, line: line.line,
                                    workflow: line.workflow, inventory: line.inventory, runID: line.runID)
            try await after.expectEveryDeviceExactlyOnce(allSucceeded: false, "database restarted")
            #expect(!FileManager.default.fileExists(atPath: line.directory + "/a.spool"), "a's spool was written to the line")
            #expect(!FileManager.default.fileExists(atPath: line.directory + "/b.spool"), "b's spool was written to the line")
        }
    }
}

extension JSONDecoder {
    /// Reads reports as `provision` writes them.
    static var snakeCase: JSONDecoder {
        let d = JSONDecoder()
        d.keyDecodingStrategy = .convertFromSnakeCase
        return d
    }
}
