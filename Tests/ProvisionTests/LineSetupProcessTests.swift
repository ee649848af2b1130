import Engine
import Foundation
import PostgresClient
import Testing
import EngineTestSupport
import TestSupport

/// A line set up from nothing as docs/line.md says ("Setting up a line"): an administrator creates the
/// database, its owner and the login roles; the owner — a role that may create no role — creates the
/// schema with `provision line init` and grants with `provision line grant`; two stations, each its own
/// unprivileged role, work the line; an auditor reads it and can change nothing.
@Suite(.serialized, .enabled(if: PostgresCluster.shouldRun, "needs PostgreSQL: run `make test`, or apt-get install postgresql"))
struct LineSetupProcessTests {
    @Test func aTwoStationLineIsSetUpFromNothingByItsOwnerAndWorkedByUnprivilegedRoles() async throws {
        let cluster = try await PostgresCluster.shared()
        let tag = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(8)
        let owner = "line_owner_\(tag)", stationA = "station_a_\(tag)", stationB = "station_b_\(tag)", quality = "quality_\(tag)"
        // 1. The administrator (docs/line.md, step 1).
        let admin = try await cluster.connect(cluster.connectionString())
        defer { admin.close() }
        for role in [owner, stationA, stationB, quality] {
            // Role names are this test's own, made of letters, digits and `_`: no quoting needed.
            try await admin.query("SELECT set_config('provision.test_role', $1, false)", [.text(role)])
            try await admin.query("""
                DO $$ BEGIN EXECUTE format('CREATE ROLE %I LOGIN PASSWORD %L', current_setting('provision.test_role'), 'pw-' || current_setting('provision.test_role')); END $$
                """)
        }
        let database = try await cluster.createDatabase(owner: owner)
        let dbname = try #require(database.split(separator: " ").first { $0.hasPrefix("dbname=") }).dropFirst("dbname=".count)
        func line(_ role: String) -> String { cluster.connectionString(database: String(dbname), user: role, password: "pw-\(role)") }
        let roles = try await admin.query("SELECT rolname, rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = $1", [.text(owner)])
        #expect(try roles.first?.decode("rolsuper", as: Bool.self) == false && roles.first?.decode("rolcreaterole", as: Bool.self) == false,
                "the owner is an ordinary role")

        let testLine = try TestLine()
        defer { testLine.remove() }
        let paths = try testLine.write(count: 12)
        func provision(_ args: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
            try await ChildProcess.shell("$PROVISION " + args.map(Self.quoted).joined(separator: " "), directory: testLine.directory)
        }

        // Before the schema exists, a station's role can neither create it nor be granted anything.
        let early = try await provision(["line", "grant", "--line", line(owner), "--station", stationA])
        #expect(early.status == 2)
        #expect(early.stderr.contains("holds no line yet; create it with `provision line init`"), "\(early.stderr)")

        // 2. The owner creates the schema; again, it is left alone.
        let created = try await provision(["line", "init", "--line", line(owner)])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(created.stdout.hasPrefix("created the line schema at version 6\n"), "\(created.stdout)")
        let again = try await provision(["line", "init", "--line", line(owner)])
        #expect(again.stdout == "the line schema is already at version 6; nothing to do\n", "\(again.stdout)")
        let migrated = try await provision(["line", "migrate", "--line", line(owner)])
        #expect(migrated.stdout == "the line schema is already at version 6; nothing to do\n", "\(migrated.stdout)")

        // 3. The owner grants; a role that does not exist, or a caller that is not the owner, is refused.
        let missing = try await provision(["line", "grant", "--line", line(owner), "--station", "nobody_\(tag)"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("no role `nobody_\(tag)` in this cluster; an administrator creates it first (CREATE ROLE nobody_\(tag) LOGIN PASSWORD '…'"), "\(missing.stderr)")
        let notOwner = try await provision(["line", "grant", "--line", line(stationA), "--station", stationA])
        #expect(notOwner.status == 2)
        #expect(notOwner.stderr.contains("only the line's owner can grant its privileges: the schema `provision` belongs to \(owner), and this is \(stationA)"), "\(notOwner.stderr)")
        let granted = try await provision(["line", "grant", "--line", line(owner), "--station", stationA, "--station", stationB, "--auditor", quality])
        #expect(granted.status == 0, "\(granted.stderr)")
        #expect(granted.stdout == "granted the line's privileges to \(stationA) (station), \(stationB) (station), \(quality) (auditor)\n")

        // Two stations, each as its own role, on one simulated device side.
        let run = "setup-\(tag)"
        func station(_ name: String, _ role: String) throws -> ChildProcess {
            try ChildProcess(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet", "--sim-latency", "0.3",
                              "--sim-state", "devices.state", "--line", line(role), "--run", run, "--station", name, "--idle", "5s",
                              "--concurrency", "3", "--report", "\(name).json", "--meta", "lot=L-42"], directory: testLine.directory)
        }
        let a = try station("a", stationA), b = try station("b", stationB)
        let statuses = await withTaskGroup(of: Int32.self) { group in
            for s in [a, b] { group.addTask { for await _ in s.lines {}; return await s.wait() } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        let errors = (await a.stderr(), await b.stderr())
        #expect(statuses == [0, 0], "a: \(errors.0) b: \(errors.1)")
        let reports = try ["a", "b"].map { try RunReport.read(from: testLine.directory + "/\($0).json") }
        #expect(reports.map(\.devices.count).reduce(0, +) == 12, "every device in one station's report")

        // The auditor reads the merged report and the status, and can change nothing.
        let merged = try await provision(["report", "--line", line(quality), "--run", run, "--json"])
        #expect(merged.status == 0, "\(merged.stderr)")
        let report = try JSONDecoder.snakeCase.decode(RunReport.self, from: Data(merged.stdout.utf8))
        #expect(report.summary.outcomes[.succeeded] == 12)
        #expect(report.run.meta == ["lot": "L-42"], "the run's metadata on the line's merged report")
        // Every record names the station that worked it, as each station's own report does.
        let worked = Dictionary(uniqueKeysWithValues: reports.flatMap { r in r.devices.map { ($0.id, $0.station) } })
        #expect(report.devices.allSatisfy { $0.station != nil && $0.station == worked[$0.id] }, "\(report.devices.map { "\($0.id) \($0.station ?? "-")" })")
        #expect(Set(report.devices.compactMap(\.station)).isSubset(of: ["a", "b"]))
        let byStation = try await provision(["report", "--line", line(quality), "--run", run, "--where", "station == \"a\"", "--json"])
        #expect(byStation.status == 0, "\(byStation.stderr)")
        let onlyA = try JSONDecoder.snakeCase.decode(RunReport.self, from: Data(byStation.stdout.utf8))
        #expect(onlyA.devices.map(\.id).sorted() == reports[0].devices.map(\.id).sorted())
        let status = try await provision(["line", "status", "--line", line(quality), "--run", run, "--json"])
        #expect(status.status == 0, "\(status.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
        #expect((object["counts"] as? [String: Int])?["succeeded"] == 12)
        #expect((object["pending"] as? [String]) == [])
        #expect((object["unheard"] as? [String: Any])?["count"] as? Int == 0, "both stations told the line what they hear")
        let auditor = try await PostgresConnection.connect(ConnectionString(line(quality)))
        defer { auditor.close() }
        await #expect { try await auditor.query("UPDATE provision.devices SET state = 'pending'") } throws: { error in
            (error as? PostgresError)?.sqlState == SQLState.insufficientPrivilege
        }
        // A station appends; it never rewrites or deletes.
        let stationDB = try await PostgresConnection.connect(ConnectionString(line(stationA)))
        defer { stationDB.close() }
        for statement in [{ try await stationDB.query("DELETE FROM provision.outcomes") },
                          { try await stationDB.query("UPDATE provision.outcomes SET outcome = 'failed'") },
                          { try await stationDB.query("DELETE FROM provision.heard") }] {
            await #expect { try await statement() } throws: { error in (error as? PostgresError)?.sqlState == SQLState.insufficientPrivilege }
        }
        // A device under review (the owner puts one there, as a station cut after its intent
        // leaves it): the auditor may not resolve it; a station's role may, and a resolution is never
        // rewritten by a station either.
        let ownerDB = try await PostgresConnection.connect(ConnectionString(line(owner)))
        defer { ownerDB.close() }
        try await ownerDB.query("""
            UPDATE provision.devices SET state = 'needs_review', intent_step = 'commit', intent_at = now(),
                   review_reason = 'lease_expired_after_intent' WHERE run_id = $1 AND device_id = 'SN-0005'
            """, [.text(run)])
        let mark = ["review", "--run", run, "--mark", "succeeded", "--device", "SN-0005", "--note", "state reads 02", "--by", "ana"]
        let byAuditor = try await provision(mark + ["--line", line(quality)])
        #expect(byAuditor.status == 3 && byAuditor.stderr.contains("this role may not resolve devices on the line"), "\(byAuditor.stderr)")
        let byStationB = try await provision(mark + ["--line", line(stationB)])
        #expect(byStationB.status == 0, "\(byStationB.stderr)")
        let resolved = try await ownerDB.query("SELECT role FROM provision.resolutions WHERE run_id = $1 AND device_id = 'SN-0005'", [.text(run)])
        #expect(try resolved.map { try $0.decode("role", as: String.self) } == [stationB])
        await #expect { try await stationDB.query("UPDATE provision.resolutions SET outcome = 'failed'") } throws: { error in
            (error as? PostgresError)?.sqlState == SQLState.insufficientPrivilege
        }
    }

    /// A shell word for `text` (single quotes, `'` written `'\''`).
    static func quoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
