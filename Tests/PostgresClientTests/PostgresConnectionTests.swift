import Foundation
import PostgresClient
import TestSupport
import Testing

/// A fresh database on the shared test cluster, a connection to it, and an admin connection beside it.
struct TestDatabase {
    let cluster: PostgresCluster
    let connectionString: String
    let db: PostgresConnection
    let admin: PostgresConnection

    static func make(defaultTimeout: Duration = .seconds(30)) async throws -> TestDatabase {
        let cluster = try await PostgresCluster.shared()
        let cs = try await cluster.createDatabase()
        let db = try await PostgresConnection.connect(ConnectionString(cs), timeout: .seconds(30), defaultTimeout: defaultTimeout)
        let admin = try await cluster.connect(cs)
        return TestDatabase(cluster: cluster, connectionString: cs, db: db, admin: admin)
    }

    func close() {
        db.close()
        admin.close()
    }

    /// Runs `statement` on `db` and returns once it is executing on the server: `db` first takes
    /// advisory lock 4242 and the admin waits for it; the statement's first act must be
    /// `pg_advisory_unlock(4242)`, which lets the admin's wait return.
    func whileRunning(_ statement: @escaping @Sendable (PostgresConnection) async throws -> Void,
                      timeout: Duration = .seconds(30)) async throws -> Task<Void, any Error> {
        try await db.query("SELECT pg_advisory_lock(4242)")
        let db = self.db
        let task = Task { try await statement(db) }
        try await admin.query("SELECT pg_advisory_lock(4242), pg_advisory_unlock(4242)", timeout: timeout)
        return task
    }
}

@Suite(.enabled(if: PostgresCluster.shouldRun, "needs PostgreSQL: run `make test`, or apt-get install postgresql"))
struct PostgresConnectionTests {
    @Test func aParameterisedQueryRoundTripsValues() async throws {
        let t = try await TestDatabase.make()
        defer { t.close() }
        let rows = try await t.db.query("SELECT $1::text AS t, $2::integer AS i, $3::boolean AS b, NULL::text AS n, $4::float8 AS d, $5::timestamptz AS at",
                                        [.text("it's \"quoted\" \\ ünïcode; DROP TABLE x; --"), .int(42), .bool(true), .double(2.5),
                                         .timestamp(Date(timeIntervalSince1970: 1_796_072_994.25))])
        #expect(rows.count == 1)
        #expect(try rows[0].decode("t", as: String.self) == "it's \"quoted\" \\ ünïcode; DROP TABLE x; --")
        #expect(try rows[0].decode("i", as: Int.self) == 42)
        #expect(try rows[0].decode("b", as: Bool.self) == true)
        #expect(try rows[0].decodeIfPresent("n", as: String.self) == nil)
        #expect(try rows[0].decode("d", as: Double.self) == 2.5)
        #expect(try rows[0].decode("at", as: Date.self).timeIntervalSince1970 == 1_796_072_994.25)
    }

    @Test func arrayParametersArriveElementByElement() async throws {
        let t = try await TestDatabase.make()
        defer { t.close() }
        let items = ["a", "b,c", "{\"q\"}", "back\\slash", "", "NULL"]
        let rows = try await t.db.query("SELECT x, n FROM unnest($1::text[], $2::integer[]) WITH ORDINALITY AS u(x, n, o) ORDER BY o",
                                        [.textArray(items + ["z"]), .array([.int(1), .null, .int(3), .int(4), .int(5), .int(6), .int(7)])])
        #expect(try rows.map { try $0.decodeIfPresent("x", as: String.self) } == items + ["z"])
        #expect(try rows.map { try $0.decodeIfPresent("n", as: Int.self) } == [1, nil, 3, 4, 5, 6, 7])
    }

    @Test func decodingErrorsNameTheColumnAndNeverTrap() async throws {
        let t = try await TestDatabase.make()
        defer { t.close() }
        let rows = try await t.db.query("SELECT 'x'::text AS word, NULL::integer AS missing, 12::integer AS number")
        let row = rows[0]
        for attempt in [{ _ = try row.decode("word", as: Int.self) }, { _ = try row.decode("missing", as: Int.self) },
                        { _ = try row.decode("nosuch", as: Int.self) }, { _ = try row.decode("number", as: Date.self) }] {
            do {
                try attempt()
                Issue.record("decoded")
            } catch let error as PostgresError {
                #expect(error.kind == .decoding)
                #expect(error.column != nil)
                #expect(error.description.contains("\"\(error.column ?? "")\""))
            }
        }
    }

    @Test func aServerErrorKeepsItsSQLSTATEAndTheConnectionStaysUsable() async throws {
        let t = try await TestDatabase.make()
        defer { t.close() }
        await #expect { try await t.db.query("SELECT 1 / $1::integer", [.int(0)]) } throws: { error in
            let e = error as? PostgresError
            return e?.kind == .server && e?.sqlState == "22012" && e?.message == "division by zero" && e?.severity == "ERROR"
        }
        try await t.db.query("CREATE TABLE u (k text CONSTRAINT u_key PRIMARY KEY)")
        try await t.db.query("INSERT INTO u VALUES ($1)", [.text("a")])
        await #expect { try await t.db.query("INSERT INTO u VALUES ($1)", [.text("a")]) } throws: { error in
            let e = error as? PostgresError
            return e?.sqlState == SQLState.uniqueViolation && e?.constraint == "u_key" && e?.detail?.contains("(k)=(a)") == true
        }
        #expect(try await t.db.query("SELECT count(*) AS n FROM u")[0].decode("n", as: Int.self) == 1)
    }

    @Test func aNULCharacterInAParameterIsRefusedBeforeAnythingIsSent() async throws {
        let t = try await TestDatabase.make()
        defer { t.close() }
        let before = t.db.requestsSent
        await #expect { try await t.db.query("SELECT $1::text", [.text("a\u{0}b")]) } throws: { error in
            (error as? PostgresError)?.kind == .invalidParameter && "\(error)".contains("$1")
        }
        #expect(t.db.requestsSent == before)
    }

    @Test func aPipelineIsOneRoundTripAndAllOrNothing() async throws {
        let t = try await TestDatabase.make()
        defer { t.close() }
        try await t.db.query("CREATE TABLE p (k integer PRIMARY KEY)")
        let before = t.db.requestsSent
        let results = try await t.db.pipeline([
            PostgresStatement("INSERT INTO p VALUES ($1)", [.int(1)]),
            PostgresStatement("INSERT INTO p VALUES ($1)", [.int(2)]),
            PostgresStatement("SELECT count(*) AS n FROM p"),
        ], label: "three statements")
        #expect(t.db.requestsSent == before + 1)
        #expect(results.count == 3)
        #expect(results[0].rowsAffected == 1)
        #expect(try results[2][0].decode("n", as: Int.self) == 2)
        // The second statement fails: the first is rolled back with it, the third never runs.
        await #expect { try await t.db.pipeline([
            PostgresStatement("INSERT INTO p VALUES ($1)", [.int(3)]),
            PostgresStatement("INSERT INTO p VALUES ($1)", [.int(1)]),
            PostgresStatement("INSERT INTO p VALUES ($1)", [.int(4)]),
        ], label: "failing pipeline") } throws: { error in
            (error as? PostgresError)?.sqlState == SQLState.uniqueViolation
        }
        let keys = try await t.admin.query("SELECT k FROM p ORDER BY k").map { try $0.decode("k", as: Int.self) }
        #expect(keys == [1, 2])
    }

    @Test func aPreparedStatementIsParsedOnceAConnectionAndAFailedPreparationFailsItsRequest() async throws {
        let t = try await TestDatabase.make()
        defer { t.close() }
        let twice = PostgresStatement("SELECT $1::integer * 2 AS n", [.int(21)]).prepared()
        for _ in 0..<3 {
            let results = try await t.db.pipeline([twice, PostgresStatement("SELECT 1 AS one")], label: "prepared")
            #expect(results.count == 2)
            #expect(try results[0][0].decode("n", as: Int.self) == 42)
        }
        let names = try await t.db.query("SELECT name FROM pg_prepared_statements").map { try $0.decode("name", as: String.self) }
        #expect(names == [twice.preparedName], "prepared once, run by name after")
        // A preparation the server refuses is the error of its request; the connection goes on.
        await #expect { try await t.db.pipeline([PostgresStatement("SELECT 1 AS one"), PostgresStatement("SELEC nonsense").prepared()],
                                                label: "bad preparation") } throws: { error in
            (error as? PostgresError)?.sqlState == "42601"
        }
        let again = try await t.db.pipeline([twice], label: "after a failed preparation")
        #expect(try again[0][0].decode("n", as: Int.self) == 42)
    }

    @Test func aTransactionCommitsWhenItsBodyReturnsAndRollsBackWhenItThrows() async throws {
        let t = try await TestDatabase.make()
        defer { t.close() }
        try await t.db.query("CREATE TABLE x (k integer)")
        try await t.db.transaction { tx in
            try await tx.query("INSERT INTO x VALUES (1)")
            try await tx.query("INSERT INTO x VALUES (2)")
        }
        struct Oops: Error {}
        await #expect(throws: Oops.self) {
            try await t.db.transaction { tx in
                try await tx.query("INSERT INTO x VALUES (3)")
                throw Oops()
            }
        }
        // A statement failed and the body swallowed the error: COMMIT is a rollback, reported as an error.
        await #expect { try await t.db.transaction { tx in
            try await tx.query("INSERT INTO x VALUES (4)")
            _ = try? await tx.query("SELECT 1 / 0")
        } } throws: { error in
            (error as? PostgresError)?.sqlState == SQLState.inFailedTransaction
        }
        // The first statement timed out (the body went on regardless): nothing after it runs outside the
        // transaction, and the commit reports the failure.
        await #expect { try await t.db.transaction { tx in
            _ = try? await tx.query("SELECT pg_sleep(30)", timeout: .milliseconds(200))
            try await tx.query("INSERT INTO x VALUES (5)")
        } } throws: { error in
            (error as? PostgresError)?.sqlState == SQLState.inFailedTransaction
        }
        let keys = try await t.admin.query("SELECT k FROM x ORDER BY k").map { try $0.decode("k", as: Int.self) }
        #expect(keys == [1, 2])
    }

    @Test func aStatementPastItsDeadlineIsCancelledOnTheServerAndTheConnectionGoesOn() async throws {
        let t = try await TestDatabase.make()
        defer { t.close() }
        await #expect { try await t.db.query("SELECT pg_sleep(60)", timeout: .milliseconds(300)) } throws: { error in
            let e = error as? PostgresError
            return e?.kind == .timeout && e?.limit == .milliseconds(300)
        }
        // The next statement runs on the same connection: the sleep was cancelled, not waited out.
        #expect(try await t.db.query("SELECT 7 AS seven", timeout: .seconds(30))[0].decode("seven", as: Int.self) == 7)
        #expect(!t.db.isClosed)
        let state = try await t.admin.query("SELECT state FROM pg_stat_activity WHERE pid = $1", [.int(Int(t.db.backendPID))])
        #expect(try state.first?.decode("state", as: String.self) == "idle")
    }

    @Test func aCancelledTaskCancelsItsStatementOnTheServer() async throws {
        let t = try await TestDatabase.make()
        defer { t.close() }
        let task = try await t.whileRunning { db in
            try await db.query("SELECT pg_advisory_unlock(4242), pg_sleep(60)", timeout: .seconds(120))
        }
        task.cancel()
        await #expect { try await task.value } throws: { error in (error as? PostgresError)?.kind == .cancelled }
        #expect(try await t.db.query("SELECT 8 AS eight", timeout: .seconds(30))[0].decode("eight", as: Int.self) == 8)
    }

    @Test func aTerminatedBackendIsAConnectionLossForTheStatementInFlight() async throws {
        let t = try await TestDatabase.make()
        defer { t.close() }
        let task = try await t.whileRunning { db in
            try await db.query("SELECT pg_advisory_unlock(4242), pg_sleep(60)", timeout: .seconds(120))
        }
        try await t.admin.query("SELECT pg_terminate_backend($1)", [.int(Int(t.db.backendPID))])
        await #expect { try await task.value } throws: { error in
            let e = error as? PostgresError
            return e?.kind == .connectionLost && e?.isConnectionLoss == true && e?.sqlState == SQLState.adminShutdown
        }
        await #expect { try await t.db.query("SELECT 1") } throws: { error in (error as? PostgresError)?.kind == .connectionLost }
        #expect(t.db.isClosed)
    }

    @Test func aConnectionCutMidTransactionLeavesNothingHalfWritten() async throws {
        let t = try await TestDatabase.make()
        defer { t.close() }
        try await t.db.query("CREATE TABLE y (k integer)")
        let admin = t.admin
        let pid = t.db.backendPID
        await #expect { try await t.db.transaction { tx in
            try await tx.query("INSERT INTO y VALUES (1)")
            try await tx.query("INSERT INTO y VALUES (2)")
            try await admin.query("SELECT pg_terminate_backend($1)", [.int(Int(pid))])
            try await tx.query("INSERT INTO y VALUES (3)")
        } } throws: { error in
            (error as? PostgresError)?.isConnectionLoss == true
        }
        #expect(try await t.admin.query("SELECT count(*) AS n FROM y")[0].decode("n", as: Int.self) == 0)
    }

    @Test func aWrongPasswordIsAConnectFailureThatNeverShowsThePassword() async throws {
        let cluster = try await PostgresCluster.shared()
        let cs = cluster.connectionString(password: "wrong-Pa55word-z9")
        await #expect { try await PostgresConnection.connect(cs, timeout: .seconds(30)) } throws: { error in
            let e = error as? PostgresError
            let text = "\(error)"
            return e?.kind == .connectFailed && !text.contains("wrong-Pa55word-z9") && !text.contains(cluster.password)
                && text.contains("password=***") && text.contains("authentication failed")
        }
    }

    @Test func aClosedPortIsAConnectFailure() async throws {
        let port = try PostgresCluster.freePort()
        await #expect { try await PostgresConnection.connect("host=127.0.0.1 port=\(port) dbname=x user=y password=p", timeout: .seconds(30)) } throws: { error in
            (error as? PostgresError)?.kind == .connectFailed
        }
    }

    @Test func aPasswordFileAuthenticatesWithoutAPasswordInTheString() async throws {
        let cluster = try await PostgresCluster.shared()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pgpass-\(UUID().uuidString)").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data("127.0.0.1:\(cluster.port):*:\(PostgresCluster.superuser):\(cluster.password)\n".utf8),
                                               attributes: [.posixPermissions: 0o600]))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let db = try await PostgresConnection.connect("host=127.0.0.1 port=\(cluster.port) dbname=postgres user=\(PostgresCluster.superuser) passfile=\(path)",
                                                      timeout: .seconds(30))
        defer { db.close() }
        #expect(try await db.query("SELECT current_user AS u")[0].decode("u", as: String.self) == PostgresCluster.superuser)
    }

    @Test func largeParametersAndResultsGoThroughTheNonBlockingSocket() async throws {
        let t = try await TestDatabase.make()
        defer { t.close() }
        // Far more than a socket buffer holds: the request goes out in several writes, waiting for the socket.
        let big = String(repeating: "0123456789abcdef", count: 512 * 1024)
        let rows = try await t.db.query("SELECT length($1::text) AS n, md5($1::text) AS h, repeat('x', 4000000) AS back", [.text(big)])
        #expect(try rows[0].decode("n", as: Int.self) == big.utf8.count)
        #expect(try rows[0].decode("back", as: String.self).utf8.count == 4_000_000)
    }

    @Test(.enabled(if: PostgresCluster.tlsAvailable, "needs the openssl command to make a test certificate"))
    func tlsIsUsedWhenTheConnectionStringAsksForIt() async throws {
        let cluster = try await PostgresCluster.shared()
        let db = try await PostgresConnection.connect(cluster.connectionString() + " sslmode=require", timeout: .seconds(30))
        defer { db.close() }
        let row = try await db.query("SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()")[0]
        #expect(try row.decode("ssl", as: Bool.self))
        #expect(try row.decodeIfPresent("version", as: String.self)?.hasPrefix("TLS") == true)
        let big = String(repeating: "z", count: 6_000_000)
        #expect(try await db.query("SELECT length($1::text) AS n", [.text(big)])[0].decode("n", as: Int.self) == 6_000_000)
        // A certificate nobody vouches for is refused when the string asks for verification.
        await #expect { try await PostgresConnection.connect(cluster.connectionString() + " sslmode=verify-full", timeout: .seconds(30)) } throws: { error in
            (error as? PostgresError)?.kind == .connectFailed
        }
    }

    @Test func sessionsUseUTCAndISODatesWhateverTheServerDefault() async throws {
        let t = try await TestDatabase.make()
        defer { t.close() }
        let row = try await t.db.query("SELECT current_setting('TimeZone') AS tz, '2026-01-02 03:04:05.5+02'::timestamptz AS at")[0]
        #expect(try row.decode("tz", as: String.self) == "UTC")
        #expect(try row.decode("at", as: Date.self).timeIntervalSince1970 == 1_767_315_845.5)
    }
}

@Suite(.serialized, .enabled(if: PostgresCluster.shouldRun, "needs PostgreSQL: run `make test`, or apt-get install postgresql"))
struct PostgresRestartTests {
    @Test func aServerRestartIsAConnectionLossAndANewConnectionWorks() async throws {
        try await PostgresCluster.with { cluster in
            let cs = cluster.connectionString()
            let db = try await PostgresConnection.connect(cs, timeout: .seconds(30))
            try await db.query("CREATE TABLE r (k integer)")
            try await cluster.restart(mode: "fast")
            await #expect { try await db.query("INSERT INTO r VALUES (1)") } throws: { error in
                (error as? PostgresError)?.isConnectionLoss == true
            }
            let again = try await PostgresConnection.connect(cs, timeout: .seconds(30))
            defer { again.close() }
            try await again.query("INSERT INTO r VALUES (2)")
            #expect(try await again.query("SELECT count(*) AS n FROM r")[0].decode("n", as: Int.self) == 1)
            try await cluster.restart(mode: "immediate")
            await #expect { try await again.query("SELECT 1") } throws: { error in
                (error as? PostgresError)?.isConnectionLoss == true
            }
        }
    }
}
