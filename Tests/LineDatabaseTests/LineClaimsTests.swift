import Foundation
import LineDatabase
import PostgresClient
import Support
import TestSupport
import Testing

@Suite(.enabled(if: PostgresCluster.shouldRun, "needs PostgreSQL: run `make test`, or apt-get install postgresql"))
struct LineClaimsTests {
    @Test func eightStationsOnAThousandDevicesClaimEachDeviceExactlyOnce() async throws {
        let line = try await LineFixture.make(devices: 1000)
        defer { line.close() }
        // Every station joins first, so that all of them claim at once.
        let stations = try await withThrowingTaskGroup(of: LineStation.self) { group in
            for s in 0..<8 { group.addTask { try await line.station("station-\(s)") } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        // Every station hears every device, each in its own order; each works a window of what it hears.
        let claimed = try await withThrowingTaskGroup(of: [LineClaim].self) { group in
            for (s, station) in stations.enumerated() {
                group.addTask {
                    var rng = SplitMix64(seed: UInt64(s + 1))
                    var heard = line.devices
                    heard.shuffle(using: &rng)
                    var mine: [LineClaim] = []
                    while !heard.isEmpty {
                        let window = Array(heard.prefix(32))
                        let claims = try await station.claim(among: window, limit: 4)
                        mine += claims
                        try await withThrowingTaskGroup(of: Void.self) { devices in
                            for c in claims {
                                devices.addTask {
                                    try await station.recordIntent(LineIntent(device: c.device, attempt: c.attempt, stepIndex: 7, step: "set configuration"))
                                    try await station.recordOutcome(LineFixture.outcome(c))
                                }
                            }
                            try await devices.waitForAll()
                        }
                        // Claims come in window order, skipping devices others hold or finished: what was
                        // passed over is someone else's, so the window moves past it.
                        let last = claims.last.flatMap { c in window.firstIndex(of: c.device) } ?? (window.count - 1)
                        heard.removeFirst(claims.count < 4 ? window.count : last + 1)
                    }
                    try await station.leave()
                    return mine
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(claimed.count == 1000)
        #expect(Set(claimed.map(\.device)).count == 1000)
        #expect(claimed.allSatisfy { $0.attempt == 1 })
        let summary = try await line.admin.query("""
            SELECT count(*) AS devices, count(*) FILTER (WHERE state = 'succeeded') AS succeeded, max(attempt) AS max_attempt,
                   (SELECT count(*) FROM provision.outcomes WHERE run_id = $1) AS outcomes,
                   (SELECT count(DISTINCT device_id) FROM provision.outcomes WHERE run_id = $1) AS outcome_devices,
                   (SELECT count(*) FROM provision.intents WHERE run_id = $1) AS intents,
                   (SELECT count(DISTINCT station_id) FROM provision.outcomes WHERE run_id = $1) AS stations
            FROM provision.devices WHERE run_id = $1
            """, [.text(line.run.id)])[0]
        #expect(try summary.decode("devices", as: Int.self) == 1000)
        #expect(try summary.decode("succeeded", as: Int.self) == 1000)
        #expect(try summary.decode("max_attempt", as: Int.self) == 1)
        #expect(try summary.decode("outcomes", as: Int.self) == 1000)
        #expect(try summary.decode("outcome_devices", as: Int.self) == 1000)
        #expect(try summary.decode("intents", as: Int.self) == 1000)
        #expect(try summary.decode("stations", as: Int.self) > 1)
    }

    @Test func anExpiredLeaseGoesBackToPendingOrToNeedsReviewAfterAnIntent() async throws {
        let line = try await LineFixture.make(devices: 3)
        defer { line.close() }
        let a = try await line.station("a")
        let b = try await line.station("b")
        let claims = try await a.claim(among: line.devices, limit: 3)
        #expect(claims.map(\.device) == line.devices)
        try await a.recordIntent(LineIntent(device: claims[1].device, attempt: claims[1].attempt, stepIndex: 7, step: "set configuration"))
        try await line.expireLeases(of: a.station.id)
        // Before anyone sweeps, the status view already shows what the sweep will make of them.
        let status = try await LineRuns(connection: line.admin).status(run: line.run.id)
        #expect(status.counts == [.pending: 2, .needsReview: 1])
        #expect(status.stations.first { $0.id == a.station.id }?.leases == 0)
        // Station b sweeps: SN-00000 and SN-00002 are pending again, SN-00001 needs review.
        let swept = try await LineClaims(connection: line.admin, run: line.run.id, station: b.station.id).sweepExpired()
        #expect(Set(swept.map(\.device)) == Set(line.devices))
        let d0 = try await line.device("SN-00000")
        #expect(d0.state == .pending && d0.owner == nil && d0.attempt == 1)
        let d1 = try await line.device("SN-00001")
        #expect(d1.state == .needsReview && d1.intent == "set configuration" && d1.review == "lease_expired_after_intent")
        // The pending ones are claimed again (attempt 2); the one under review is not.
        let again = try await b.claim(among: line.devices, limit: 3)
        #expect(again.map(\.device) == ["SN-00000", "SN-00002"])
        #expect(again.allSatisfy { $0.attempt == 2 })
    }

    @Test func aStationWhoseLeaseWasTakenOverCannotWriteAndOverwritesNothing() async throws {
        let line = try await LineFixture.make(devices: 1)
        defer { line.close() }
        let a = try await line.station("a")
        let b = try await line.station("b")
        let first = try await a.claim(among: line.devices, limit: 1)
        try #require(first.count == 1)
        try await line.expireLeases(of: a.station.id)
        // b's claim sweeps the expired lease and takes the device (attempt 2).
        let second = try await b.claim(among: line.devices, limit: 1)
        #expect(second.map(\.attempt) == [2])
        // a can neither announce a write nor record an outcome: lease lost, naming who holds it now.
        await #expect { try await a.recordIntent(LineIntent(device: "SN-00000", attempt: 1, stepIndex: 7, step: "set configuration")) } throws: { error in
            guard case LineError.leaseLost(let loss)? = error as? LineError else { return false }
            return loss.owner == b.station.id && loss.currentAttempt == 2 && loss.state == .claimed
        }
        await #expect { try await a.recordOutcome(LineFixture.outcome(first[0], .failed)) } throws: { error in
            guard case LineError.leaseLost(let loss)? = error as? LineError else { return false }
            return "\(loss)".contains("lease lost") && "\(loss)".contains(b.station.id)
        }
        #expect(try await b.recordOutcome(LineFixture.outcome(second[0])) == .succeeded)
        let rows = try await line.outcomes("SN-00000")
        #expect(rows.count == 1)
        #expect(rows.first?.station == b.station.id)
        #expect(rows.first?.attempt == 2)
        #expect(rows.first?.outcome == "succeeded")
        // A late outcome of a's after b finished is refused too.
        await #expect(throws: LineError.self) { try await a.recordOutcome(LineFixture.outcome(first[0])) }
        #expect(try await line.outcomes("SN-00000").count == 1)
    }

    @Test func anExpiredLeaseNotYetSweptStillTakesTheOutcomeButNoNewIntentOrRenewal() async throws {
        let line = try await LineFixture.make(devices: 2)
        defer { line.close() }
        let a = try await line.station("a")
        let claims = try await a.claim(among: line.devices, limit: 2)
        try await line.expireLeases(of: a.station.id)
        await #expect(throws: LineError.self) {
            try await a.recordIntent(LineIntent(device: claims[0].device, attempt: claims[0].attempt, stepIndex: 7, step: "set configuration"))
        }
        let renewal = try await a.renew()
        #expect(renewal.renewed.isEmpty)
        #expect(renewal.lost == ["SN-00001"])
        // The work a station already did is still recorded while nobody else has the device.
        #expect(try await LineClaims(connection: line.admin, run: line.run.id, station: a.station.id)
            .write(outcomes: [LineFixture.outcome(claims[1])]).outcomes["SN-00001"] == .recorded(.succeeded))
    }

    @Test func renewingExtendsEveryLeaseAStationHolds() async throws {
        let line = try await LineFixture.make(devices: 3)
        defer { line.close() }
        let a = try await line.station("a", lease: .seconds(5))
        let claims = try await a.claim(among: line.devices, limit: 2)
        let renewal = try await a.renew()
        #expect(Set(renewal.renewed.map(\.device)) == Set(claims.map(\.device)))
        #expect(renewal.lost.isEmpty)
        for (before, after) in zip(claims.sorted { $0.device < $1.device }, renewal.renewed.sorted { $0.device < $1.device }) {
            #expect(after.leaseExpires >= before.leaseExpires)
            #expect(after.attempt == before.attempt)
        }
    }

    @Test func anInterruptedDeviceIsPendingAgainUnlessItsIntentStands() async throws {
        let line = try await LineFixture.make(devices: 2)
        defer { line.close() }
        let a = try await line.station("a")
        let claims = try await a.claim(among: line.devices, limit: 2)
        try await a.recordIntent(LineIntent(device: claims[1].device, attempt: claims[1].attempt, stepIndex: 7, step: "set configuration"))
        #expect(try await a.recordOutcome(LineFixture.outcome(claims[0], .interrupted)) == .pending)
        #expect(try await a.recordOutcome(LineFixture.outcome(claims[1], .interrupted)) == .needsReview)
        #expect(try await line.device("SN-00001").review == "interrupted_after_intent")
        #expect(try await a.claim(among: line.devices, limit: 2).map(\.device) == ["SN-00000"])
    }

    @Test func releasingGivesDevicesBackAndKeepsAStandingIntent() async throws {
        let line = try await LineFixture.make(devices: 3)
        defer { line.close() }
        let a = try await line.station("a")
        let claims = try await a.claim(among: line.devices, limit: 3)
        try await a.recordIntent(LineIntent(device: claims[2].device, attempt: claims[2].attempt, stepIndex: 7, step: "set configuration"))
        let states = try await a.release(["SN-00001", "SN-00002"])
        #expect(states == ["SN-00001": .pending, "SN-00002": .needsReview])
        #expect(try await line.device("SN-00000").state == .claimed)
        #expect(await a.held.keys.sorted() == ["SN-00000"])
    }

    @Test func aGroupOfWritesIsOneRoundTripWithAResultPerDevice() async throws {
        let line = try await LineFixture.make(devices: 60)
        defer { line.close() }
        let a = try await line.station("a")
        let b = try await line.station("b")
        let mine = try await a.claim(among: Array(line.devices.prefix(50)), limit: 50)
        let theirs = try await b.claim(among: Array(line.devices.suffix(10)), limit: 10)
        let db = try await line.cluster.connect(line.connectionString)
        defer { db.close() }
        let claims = LineClaims(connection: db, run: line.run.id, station: a.station.id)
        let before = db.requestsSent
        let results = try await claims.write(
            intents: mine.prefix(25).map { LineIntent(device: $0.device, attempt: $0.attempt, stepIndex: 7, step: "set configuration") }
                + theirs.prefix(2).map { LineIntent(device: $0.device, attempt: $0.attempt, stepIndex: 7, step: "set configuration") },
            outcomes: mine.suffix(25).map { LineFixture.outcome($0) } + theirs.suffix(3).map { LineFixture.outcome($0) })
        #expect(db.requestsSent == before + 1)
        #expect(results.intents.count == 27)
        #expect(results.outcomes.count == 28)
        #expect(results.intents.values.filter { $0 == .recorded(.claimed) }.count == 25)
        #expect(results.outcomes.values.filter { $0 == .recorded(.succeeded) }.count == 25)
        for c in theirs.prefix(2) {
            guard case .leaseLost(let loss)? = results.intents[c.device] else { Issue.record("\(c.device) not refused"); continue }
            #expect(loss.owner == b.station.id)
        }
        for c in theirs.suffix(3) {
            guard case .leaseLost? = results.outcomes[c.device] else { Issue.record("\(c.device) not refused"); continue }
        }
        // Sent again (as after a lost connection): the outcomes are already there, the intents still held.
        let retry = try await claims.write(
            intents: mine.prefix(25).map { LineIntent(device: $0.device, attempt: $0.attempt, stepIndex: 7, step: "set configuration") },
            outcomes: mine.suffix(25).map { LineFixture.outcome($0) })
        #expect(retry.outcomes.values.allSatisfy { $0 == .alreadyRecorded })
        #expect(retry.intents.values.allSatisfy { $0 == .recorded(.claimed) })
        let counts = try await line.admin.query("""
            SELECT (SELECT count(*) FROM provision.outcomes WHERE run_id = $1) AS outcomes,
                   (SELECT count(*) FROM provision.intents WHERE run_id = $1) AS intents
            """, [.text(line.run.id)])[0]
        #expect(try counts.decode("outcomes", as: Int.self) == 25)
        #expect(try counts.decode("intents", as: Int.self) == 25)
    }

    @Test func manyDevicesFinishingAtOnceAreAllRecordedThroughGroupCommit() async throws {
        let line = try await LineFixture.make(devices: 300)
        defer { line.close() }
        let a = try await line.station("a")
        let claims = try await a.claim(among: line.devices, limit: 300)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for c in claims {
                group.addTask {
                    try await a.recordIntent(LineIntent(device: c.device, attempt: c.attempt, stepIndex: 7, step: "set configuration"))
                    try await a.recordOutcome(LineFixture.outcome(c))
                }
            }
            try await group.waitForAll()
        }
        #expect(await a.entriesWritten == 600)
        #expect(await a.held.isEmpty)
        let status = try await LineRuns(connection: line.admin).status(run: line.run.id)
        #expect(status.counts == [.succeeded: 300])
        #expect(status.outcomesLastMinute == 300)
    }

    @Test func aStationsIdentityOnEachAdapterIsWhatLineStatusShows() async throws {
        let line = try await LineFixture.make(devices: 2)
        defer { line.close() }
        let a = try await line.station("a")
        let runs = LineRuns(connection: line.admin)
        // Before its adapters are open the station has none.
        #expect(try await runs.status(run: line.run.id).stations.first?.identities == [])
        try await a.setIdentities(["C4:5A:00:00:00:01"])
        let status = try await runs.status(run: line.run.id)
        #expect(status.stations.map(\.identities) == [["C4:5A:00:00:00:01"]])
        await a.close()
    }

    @Test func aRunIsJoinedOnlyWithTheSameWorkflowAndInventory() async throws {
        let line = try await LineFixture.make(devices: 1)
        defer { line.close() }
        let runs = LineRuns(connection: line.admin)
        #expect(try await runs.join(line.run, createdBy: "other") == false)
        var changed = line.run
        changed.inventory.sha256 = String(repeating: "c", count: 64)
        await #expect { try await runs.join(changed, createdBy: "other") } throws: { error in
            guard case LineError.runMismatch(_, let what, _, _)? = error as? LineError else { return false }
            return what == "inventory"
        }
    }

    @Test func aConnectionCutMidWriteLeavesNothingHalfWrittenAndTheRetryWritesOnce() async throws {
        let line = try await LineFixture.make(devices: 2)
        defer { line.close() }
        let a = try await line.station("a")
        let claims = try await a.claim(among: line.devices, limit: 2)
        let db = try await line.cluster.connect(line.connectionString)
        defer { db.close() }
        let station = LineClaims(connection: db, run: line.run.id, station: a.station.id)
        // Another session holds the second device's row: the write updates the first, then waits.
        let holder = try await line.cluster.connect(line.connectionString)
        defer { holder.close() }
        let outcomes = claims.map { LineFixture.outcome($0) }
        try await holder.transaction { tx in
            try await tx.query("SELECT device_id FROM provision.devices WHERE run_id = $1 AND device_id = $2 FOR UPDATE",
                               [.text(line.run.id), .text("SN-00001")])
            let write = Task { try await station.write(outcomes: outcomes) }
            try await line.admin.query("SELECT pg_terminate_backend($1)", [.int(Int(db.backendPID))])
            await #expect { try await write.value } throws: { error in (error as? PostgresError)?.isConnectionLoss == true }
        }
        // Nothing of the cut transaction remains: both devices still held by a, no outcome rows.
        #expect(try await line.device("SN-00000").state == .claimed)
        #expect(try await line.device("SN-00001").state == .claimed)
        #expect(try await line.outcomes("SN-00000").isEmpty)
        // The station sends the same outcomes again on a new connection: written once.
        let again = try await line.cluster.connect(line.connectionString)
        defer { again.close() }
        let retry = try await LineClaims(connection: again, run: line.run.id, station: a.station.id).write(outcomes: outcomes)
        #expect(retry.outcomes == ["SN-00000": .recorded(.succeeded), "SN-00001": .recorded(.succeeded)])
        #expect(try await line.outcomes("SN-00000").count == 1)
        #expect(try await line.outcomes("SN-00001").count == 1)
    }

    @Test func aClaimPastItsDeadlineIsCancelledAndTheNextOneWorks() async throws {
        let line = try await LineFixture.make(devices: 2)
        defer { line.close() }
        let db = try await line.cluster.connect(line.connectionString)
        defer { db.close() }
        let a = try await line.station("a")
        let claims = LineClaims(connection: db, run: line.run.id, station: a.station.id, timeout: .milliseconds(500))
        let holder = try await line.cluster.connect(line.connectionString)
        defer { holder.close() }
        try await holder.transaction { tx in
            try await tx.query("LOCK TABLE provision.devices IN ACCESS EXCLUSIVE MODE")
            await #expect { try await claims.claim(among: line.devices, limit: 1, lease: .seconds(60)) } throws: { error in
                (error as? PostgresError)?.kind == .timeout
            }
        }
        #expect(try await claims.claim(among: line.devices, limit: 1, lease: .seconds(60)).count == 1)
    }

    @Test func theAuditViewsShowOneRowPerDeviceWithItsLatestOutcome() async throws {
        let line = try await LineFixture.make(devices: 3)
        defer { line.close() }
        let a = try await line.station("a")
        let claims = try await a.claim(among: line.devices, limit: 3)
        try await a.recordOutcome(LineFixture.outcome(claims[0], firmware: "2.4.1"))
        try await a.recordOutcome(LineFixture.outcome(claims[1], .failed, firmware: "1.9.0"))
        try await a.recordOutcome(LineFixture.outcome(claims[2], .interrupted))
        let rows = try await line.admin.query("""
            SELECT device_id, state, outcome, error_kind, firmware, station_name, record->>'outcome' AS recorded
            FROM provision.device_report WHERE run_id = $1 ORDER BY device_id
            """, [.text(line.run.id)])
        #expect(try rows.map { try $0.decode("state", as: String.self) } == ["succeeded", "failed", "pending"])
        #expect(try rows.map { try $0.decodeIfPresent("firmware", as: String.self) } == ["2.4.1", "1.9.0", "2.4.1"])
        #expect(try rows.map { try $0.decodeIfPresent("error_kind", as: String.self) } == [nil, "verify_failed", nil])
        #expect(try rows.map { try $0.decode("station_name", as: String.self) } == ["a", "a", "a"])
        #expect(try rows.map { try $0.decode("recorded", as: String.self) } == ["succeeded", "failed", "interrupted"])
        let entries = try await LineRuns(connection: line.admin).devices(run: line.run.id)
        #expect(entries.map(\.state) == [.succeeded, .failed, .pending])
        #expect(entries.allSatisfy { $0.record != nil })
    }
}

@Suite(.serialized, .enabled(if: PostgresCluster.shouldRun, "needs PostgreSQL: run `make test`, or apt-get install postgresql"))
struct LineRestartTests {
    @Test func aStationGoesOnAfterTheDatabaseRestartsAndLosesNoOutcome() async throws {
        try await PostgresCluster.with { cluster in
            let line = try await LineFixture.make(devices: 10, cluster: cluster)
            defer { line.close() }
            let a = try await line.station("a")
            let claims = try await a.claim(among: line.devices, limit: 6)
            try await a.recordOutcome(LineFixture.outcome(claims[0]))
            try await cluster.restart(mode: "immediate")
            // Whatever was in flight when the database went away failed as a connection loss; the
            // station keeps such outcomes and sends them again (the next operation connects anew).
            for c in claims.dropFirst() {
                do {
                    #expect(try await a.recordOutcome(LineFixture.outcome(c)) == .succeeded)
                } catch let error as PostgresError where error.isConnectionLoss {
                    #expect(try await a.recordOutcome(LineFixture.outcome(c)) == .succeeded)
                }
            }
            // Leases survived the restart; claiming goes on.
            #expect(try await a.claim(among: line.devices, limit: 10).count == 4)
            let admin = try await cluster.connect(line.connectionString)
            defer { admin.close() }
            let n = try await admin.query("SELECT count(*) AS n, count(DISTINCT device_id) AS d FROM provision.outcomes")[0]
            #expect(try n.decode("n", as: Int.self) == 6)
            #expect(try n.decode("d", as: Int.self) == 6)
        }
    }
}

@Suite(.enabled(if: PostgresCluster.shouldRun, "needs PostgreSQL: run `make test`, or apt-get install postgresql"))
struct LineLateOutcomeTests {
    @Test func anOutcomeAfterTheLeaseWasSweptIsRecordedWhileNobodyClaimedTheDeviceSince() async throws {
        let line = try await LineFixture.make(devices: 3)
        defer { line.close() }
        let a = try await line.station("a")
        let b = try await line.station("b")
        let claims = try await a.claim(among: line.devices, limit: 3)
        try await a.recordIntent(LineIntent(device: claims[1].device, attempt: claims[1].attempt, stepIndex: 7, step: "commit"))
        // a is cut off longer than its lease: the sweep makes SN-00000 and SN-00002 pending, SN-00001 needs review.
        try await line.expireLeases(of: a.station.id)
        _ = try await LineClaims(connection: line.admin, run: line.run.id, station: b.station.id).sweepExpired()
        #expect(try await line.device("SN-00000").state == .pending)
        #expect(try await line.device("SN-00001").state == .needsReview)
        // b claims SN-00002 before a is back.
        #expect(try await b.claim(among: ["SN-00002"], limit: 1).map(\.attempt) == [2])
        // a is back with the outcomes of the work it did: the pending one and the one under review take them
        // (a did the work and nobody else touched them); the one b holds now refuses.
        let late = try await LineClaims(connection: line.admin, run: line.run.id, station: a.station.id)
            .write(outcomes: claims.map { LineFixture.outcome($0) })
        #expect(late.outcomes["SN-00000"] == .recorded(.succeeded))
        #expect(late.outcomes["SN-00001"] == .recorded(.succeeded))
        guard case .leaseLost(let loss)? = late.outcomes["SN-00002"] else { Issue.record("SN-00002 not refused"); return }
        #expect(loss.owner == b.station.id)
        let d1 = try await line.device("SN-00001")
        #expect(d1.state == .succeeded && d1.intent == nil && d1.review == nil)
        #expect(try await line.outcomes("SN-00002").isEmpty)
        #expect(try await line.device("SN-00002").owner == b.station.id)
    }

    @Test func aLateInterruptedOutcomeLeavesADeviceUnderReviewWithItsReason() async throws {
        let line = try await LineFixture.make(devices: 1)
        defer { line.close() }
        let a = try await line.station("a")
        let claims = try await a.claim(among: line.devices, limit: 1)
        try await a.recordIntent(LineIntent(device: "SN-00000", attempt: claims[0].attempt, stepIndex: 7, step: "commit"))
        try await line.expireLeases(of: a.station.id)
        _ = try await LineClaims(connection: line.admin, run: line.run.id, station: "someone").sweepExpired()
        let late = try await LineClaims(connection: line.admin, run: line.run.id, station: a.station.id)
            .write(outcomes: [LineFixture.outcome(claims[0], .interrupted)])
        #expect(late.outcomes["SN-00000"] == .recorded(.needsReview))
        let d = try await line.device("SN-00000")
        #expect(d.review == "lease_expired_after_intent" && d.intent == "commit")
        // Nobody but the station that claimed the attempt may write it.
        let stranger = try await LineClaims(connection: line.admin, run: line.run.id, station: "stranger")
            .write(outcomes: [LineFixture.outcome(claims[0])])
        guard case .leaseLost? = stranger.outcomes["SN-00000"] else { Issue.record("a stranger's outcome was taken"); return }
        #expect(try await line.device("SN-00000").state == .needsReview)
    }

    @Test func aDeviceWhoseStationCouldNotLearnItsWriteIsUnderReviewUntilAnOperatorResolvesIt() async throws {
        let line = try await LineFixture.make(devices: 3)
        defer { line.close() }
        let a = try await line.station("a")
        let claims = try await a.claim(among: line.devices, limit: 3)
        for c in claims.prefix(2) { try await a.recordIntent(LineIntent(device: c.device, attempt: c.attempt, stepIndex: 7, step: "commit")) }
        // The station's verdict: the commit went out and its ack never came (not idempotent, no confirm).
        var unknown = LineFixture.outcome(claims[0], .failed)
        unknown.errorKind = "needs_review"
        unknown.errorStep = "commit"
        #expect(try await a.recordOutcome(unknown) == .needsReview)
        // An ordinary failure after an intent is final, as before.
        #expect(try await a.recordOutcome(LineFixture.outcome(claims[1], .failed)) == .failed)
        let d = try await line.device("SN-00000")
        #expect(d.review == "outcome_unknown" && d.intent == "commit" && d.owner == nil)
        #expect(try await line.outcomes("SN-00000").map(\.outcome) == ["failed"])
        // Not claimed again by any station.
        #expect(try await a.claim(among: line.devices, limit: 3).isEmpty)

        let runs = LineRuns(connection: line.admin)
        let entry = try #require(try await runs.device(run: line.run.id, id: "SN-00000"))
        #expect(entry.state == .needsReview && entry.reviewReason == "outcome_unknown" && entry.attempt == 1)
        // Fenced by the attempt: a stale one changes nothing.
        #expect(try await runs.resolve(run: line.run.id, device: "SN-00000", attempt: 2, as: .succeeded, note: "reads 02", by: "ana",
                                       record: #"{"id":"SN-00000","outcome":"succeeded"}"#) == false)
        #expect(try await runs.resolve(run: line.run.id, device: "SN-00000", attempt: 1, as: .succeeded, note: "reads 02", by: "ana",
                                       record: #"{"id":"SN-00000","outcome":"succeeded","review":{"by":"ana"}}"#))
        let after = try await line.device("SN-00000")
        #expect(after.state == .succeeded && after.review == nil && after.intent == nil)
        let kept = try await line.admin.query("SELECT outcome, step, review_reason, note, resolved_by, role = current_user AS mine FROM provision.resolutions WHERE run_id = $1",
                                              [.text(line.run.id)])
        #expect(kept.count == 1)
        #expect(try kept[0].decode("outcome", as: String.self) == "succeeded" && kept[0].decode("step", as: String.self) == "commit")
        #expect(try kept[0].decode("review_reason", as: String.self) == "outcome_unknown" && kept[0].decode("note", as: String.self) == "reads 02")
        #expect(try kept[0].decode("resolved_by", as: String.self) == "ana" && kept[0].decode("mine", as: Bool.self))
        // The audit view shows it resolved, with who and why.
        let audit = try await line.admin.query("""
            SELECT state, outcome, error_kind, resolved_by, resolution_note FROM provision.device_report WHERE run_id = $1 AND device_id = 'SN-00000'
            """, [.text(line.run.id)])
        #expect(try audit[0].decode("state", as: String.self) == "succeeded" && audit[0].decode("outcome", as: String.self) == "succeeded")
        #expect(try audit[0].decodeIfPresent("error_kind", as: String.self) == nil && audit[0].decode("resolved_by", as: String.self) == "ana")
        #expect(try audit[0].decode("resolution_note", as: String.self) == "reads 02")
        // Once: a second resolution, or one of a device not under review, is refused.
        #expect(try await runs.resolve(run: line.run.id, device: "SN-00000", attempt: 1, as: .failed, note: "x", by: "bo", record: "{}") == false)
        #expect(try await runs.resolve(run: line.run.id, device: "SN-00001", attempt: 1, as: .succeeded, note: "x", by: "bo", record: "{}") == false)
        #expect(try await runs.resolve(run: line.run.id, device: "SN-00002", attempt: 1, as: .succeeded, note: "x", by: "bo", record: "{}") == false,
                "SN-00002 is claimed, its lease live")
        // The merged report's reader sees the resolution's record.
        let shown = try #require(try await runs.device(run: line.run.id, id: "SN-00000")?.record)
        let object = try JSONSerialization.jsonObject(with: Data(shown.utf8)) as? [String: Any]
        #expect((object?["review"] as? [String: Any])?["by"] as? String == "ana", "\(shown)")
        // The station that held it cannot overwrite the resolution with a late write.
        let late = try await LineClaims(connection: line.admin, run: line.run.id, station: a.station.id)
            .write(outcomes: [LineFixture.outcome(claims[0], .failed)])
        #expect(late.outcomes["SN-00000"] == .alreadyRecorded)
        #expect(try await line.device("SN-00000").state == .succeeded)
        #expect(try await line.outcomes("SN-00000").map(\.outcome) == ["failed"])
    }

    @Test func aDeviceWhoseLeaseExpiredAfterAnIntentIsResolvedBeforeAnySweep() async throws {
        let line = try await LineFixture.make(devices: 1)
        defer { line.close() }
        let a = try await line.station("a")
        let claims = try await a.claim(among: line.devices, limit: 1)
        try await a.recordIntent(LineIntent(device: "SN-00000", attempt: claims[0].attempt, stepIndex: 7, step: "commit"))
        try await line.expireLeases(of: a.station.id)
        let runs = LineRuns(connection: line.admin)
        #expect(try await runs.device(run: line.run.id, id: "SN-00000")?.state == .needsReview, "shown as it will be swept")
        #expect(try await runs.resolve(run: line.run.id, device: "SN-00000", attempt: 1, as: .failed, note: "state reads 01", by: "ana",
                                       record: #"{"id":"SN-00000","outcome":"failed"}"#))
        let d = try await line.device("SN-00000")
        #expect(d.state == .failed && d.owner == nil)
        let reason = try await line.admin.query("SELECT review_reason FROM provision.resolutions WHERE run_id = $1", [.text(line.run.id)])
        #expect(try reason.first?.decode("review_reason", as: String.self) == "lease_expired_after_intent")
    }

    @Test func aStationThatReachesEveryDeviceClaimsInInventoryOrderAndSeesWhatIsLeft() async throws {
        let line = try await LineFixture.make(devices: 12)
        defer { line.close() }
        let a = try await line.station("a")
        let b = try await line.station("b")
        // The fixture added the devices in order SN-00000 … SN-00011.
        let first = try await a.claim(among: nil, limit: 4)
        #expect(first.map(\.device) == ["SN-00000", "SN-00001", "SN-00002", "SN-00003"])
        let second = try await b.claim(among: nil, limit: 4)
        #expect(second.map(\.device) == ["SN-00004", "SN-00005", "SN-00006", "SN-00007"])
        var progress = try await a.progress()
        #expect(progress.pending == 4 && progress.claimed == 8)
        progress = try await a.progress(of: ["SN-00000", "SN-00010"])
        #expect(progress.pending == 1 && progress.claimed == 1)
        for c in first { try await a.recordOutcome(LineFixture.outcome(c)) }
        // An expired lease counts as pending before anyone sweeps it.
        try await line.expireLeases(of: b.station.id)
        progress = try await a.progress()
        #expect(progress.pending == 8 && progress.claimed == 0)
        #expect(try await a.claim(among: nil, limit: 10).count == 8)
    }
}
