import Foundation
import LineDatabase
import PostgresClient
import TestSupport
import Testing

@Suite(.enabled(if: PostgresCluster.shouldRun, "needs PostgreSQL: run `make test`, or apt-get install postgresql"))
struct LineSchemaTests {
    @Test func aFreshDatabaseIsMigratedOnFirstUseAndLeftAloneAfter() async throws {
        let cluster = try await PostgresCluster.shared()
        let db = try await cluster.connect(try await cluster.createDatabase())
        defer { db.close() }
        #expect(try await LineSchema.databaseVersion(db) == nil)
        let first = try await LineSchema.migrate(db, toolVersion: "1.2.3")
        #expect(first.from == nil)
        #expect(first.to == LineSchema.version)
        #expect(first.applied == Array(1...LineSchema.version))
        let second = try await LineSchema.migrate(db, toolVersion: "1.2.3")
        #expect(second.applied.isEmpty)
        #expect(second.from == LineSchema.version)
        let rows = try await db.query("SELECT version, tool_version FROM provision.schema_migrations ORDER BY version")
        #expect(try rows.map { try $0.decode("version", as: Int.self) } == Array(1...LineSchema.version))
        #expect(try rows[0].decode("tool_version", as: String.self) == "1.2.3")
        // Every table and view the documentation describes is there.
        let names = try await db.query("""
            SELECT table_name FROM information_schema.tables WHERE table_schema = 'provision' ORDER BY table_name
            """).map { try $0.decode("table_name", as: String.self) }
        #expect(names == ["device_report", "device_status", "devices", "heard", "intents", "latest_outcomes", "outcomes", "resolutions",
                          "runs", "schema_migrations", "stations"])
    }

    @Test func aRunKeepsItsCaptureTypesAndAReaderOfAnOlderSchemaStillReadsTheRun() async throws {
        let cluster = try await PostgresCluster.shared()
        let db = try await cluster.connect(try await cluster.createDatabase())
        defer { db.close() }
        try await LineSchema.migrate(db, toolVersion: "t")
        let runs = LineRuns(connection: db)
        let run = LineRun(id: "r1", workflow: LineFile(name: "w", path: "w.yaml", sha256: String(repeating: "a", count: 64)),
                          inventory: LineFile(path: "i.yaml", sha256: String(repeating: "b", count: 64)), toolVersion: "t",
                          captureTypes: ["fw": "version", "battery": "uint"], checksums: ["crc": 16])
        try await runs.join(run, createdBy: "a/1")
        #expect(try await runs.run("r1")?.run.captureTypes == ["fw": "version", "battery": "uint"])
        #expect(try await runs.run("r1")?.run.checksums == ["crc": 16])
        // A run created without them (by a station of schema 2 on a line since migrated) reads as nil.
        var untyped = run
        untyped.id = "r0"
        untyped.captureTypes = nil
        try await runs.join(untyped, createdBy: "a/1")
        #expect(try await runs.run("r0")?.run.captureTypes == nil)
        // A line still at schema 2 (its stations not yet upgraded): `report --line` and `line status` read, never migrate.
        try await db.query("ALTER TABLE provision.runs DROP COLUMN capture_types")
        try await db.query("ALTER TABLE provision.runs DROP COLUMN checksums")
        let old = try #require(try await runs.run("r1"))
        #expect(old.run.id == "r1" && old.run.captureTypes == nil && old.run.checksums == nil)
        #expect(try await runs.run(nil)?.run.id != nil, "the latest run too")
    }

    @Test func stationsStartingAtOnceApplyEachMigrationExactlyOnce() async throws {
        let cluster = try await PostgresCluster.shared()
        let cs = try await cluster.createDatabase()
        let connections = try await withThrowingTaskGroup(of: PostgresConnection.self) { group in
            for _ in 0..<8 { group.addTask { try await cluster.connect(cs) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        defer { connections.forEach { $0.close() } }
        let results = try await withThrowingTaskGroup(of: LineSchema.MigrationResult.self) { group in
            for c in connections { group.addTask { try await LineSchema.migrate(c, toolVersion: "test") } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 8)
        #expect(results.filter { !$0.applied.isEmpty }.count == 1)
        #expect(results.flatMap(\.applied).sorted() == Array(1...LineSchema.version))
        #expect(results.allSatisfy { $0.to == LineSchema.version })
        let count = try await connections[0].query("SELECT count(*) AS n, count(DISTINCT version) AS d FROM provision.schema_migrations")[0]
        #expect(try count.decode("n", as: Int.self) == LineSchema.version)
        #expect(try count.decode("d", as: Int.self) == LineSchema.version)
    }

    @Test func aDatabaseWithANewerSchemaIsRefused() async throws {
        let cluster = try await PostgresCluster.shared()
        let db = try await cluster.connect(try await cluster.createDatabase())
        defer { db.close() }
        try await LineSchema.migrate(db, toolVersion: "test")
        try await db.query("INSERT INTO provision.schema_migrations (version, name, tool_version) VALUES ($1, 'from the future', 'v99')",
                           [.int(LineSchema.version + 1)])
        await #expect { try await LineSchema.migrate(db, toolVersion: "test") } throws: { error in
            guard case LineError.schemaTooNew(let database, let tool)? = error as? LineError else { return false }
            return database == LineSchema.version + 1 && tool == LineSchema.version && "\(error)".contains("newer")
        }
    }

    @Test func aRoleThatMayNotChangeTheSchemaGetsAClearError() async throws {
        let cluster = try await PostgresCluster.shared()
        let cs = try await cluster.createDatabase()
        let admin = try await cluster.connect(cs)
        defer { admin.close() }
        try await admin.query("""
            DO $$ BEGIN
                IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'line_nobody') THEN
                    CREATE ROLE line_nobody LOGIN PASSWORD 'nobody-pass';
                END IF;
            END $$
            """)
        // An ordinary role has no CREATE on the database (PostgreSQL's default), so cannot create the schema.
        let nobody = try await PostgresConnection.connect(cs.replacingOccurrences(of: "user=\(PostgresCluster.superuser) password=\(cluster.password)",
                                                                                  with: "user=line_nobody password=nobody-pass"))
        defer { nobody.close() }
        await #expect { try await LineSchema.migrate(nobody, toolVersion: "test") } throws: { error in
            guard case LineError.cannotMigrate(let database, _, let cause)? = error as? LineError else { return false }
            return database == nil && cause.sqlState == SQLState.insufficientPrivilege && !"\(error)".contains("nobody-pass")
        }
        #expect(try await LineSchema.databaseVersion(admin) == nil)
    }
}

@Suite(.serialized, .enabled(if: PostgresCluster.shouldRun, "needs PostgreSQL: run `make test`, or apt-get install postgresql"))
struct LineRoleTests {
    @Test func aStationRoleWorksTheLineAndAnAuditorRoleOnlyReads() async throws {
        let line = try await LineFixture.make(devices: 4)
        defer { line.close() }
        // An administrator creates the group roles (docs/line.md); the owner (here a superuser) grants.
        try await line.admin.query("""
            DO $$ BEGIN
                IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'provision_station') THEN CREATE ROLE provision_station NOLOGIN; END IF;
                IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'provision_auditor') THEN CREATE ROLE provision_auditor NOLOGIN; END IF;
            END $$
            """)
        try await LineSchema.grant(line.admin)
        try await line.admin.query("""
            DO $$ BEGIN
                IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'line_test_station') THEN
                    CREATE ROLE line_test_station LOGIN PASSWORD 'station-pass' IN ROLE provision_station;
                END IF;
                IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'line_test_auditor') THEN
                    CREATE ROLE line_test_auditor LOGIN PASSWORD 'auditor-pass' IN ROLE provision_auditor;
                END IF;
            END $$
            """)
        let superuser = "user=\(PostgresCluster.superuser) password=\(line.cluster.password)"
        let stationCS = try ConnectionString(line.connectionString.replacingOccurrences(of: superuser, with: "user=line_test_station password=station-pass"))
        let auditorCS = line.connectionString.replacingOccurrences(of: superuser, with: "user=line_test_auditor password=auditor-pass")

        // The station role joins, claims, announces and records.
        let station = try await LineStation.join(stationCS, run: line.run,
                                                 station: LineStationInfo(id: "s/1", name: "s", host: "h", adapters: [], toolVersion: "test"),
                                                 devices: line.devices)
        let claims = try await station.claim(among: line.devices, limit: 2)
        try await station.recordIntent(LineIntent(device: claims[0].device, attempt: claims[0].attempt, stepIndex: 7, step: "set configuration"))
        #expect(try await station.recordOutcome(LineFixture.outcome(claims[0])) == .succeeded)
        // It cannot rewrite history.
        let stationDB = try await PostgresConnection.connect(stationCS)
        defer { stationDB.close() }
        for attempt in [{ try await stationDB.query("DELETE FROM provision.outcomes") },
                        { try await stationDB.query("UPDATE provision.outcomes SET outcome = 'failed'") },
                        { try await stationDB.query("DELETE FROM provision.devices") }] {
            await #expect { try await attempt() } throws: { error in (error as? PostgresError)?.sqlState == SQLState.insufficientPrivilege }
        }

        // The auditor reads the report view and nothing else is allowed.
        let auditor = try await PostgresConnection.connect(auditorCS)
        defer { auditor.close() }
        let rows = try await auditor.query("SELECT device_id, state FROM provision.device_report WHERE run_id = $1 ORDER BY device_id",
                                           [.text(line.run.id)])
        #expect(try rows.map { try $0.decode("state", as: String.self) } == ["succeeded", "claimed", "pending", "pending"])
        await #expect { try await auditor.query("UPDATE provision.devices SET state = 'pending'") } throws: { error in
            (error as? PostgresError)?.sqlState == SQLState.insufficientPrivilege
        }
        await #expect { try await LineClaims(connection: auditor, run: line.run.id, station: "s/1").claim(among: line.devices, limit: 1, lease: .seconds(5)) } throws: { error in
            (error as? PostgresError)?.sqlState == SQLState.insufficientPrivilege
        }
    }
}
