import Foundation
import PostgresClient

/// The claim and lease protocol of one station in one run, as SQL: each operation is one request (one
/// round trip) and one transaction.
///
/// - A device is `pending` until a station claims it (`claim`): the claim increments its `attempt`
///   (the lease's fencing token) and sets the lease (owner, expiry by the database's clock).
/// - The holder renews all its leases in one statement (`renew`), announces an irreversible write
///   (`write` intents) while its lease is live, and records the outcome (`write` outcomes) while it still
///   holds the device. Anything else is refused per device as `LineWriteResult.leaseLost`.
/// - An expired lease is swept (`sweepExpired`, also at the start of every `claim`): the device goes back
///   to `pending`, or to `needs_review` when an intent of the attempt has no outcome — the rule of the
///   file journal's resume. A `failed` outcome whose error is `needs_review` (the station sent an
///   irreversible step and could not learn whether it took effect) leaves the device `needs_review` too
///   (`outcome_unknown`), for `provision review` to settle. Rows being changed by someone else are skipped (`SKIP LOCKED`), never waited for.
/// - Statements look devices up one by one by primary key (the `OFFSET 0` subqueries keep the planner
///   from scanning a whole run when its statistics are stale, as they are for a run just added).
/// - Writes can be retried after a lost connection: an outcome already written by this station for this
///   attempt answers `alreadyRecorded`; an intent is idempotent while the lease is held.
public struct LineClaims: Sendable {
    public let connection: PostgresConnection
    public let run: String
    public let station: String
    /// Each operation's deadline (nil: the connection's default).
    public var timeout: Duration?

    public init(connection: PostgresConnection, run: String, station: String, timeout: Duration? = nil) {
        self.connection = connection
        self.run = run
        self.station = station
        self.timeout = timeout
    }

    /// A device whose lease expired and what it became.
    public struct Swept: Sendable, Equatable {
        public var device: String
        public var attempt: Int
        public var state: DeviceState
    }

    // MARK: Claims and leases

    /// Claims up to `limit` pending devices among `devices` (in that order of preference, e.g. best RSSI
    /// first), with a lease of `lease`, after sweeping expired leases of the run — one round trip, one
    /// transaction. Devices being claimed by another station at the same moment are skipped.
    public func claim(among devices: [String], limit: Int, lease: Duration) async throws -> [LineClaim] {
        guard limit > 0, !devices.isEmpty else { return [] }
        let results = try await connection.pipeline([
            Self.withoutWaitingForFlush,
            sweepStatement(limit: 1000),
            PostgresStatement("""
                WITH wanted AS (
                    SELECT w.device_id, w.ord FROM unnest($3::text[]) WITH ORDINALITY AS w(device_id, ord)
                ), picked AS MATERIALIZED (
                    SELECT d.run_id, d.device_id
                    FROM provision.devices AS d
                    JOIN wanted AS w ON w.device_id = d.device_id
                    WHERE d.run_id = $1 AND d.state = 'pending'
                    ORDER BY w.ord
                    LIMIT $4
                    FOR UPDATE OF d SKIP LOCKED
                )
                UPDATE provision.devices AS d
                SET state = 'claimed', attempt = d.attempt + 1, lease_owner = $2, attempt_owner = $2,
                    lease_expires_at = now() + $5::bigint * interval '1 millisecond', claimed_at = now(),
                    intent_step = NULL, intent_at = NULL, review_reason = NULL, updated_at = now()
                FROM picked AS p
                WHERE d.run_id = p.run_id AND d.device_id = p.device_id
                RETURNING d.device_id, d.attempt, d.lease_expires_at
                """, [.text(run), .text(station), .textArray(Self.unique(devices)), .int(limit), .milliseconds(lease)]).prepared(),
        ], timeout: timeout, label: "claim devices for station \(station)")
        return try results[2].map(Self.claim)
    }

    /// Claims up to `limit` pending devices of the run in inventory order (for a station that reaches
    /// every device), but those `excluding`, after sweeping expired leases — one round trip, one transaction.
    public func claimAny(limit: Int, lease: Duration, excluding: [String] = []) async throws -> [LineClaim] {
        guard limit > 0 else { return [] }
        let results = try await connection.pipeline([
            Self.withoutWaitingForFlush,
            sweepStatement(limit: 1000),
            PostgresStatement("""
                WITH picked AS MATERIALIZED (
                    SELECT d.run_id, d.device_id
                    FROM provision.devices AS d
                    WHERE d.run_id = $1 AND d.state = 'pending' AND d.device_id <> ALL($5::text[])
                    ORDER BY d.position, d.device_id
                    LIMIT $3
                    FOR UPDATE OF d SKIP LOCKED
                )
                UPDATE provision.devices AS d
                SET state = 'claimed', attempt = d.attempt + 1, lease_owner = $2, attempt_owner = $2,
                    lease_expires_at = now() + $4::bigint * interval '1 millisecond', claimed_at = now(),
                    intent_step = NULL, intent_at = NULL, review_reason = NULL, updated_at = now()
                FROM picked AS p
                WHERE d.run_id = p.run_id AND d.device_id = p.device_id
                RETURNING d.device_id, d.attempt, d.lease_expires_at, d.position
                """, [.text(run), .text(station), .int(limit), .milliseconds(lease), .textArray(excluding)]).prepared(),
        ], timeout: timeout, label: "claim devices for station \(station)")
        // In inventory order (RETURNING does not keep the order of the pick).
        let rows = results[2]
        var claims: [(position: Int, claim: LineClaim)] = []
        for row in rows { claims.append((try row.decodeIfPresent("position", as: Int.self) ?? Int.max, try Self.claim(row))) }
        return claims.sorted { ($0.position, $0.claim.device) < ($1.position, $1.claim.device) }.map(\.claim)
    }

    /// Claims up to `limit` devices among `devices` (in that order of preference) that are under review
    /// after an intent of one of `steps`, to ask them again (`LineRecheck`), after sweeping expired leases
    /// — one round trip, one transaction. The intent stands (its step is the claim's `rechecking`): the
    /// attempt's outcome settles it, and an attempt cut again leaves the device under review.
    public func claimUnderReview(among devices: [String], steps: [String], limit: Int, lease: Duration) async throws -> [LineClaim] {
        guard limit > 0, !devices.isEmpty, !steps.isEmpty else { return [] }
        let results = try await connection.pipeline([
            Self.withoutWaitingForFlush,
            sweepStatement(limit: 1000),
            PostgresStatement("""
                WITH wanted AS (
                    SELECT w.device_id, w.ord FROM unnest($3::text[]) WITH ORDINALITY AS w(device_id, ord)
                ), picked AS MATERIALIZED (
                    SELECT d.run_id, d.device_id
                    FROM provision.devices AS d
                    JOIN wanted AS w ON w.device_id = d.device_id
                    WHERE d.run_id = $1 AND d.state = 'needs_review' AND d.intent_step = ANY($6::text[])
                    ORDER BY w.ord
                    LIMIT $4
                    FOR UPDATE OF d SKIP LOCKED
                )
                UPDATE provision.devices AS d
                SET state = 'claimed', attempt = d.attempt + 1, lease_owner = $2, attempt_owner = $2,
                    lease_expires_at = now() + $5::bigint * interval '1 millisecond', claimed_at = now(),
                    review_reason = NULL, updated_at = now()
                FROM picked AS p
                WHERE d.run_id = p.run_id AND d.device_id = p.device_id
                RETURNING d.device_id, d.attempt, d.lease_expires_at, d.intent_step
                """, [.text(run), .text(station), .textArray(Self.unique(devices)), .int(limit), .milliseconds(lease),
                      .textArray(steps)]),
        ], timeout: timeout, label: "claim devices under review for station \(station)")
        return try results[2].map { row in
            var claim = try Self.claim(row)
            claim.rechecking = try row.decodeIfPresent("intent_step")
            return claim
        }
    }

    /// How many of `devices` are under review after an intent of one of `steps` (a station asking them
    /// again may claim them) and claimed now, counting expired leases as the next sweep makes them.
    public func progressUnderReview(of devices: [String], steps: [String]) async throws -> (pending: Int, claimed: Int) {
        let rows = try await connection.query("""
            SELECT count(*) FILTER (WHERE state = 'needs_review' AND intent_step = ANY($3::text[])) AS pending,
                   count(*) FILTER (WHERE state = 'claimed') AS claimed
            FROM provision.device_status WHERE run_id = $1 AND device_id = ANY($2::text[])
            """, [.text(run), .textArray(devices), .textArray(steps)], timeout: timeout, label: "read the progress of run \(run)")
        guard let row = rows.first else { return (0, 0) }
        return (try row.decode("pending"), try row.decode("claimed"))
    }

    /// Records that this station hears `devices` (once per station and device: a device heard again is
    /// left as it is). Its own rows only, no lock on a device: claims never wait for it.
    public func recordHeard(_ devices: [String]) async throws {
        guard !devices.isEmpty else { return }
        try await connection.query("""
            INSERT INTO provision.heard (run_id, device_id, station_id)
            SELECT $1, h.device_id, $2 FROM unnest($3::text[]) AS h(device_id)
            ON CONFLICT (run_id, device_id, station_id) DO NOTHING
            """, [.text(run), .text(station), .textArray(Self.unique(devices))], timeout: timeout, label: "record the devices station \(station) hears")
    }

    /// How many devices of the run (or of `devices`) are pending and claimed now, counting expired
    /// leases as what the next sweep makes of them.
    public func progress(of devices: [String]? = nil) async throws -> (pending: Int, claimed: Int) {
        let rows: PostgresRows
        if let devices {
            rows = try await connection.query("""
                SELECT count(*) FILTER (WHERE state = 'pending') AS pending, count(*) FILTER (WHERE state = 'claimed') AS claimed
                FROM provision.device_status WHERE run_id = $1 AND device_id = ANY($2::text[])
                """, [.text(run), .textArray(devices)], timeout: timeout, label: "read the progress of run \(run)")
        } else {
            rows = try await connection.query("""
                SELECT count(*) FILTER (WHERE state = 'pending') AS pending, count(*) FILTER (WHERE state = 'claimed') AS claimed
                FROM provision.device_status WHERE run_id = $1
                """, [.text(run)], timeout: timeout, label: "read the progress of run \(run)")
        }
        guard let row = rows.first else { return (0, 0) }
        return (try row.decode("pending"), try row.decode("claimed"))
    }

    /// What a renewal did: the leases extended, and every device the station holds with a live lease.
    public struct Renewal: Sendable, Equatable {
        public var renewed: [LineClaim]
        /// Every device this station holds with a live lease, renewed or not (a device whose row one of
        /// the station's connections is writing at that moment is held, and renewed next time).
        public var held: [LineClaim]
    }

    /// Extends the lease of every device this station holds in the run (and beats its heart), in one
    /// round trip. An expired lease is not renewed (it is forfeit); rows the station's own writes hold
    /// at that moment are skipped rather than waited for (no lock cycles between a station's connections).
    public func renew(lease: Duration) async throws -> Renewal {
        let results = try await connection.pipeline([
            Self.withoutWaitingForFlush,
            PostgresStatement("""
                WITH beat AS (
                    UPDATE provision.stations SET heartbeat_at = now() WHERE station_id = $2
                )
                UPDATE provision.devices AS d
                SET lease_expires_at = now() + $3::bigint * interval '1 millisecond'
                FROM (
                    SELECT run_id, device_id FROM provision.devices
                    WHERE run_id = $1 AND lease_owner = $2 AND state = 'claimed' AND lease_expires_at > now()
                    FOR UPDATE SKIP LOCKED
                ) AS mine
                WHERE d.run_id = mine.run_id AND d.device_id = mine.device_id
                RETURNING d.device_id, d.attempt, d.lease_expires_at
                """, [.text(run), .text(station), .milliseconds(lease)]).prepared(),
            PostgresStatement("""
                SELECT device_id, attempt, lease_expires_at FROM provision.devices
                WHERE run_id = $1 AND lease_owner = $2 AND state = 'claimed' AND lease_expires_at > now()
                ORDER BY device_id
                """, [.text(run), .text(station)]).prepared(),
        ], timeout: timeout, label: "renew the leases of station \(station)")
        // One transaction: the second statement sees the expiries the first extended.
        return Renewal(renewed: try results[1].map(Self.claim), held: try results[2].map(Self.claim))
    }

    /// The devices this station holds now (after a reconnection, to find claims whose answer was lost).
    public func held() async throws -> [LineClaim] {
        let rows = try await connection.query("""
            SELECT device_id, attempt, lease_expires_at FROM provision.devices
            WHERE run_id = $1 AND lease_owner = $2 AND state = 'claimed'
            ORDER BY device_id
            """, [.text(run), .text(station)], timeout: timeout, label: "read the claims of station \(station)")
        return try rows.map(Self.claim)
    }

    /// Gives devices back: `pending`, or `needs_review` when an intent of the attempt has no outcome.
    /// Returns the new state of each device released (devices not held are left alone and not listed).
    public func release(_ claims: [(device: String, attempt: Int)]) async throws -> [String: DeviceState] {
        guard !claims.isEmpty else { return [:] }
        let results = try await connection.pipeline([Self.withoutWaitingForFlush, PostgresStatement("""
            UPDATE provision.devices AS d
            SET state = CASE WHEN d.intent_step IS NULL THEN 'pending' ELSE 'needs_review' END,
                review_reason = CASE WHEN d.intent_step IS NULL THEN NULL ELSE 'released_after_intent' END,
                lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
            FROM unnest($3::text[], $4::integer[]) AS r(device_id, attempt)
            WHERE d.run_id = $1 AND d.device_id = r.device_id AND d.attempt = r.attempt
              AND d.state = 'claimed' AND d.lease_owner = $2
            RETURNING d.device_id, d.state
            """, [.text(run), .text(station), .textArray(claims.map(\.device)), .array(claims.map { .int($0.attempt) })])],
            timeout: timeout, label: "release devices of station \(station)")
        var states: [String: DeviceState] = [:]
        for row in results[1] { states[try row.decode("device_id")] = try row.decode("state", as: DeviceState.self) }
        return states
    }

    /// Sweeps up to `limit` expired leases of the run (any station may; concurrent sweeps share the work).
    public func sweepExpired(limit: Int = 1000) async throws -> [Swept] {
        let rows = try await connection.pipeline([Self.withoutWaitingForFlush, sweepStatement(limit: limit)], timeout: timeout,
                                                 label: "sweep expired leases")
        return try rows[1].map { row in
            Swept(device: try row.decode("device_id"), attempt: try row.decode("attempt"), state: try row.decode("state"))
        }
    }

    private func sweepStatement(limit: Int) -> PostgresStatement {
        PostgresStatement("""
            UPDATE provision.devices AS d
            SET state = CASE WHEN d.intent_step IS NULL THEN 'pending' ELSE 'needs_review' END,
                review_reason = CASE WHEN d.intent_step IS NULL THEN NULL ELSE 'lease_expired_after_intent' END,
                lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
            FROM (
                SELECT run_id, device_id FROM provision.devices
                WHERE run_id = $1 AND state = 'claimed' AND lease_expires_at <= now()
                ORDER BY lease_expires_at
                LIMIT $2
                FOR UPDATE SKIP LOCKED
            ) AS expired
            WHERE d.run_id = expired.run_id AND d.device_id = expired.device_id
            RETURNING d.device_id, d.attempt, d.state
            """, [.text(run), .int(limit)]).prepared()
    }

    // MARK: Intents and outcomes

    /// What became of each intent and outcome of a `write`, by device.
    public struct WriteResults: Sendable, Equatable {
        public var intents: [String: LineWriteResult] = [:]
        public var outcomes: [String: LineWriteResult] = [:]
    }

    /// Writes intents and outcomes in one round trip and one transaction (group commit). Each is
    /// accepted or refused on its own: a device whose lease this station lost is `leaseLost` and
    /// nothing about it is written; the others are. A device may appear once among the intents and
    /// once among the outcomes (the intent is written first).
    public func write(intents: [LineIntent] = [], outcomes: [LineOutcome] = []) async throws -> WriteResults {
        if Set(intents.map(\.device)).count != intents.count || Set(outcomes.map(\.device)).count != outcomes.count {
            throw LineError.invalidRequest("a write names a device twice among its intents or its outcomes; write them in separate batches")
        }
        var statements: [PostgresStatement] = []
        if !intents.isEmpty { statements.append(intentStatement(intents)) }
        if !outcomes.isEmpty { statements.append(outcomeStatement(outcomes)) }
        guard !statements.isEmpty else { return WriteResults() }
        let rows = try await connection.pipeline(statements, timeout: timeout,
                                                 label: "write \(intents.count) intents and \(outcomes.count) outcomes of station \(station)")
        var results = WriteResults()
        var index = 0
        if !intents.isEmpty {
            let attempts = Dictionary(intents.map { ($0.device, $0.attempt) }, uniquingKeysWith: { a, _ in a })
            results.intents = try decodeResults(rows[index], attempts: attempts)
            index += 1
        }
        if !outcomes.isEmpty {
            let attempts = Dictionary(outcomes.map { ($0.device, $0.attempt) }, uniquingKeysWith: { a, _ in a })
            results.outcomes = try decodeResults(rows[index], attempts: attempts)
        }
        return results
    }

    private func intentStatement(_ intents: [LineIntent]) -> PostgresStatement {
        PostgresStatement("""
            WITH input AS (
                SELECT * FROM unnest($3::text[], $4::integer[], $5::integer[], $6::text[]) AS i(device_id, attempt, step_index, step)
            ), held AS (
                UPDATE provision.devices AS d
                SET intent_step = i.step, intent_at = now(), updated_at = now()
                FROM input AS i
                WHERE d.run_id = $1 AND d.device_id = i.device_id AND d.attempt = i.attempt
                  AND d.state = 'claimed' AND d.lease_owner = $2 AND d.lease_expires_at > now()
                RETURNING d.device_id, i.attempt, i.step_index, i.step
            ), logged AS (
                INSERT INTO provision.intents (run_id, device_id, attempt, step_index, step, station_id)
                SELECT $1, h.device_id, h.attempt, h.step_index, h.step, $2 FROM held AS h
                ON CONFLICT (run_id, device_id, attempt, step_index) DO NOTHING
            )
            SELECT i.device_id,
                   CASE WHEN h.device_id IS NOT NULL THEN 'recorded' ELSE 'lease_lost' END AS result,
                   CASE WHEN h.device_id IS NOT NULL THEN 'claimed' ELSE d.state END AS state,
                   d.lease_owner, d.attempt AS current_attempt
            FROM input AS i
            LEFT JOIN held AS h ON h.device_id = i.device_id
            LEFT JOIN LATERAL (
                SELECT state, lease_owner, attempt FROM provision.devices
                WHERE run_id = $1 AND device_id = i.device_id
                OFFSET 0
            ) AS d ON true
            """, [.text(run), .text(station), .textArray(intents.map(\.device)), .array(intents.map { .int($0.attempt) }),
                  .array(intents.map { .int($0.stepIndex) }), .textArray(intents.map(\.step))]).prepared()
    }

    private func outcomeStatement(_ outcomes: [LineOutcome]) -> PostgresStatement {
        PostgresStatement("""
            WITH input AS (
                SELECT * FROM unnest($3::text[], $4::integer[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
                                     $10::text[], $11::integer[], $12::timestamptz[], $13::timestamptz[], $14::float8[], $15::jsonb[])
                    AS i(device_id, attempt, outcome, error_kind, error_step, error_message, firmware,
                         adapter, rssi, started_at, finished_at, duration_ms, record)
            ), done AS (
                UPDATE provision.devices AS d
                SET state = CASE WHEN i.outcome = 'failed' AND i.error_kind = 'needs_review' THEN 'needs_review'
                                 WHEN i.outcome IN ('succeeded', 'failed') THEN i.outcome
                                 WHEN d.intent_step IS NULL THEN 'pending' ELSE 'needs_review' END,
                    review_reason = CASE WHEN i.outcome = 'failed' AND i.error_kind = 'needs_review' THEN 'outcome_unknown'
                                         WHEN i.outcome IN ('succeeded', 'failed') OR d.intent_step IS NULL THEN NULL
                                         ELSE coalesce(d.review_reason, 'interrupted_after_intent') END,
                    intent_step = CASE WHEN i.outcome = 'failed' AND i.error_kind = 'needs_review' THEN coalesce(d.intent_step, i.error_step)
                                       WHEN i.outcome IN ('succeeded', 'failed') THEN NULL ELSE d.intent_step END,
                    intent_at = CASE WHEN i.outcome = 'failed' AND i.error_kind = 'needs_review' THEN coalesce(d.intent_at, i.finished_at)
                                     WHEN i.outcome IN ('succeeded', 'failed') THEN NULL ELSE d.intent_at END,
                    lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
                FROM input AS i
                WHERE d.run_id = $1 AND d.device_id = i.device_id AND d.attempt = i.attempt
                  AND ((d.state = 'claimed' AND d.lease_owner = $2)
                       -- Late: the lease ended (swept, released) and nobody claimed the device since.
                       OR (d.state IN ('pending', 'needs_review') AND d.lease_owner IS NULL AND d.attempt_owner = $2))
                RETURNING d.device_id, d.state
            ), logged AS (
                INSERT INTO provision.outcomes (run_id, device_id, attempt, station_id, outcome, error_kind, error_step,
                                                error_message, firmware, adapter, rssi, started_at, finished_at, duration_ms, record)
                SELECT $1, i.device_id, i.attempt, $2, i.outcome, i.error_kind, i.error_step, i.error_message, i.firmware,
                       i.adapter, i.rssi, i.started_at, i.finished_at, i.duration_ms, i.record
                FROM input AS i JOIN done AS dn ON dn.device_id = i.device_id
                ON CONFLICT (run_id, device_id, attempt) DO NOTHING
            )
            SELECT i.device_id,
                   CASE WHEN dn.device_id IS NOT NULL THEN 'recorded'
                        WHEN EXISTS (SELECT 1 FROM provision.outcomes AS o
                                     WHERE o.run_id = $1 AND o.device_id = i.device_id AND o.attempt = i.attempt
                                       AND o.station_id = $2) THEN 'already_recorded'
                        ELSE 'lease_lost' END AS result,
                   coalesce(dn.state, d.state) AS state, d.lease_owner, d.attempt AS current_attempt
            FROM input AS i
            LEFT JOIN done AS dn ON dn.device_id = i.device_id
            LEFT JOIN LATERAL (
                SELECT state, lease_owner, attempt FROM provision.devices
                WHERE run_id = $1 AND device_id = i.device_id
                OFFSET 0
            ) AS d ON true
            """, [.text(run), .text(station),
                  .textArray(outcomes.map(\.device)),
                  .array(outcomes.map { .int($0.attempt) }),
                  .textArray(outcomes.map(\.outcome.rawValue)),
                  .array(outcomes.map { .text($0.errorKind) }),
                  .array(outcomes.map { .text($0.errorStep) }),
                  .array(outcomes.map { .text($0.errorMessage) }),
                  .array(outcomes.map { .text($0.firmware) }),
                  .array(outcomes.map { .text($0.adapter) }),
                  .array(outcomes.map { .int($0.rssi) }),
                  .array(outcomes.map { .timestamp($0.started) }),
                  .array(outcomes.map { .timestamp($0.finished) }),
                  .array(outcomes.map { .double($0.durationMs) }),
                  .array(outcomes.map { .json($0.record) })]).prepared()
    }

    private func decodeResults(_ rows: PostgresRows, attempts: [String: Int]) throws -> [String: LineWriteResult] {
        var results: [String: LineWriteResult] = [:]
        for row in rows {
            let device: String = try row.decode("device_id")
            let state = try row.decodeIfPresent("state", as: DeviceState.self)
            switch try row.decode("result", as: String.self) {
            case "recorded":
                results[device] = .recorded(state ?? .claimed)
            case "already_recorded":
                results[device] = .alreadyRecorded
            default:
                results[device] = .leaseLost(LeaseLoss(device: device, attempt: attempts[device] ?? 0, station: station, state: state,
                                                       owner: try row.decodeIfPresent("lease_owner"),
                                                       currentAttempt: try row.decodeIfPresent("current_attempt")))
            }
        }
        return results
    }

    // MARK: Helpers

    /// Claims, renewals, releases and sweeps commit without waiting for the WAL flush
    /// (`synchronous_commit = off` for that transaction only). Losing one in a database crash is safe:
    /// every intent and outcome is fenced by the lease owner and attempt, so a claim that vanished
    /// makes the station's next write `leaseLost` before anything irreversible goes out; and a durable
    /// commit (an intent, an outcome) flushes the WAL up to itself, so any claim it depends on is
    /// durable by then. Intents and outcomes always wait for the flush.
    static let withoutWaitingForFlush = PostgresStatement("SET LOCAL synchronous_commit TO off").prepared()

    private static func claim(_ row: PostgresRow) throws -> LineClaim {
        LineClaim(device: try row.decode("device_id"), attempt: try row.decode("attempt"), leaseExpires: try row.decode("lease_expires_at"))
    }

    /// The ids in order, each once.
    static func unique(_ ids: [String]) -> [String] {
        var seen = Set<String>()
        return ids.filter { seen.insert($0).inserted }
    }
}
