import Foundation
import LineDatabase
import PostgresClient
import Testing
import TestSupport

/// `provision line status` as the database reads it: the pending devices by name, those no station
/// hears, those under review with why, and the time left at the recent rate.
@Suite(.serialized, .enabled(if: PostgresCluster.shouldRun, "needs PostgreSQL: run `make test`, or apt-get install postgresql"))
struct LineStatusTests {
    @Test func theStatusNamesPendingUnheardAndInReviewDevices() async throws {
        let line = try await LineFixture.make(devices: 10)
        defer { line.close() }
        let a = try await line.station("a")
        let b = try await line.station("b")
        // a hears SN-00000...00003, b hears SN-00002...00005; SN-00006...00009 nobody hears.
        let hearsA = Array(line.devices[0...3]), hearsB = Array(line.devices[2...5])
        let claimedA = try await a.claim(among: hearsA, limit: 2)
        let claimedB = try await b.claim(among: hearsB, limit: 2)
        #expect(claimedA.map(\.device) == ["SN-00000", "SN-00001"])
        #expect(claimedB.map(\.device) == ["SN-00002", "SN-00003"])
        // SN-00000 succeeds; SN-00001 had its commit announced when a's lease expired: under review.
        #expect(try await a.recordOutcome(LineFixture.outcome(claimedA[0])) == .succeeded)
        try await a.recordIntent(LineIntent(device: "SN-00001", attempt: claimedA[1].attempt, stepIndex: 9, step: "commit"))
        try await line.expireLeases(of: a.station.id)
        // A device heard twice is told once per station.
        _ = try await b.claim(among: hearsB, limit: 0)
        let heard = try await line.admin.query("SELECT device_id, station_id FROM provision.heard WHERE run_id = $1 ORDER BY device_id, station_id",
                                               [.text(line.run.id)])
        #expect(heard.count == 8)
        let told = Set(try heard.map { try $0.decode("device_id", as: String.self) })
        #expect(told == Set(line.devices[0...5]))

        let status = try await LineRuns(connection: line.admin).status(run: line.run.id)
        #expect(status.counts == [.succeeded: 1, .needsReview: 1, .claimed: 2, .pending: 6])
        #expect(status.pending == ["SN-00004", "SN-00005", "SN-00006", "SN-00007", "SN-00008", "SN-00009"])
        #expect(status.unheard == LineRuns.Status.Unheard(devices: ["SN-00006", "SN-00007", "SN-00008", "SN-00009"], count: 4))
        // Not swept yet: the view shows what the sweep will make of it, the step announced with it.
        #expect(status.inReview == [LineRuns.Status.Review(device: "SN-00001", reason: nil, step: "commit")])
        #expect(status.finishedRecently == 1)
        _ = try await LineClaims(connection: line.admin, run: line.run.id, station: b.station.id).sweepExpired()
        let swept = try await LineRuns(connection: line.admin).status(run: line.run.id)
        #expect(swept.inReview == [LineRuns.Status.Review(device: "SN-00001", reason: "lease_expired_after_intent", step: "commit")])
    }

    @Test func theTimeLeftComesFromTheRecentRate() async throws {
        let line = try await LineFixture.make(devices: 12)
        defer { line.close() }
        let a = try await line.station("a")
        let claims = try await a.claim(among: line.devices, limit: 6)
        for c in claims { #expect(try await a.recordOutcome(LineFixture.outcome(c)) == .succeeded) }
        // Without half a minute of work behind it, no estimate is made.
        let early = try await LineRuns(connection: line.admin).status(run: line.run.id)
        #expect(early.finishedRecently == 6 && early.ratePerMinute == nil && early.estimatedTimeLeft == nil)
        // The station has worked for ten minutes; the window is the last five: 6 devices in 5 min.
        try await line.admin.query("UPDATE provision.stations SET started_at = now() - interval '10 minutes' WHERE station_id = $1",
                                   [.text(a.station.id)])
        let status = try await LineRuns(connection: line.admin).status(run: line.run.id)
        #expect(status.window == .seconds(300))
        #expect(status.ratePerMinute == 1.2)
        #expect(status.estimatedTimeLeft == .seconds(300), "6 devices left at 1.2 a minute")
        // Outcomes older than the window do not count.
        try await line.admin.query("UPDATE provision.outcomes SET recorded_at = now() - interval '6 minutes' WHERE run_id = $1 AND device_id <> 'SN-00000'",
                                   [.text(line.run.id)])
        let later = try await LineRuns(connection: line.admin).status(run: line.run.id)
        #expect(later.finishedRecently == 1 && later.estimatedTimeLeft == .seconds(1800))
        // No station working the line: no estimate.
        try await a.leave()
        #expect(try await LineRuns(connection: line.admin).status(run: line.run.id).estimatedTimeLeft == nil)
    }
}
