import Foundation
import PostgresClient

/// Runs, their devices and stations in the line database: what a station does once when it joins a
/// run, and what `provision line status` and `provision report --line` read.
public struct LineRuns: Sendable {
    public let connection: PostgresConnection
    /// Each operation's deadline (nil: the connection's default).
    public var timeout: Duration?

    public init(connection: PostgresConnection, timeout: Duration? = nil) {
        self.connection = connection
        self.timeout = timeout
    }

    /// Creates the run, or joins it when it already exists with the same workflow and inventory (by
    /// sha256); another workflow or inventory under the same run id is `LineError.runMismatch`.
    /// Returns true when this call created the run.
    @discardableResult
    public func join(_ run: LineRun, createdBy station: String) async throws -> Bool {
        let options = String(decoding: try JSONSerialization.data(withJSONObject: run.options, options: [.sortedKeys]), as: UTF8.self)
        let captureTypes = try run.captureTypes.map { String(decoding: try JSONSerialization.data(withJSONObject: $0, options: [.sortedKeys]), as: UTF8.self) }
        let checksums = try run.checksums.map { String(decoding: try JSONSerialization.data(withJSONObject: $0, options: [.sortedKeys]), as: UTF8.self) }
        let results = try await connection.pipeline([
            PostgresStatement("""
                INSERT INTO provision.runs (run_id, workflow_name, workflow_path, workflow_sha256, inventory_path, inventory_sha256,
                                            options, tool_version, created_by, capture_types, checksums)
                VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10::jsonb, $11::jsonb)
                ON CONFLICT (run_id) DO NOTHING
                RETURNING run_id
                """, [.text(run.id), .text(run.workflow.name), .text(run.workflow.path), .text(run.workflow.sha256),
                      .text(run.inventory.path), .text(run.inventory.sha256), .json(options), .text(run.toolVersion), .text(station),
                      captureTypes.map { .json($0) } ?? .null, checksums.map { .json($0) } ?? .null]),
            PostgresStatement("SELECT workflow_sha256, inventory_sha256 FROM provision.runs WHERE run_id = $1", [.text(run.id)]),
        ], timeout: timeout, label: "join run \(run.id)")
        let created = results[0].count == 1
        guard let row = results[1].first else {
            throw LineError.invalidRequest("run \(run.id) vanished while joining it")
        }
        let workflow: String = try row.decode("workflow_sha256")
        let inventory: String = try row.decode("inventory_sha256")
        if workflow != run.workflow.sha256 {
            throw LineError.runMismatch(run: run.id, what: "workflow", line: workflow, local: run.workflow.sha256)
        }
        if inventory != run.inventory.sha256 {
            throw LineError.runMismatch(run: run.id, what: "inventory", line: inventory, local: run.inventory.sha256)
        }
        return created
    }

    /// Adds devices to a run as `pending`, in inventory order (their `position`); devices already there
    /// are left as they are. Returns how many were new. A run that already holds as many devices as
    /// `devices` is left alone (a run is joined only with the same inventory, so they are the same
    /// devices). Large inventories go in chunks of 10,000 ids per statement.
    @discardableResult
    public func addDevices(_ devices: [String], run: String) async throws -> Int {
        let present = try await connection.query("SELECT count(*) AS n FROM provision.devices WHERE run_id = $1", [.text(run)],
                                                 timeout: timeout, label: "count the devices of run \(run)")
        if try present.first?.decode("n", as: Int.self) == devices.count { return 0 }
        var added = 0
        var start = 0
        while start < devices.count {
            let end = min(start + 10_000, devices.count)
            let chunk = Array(devices[start..<end])
            let rows = try await connection.query("""
                INSERT INTO provision.devices (run_id, device_id, position)
                SELECT $1, u.id, $3::integer + u.n::integer - 1 FROM unnest($2::text[]) WITH ORDINALITY AS u(id, n)
                ON CONFLICT (run_id, device_id) DO NOTHING
                """, [.text(run), .textArray(chunk), .int(start)], timeout: timeout, label: "add devices to run \(run)")
            added += rows.rowsAffected ?? 0
            start = end
        }
        return added
    }

    /// Registers (or re-registers) a station for a run and beats its heart.
    public func register(_ station: LineStationInfo, run: String) async throws {
        try await connection.query("""
            INSERT INTO provision.stations (station_id, name, host, adapters, tool_version, pid, run_id)
            VALUES ($1, $2, $3, $4::text[], $5, $6, $7)
            ON CONFLICT (station_id) DO UPDATE
            SET name = EXCLUDED.name, host = EXCLUDED.host, adapters = EXCLUDED.adapters, tool_version = EXCLUDED.tool_version,
                pid = EXCLUDED.pid, run_id = EXCLUDED.run_id, heartbeat_at = now(), stopped_at = NULL
            """, [.text(station.id), .text(station.name), .text(station.host), .textArray(station.adapters), .text(station.toolVersion),
                  .int(station.pid), .text(run)], timeout: timeout, label: "register station \(station.id)")
    }

    /// Records the station's identity on each of its adapters (in the order of its adapters; empty for
    /// one that has none), once they are open.
    public func setIdentities(station: String, identities: [String]) async throws {
        try await connection.query("UPDATE provision.stations SET identities = $2::text[] WHERE station_id = $1",
                                   [.text(station), .textArray(identities)], timeout: timeout, label: "record the identities of station \(station)")
    }

    /// Marks a station stopped, with why when it stopped early (its leases, if any, still expire as usual).
    public func stopped(station: String, reason: String? = nil, message: String? = nil) async throws {
        try await connection.query("""
            UPDATE provision.stations SET stopped_at = now(), heartbeat_at = now(), stop_reason = $2, stop_message = $3
            WHERE station_id = $1
            """, [.text(station), .text(reason), .text(message)], timeout: timeout, label: "mark station \(station) stopped")
    }

    /// Records the end of a run (a stop reason when the line was stopped).
    public func end(run: String, stopReason: String? = nil, message: String? = nil) async throws {
        try await connection.query("""
            UPDATE provision.runs SET ended_at = coalesce(ended_at, now()), stop_reason = $2, stop_message = $3 WHERE run_id = $1
            """, [.text(run), .text(stopReason), .text(message)], timeout: timeout, label: "end run \(run)")
    }

    // MARK: Reading

    /// A run as the line records it.
    public struct RunRow: Sendable, Equatable {
        public var run: LineRun
        public var createdBy: String
        public var started: Date
        public var ended: Date?
        public var stopReason: String?
        public var stopMessage: String?
    }

    /// The run `id`, or the most recently started run when `id` is nil; nil when there is none. Reads a
    /// database of an older schema too (readers do not migrate): a column it lacks reads as NULL.
    public func run(_ id: String?) async throws -> RunRow? {
        let rows: PostgresRows
        if let id {
            rows = try await connection.query("""
                SELECT run_id, workflow_name, workflow_path, workflow_sha256, inventory_path, inventory_sha256, options, tool_version,
                       created_by, started_at, ended_at, stop_reason, stop_message, nullif(to_jsonb(r) -> 'capture_types', 'null'::jsonb) AS capture_types,
                       nullif(to_jsonb(r) -> 'checksums', 'null'::jsonb) AS checksums
                FROM provision.runs AS r WHERE run_id = $1
                """, [.text(id)], timeout: timeout, label: "read run \(id)")
        } else {
            rows = try await connection.query("""
                SELECT run_id, workflow_name, workflow_path, workflow_sha256, inventory_path, inventory_sha256, options, tool_version,
                       created_by, started_at, ended_at, stop_reason, stop_message, nullif(to_jsonb(r) -> 'capture_types', 'null'::jsonb) AS capture_types,
                       nullif(to_jsonb(r) -> 'checksums', 'null'::jsonb) AS checksums
                FROM provision.runs AS r ORDER BY started_at DESC, run_id LIMIT 1
                """, timeout: timeout, label: "read the latest run")
        }
        guard let row = rows.first else { return nil }
        let run = LineRun(id: try row.decode("run_id"),
                          workflow: LineFile(name: try row.decodeIfPresent("workflow_name"), path: try row.decode("workflow_path"),
                                             sha256: try row.decode("workflow_sha256")),
                          inventory: LineFile(path: try row.decode("inventory_path"), sha256: try row.decode("inventory_sha256")),
                          options: try row.decodeJSON("options", as: [String: String].self), toolVersion: try row.decode("tool_version"),
                          captureTypes: try row.isNull("capture_types") ? nil : row.decodeJSON("capture_types", as: [String: String].self),
                          checksums: try row.isNull("checksums") ? nil : row.decodeJSON("checksums", as: [String: Int].self))
        return RunRow(run: run, createdBy: try row.decode("created_by"), started: try row.decode("started_at"),
                      ended: try row.decodeIfPresent("ended_at"), stopReason: try row.decodeIfPresent("stop_reason"),
                      stopMessage: try row.decodeIfPresent("stop_message"))
    }

    /// A run's devices by state, its stations and their leases, and the recent rate (`provision line status`).
    public struct Status: Sendable, Equatable {
        public struct Station: Sendable, Equatable {
            public var id: String
            public var name: String
            public var host: String
            public var adapters: [String]
            /// The station's identity on each adapter (empty when not known: a station that has not
            /// opened its adapters yet, or one of a tool before line schema 4).
            public var identities: [String]
            public var started: Date
            public var heartbeat: Date
            public var stopped: Date?
            /// Why it stopped early, if it did (`interrupted`, `failure_threshold`, `journal_failed`).
            public var stopReason: String?
            public var stopMessage: String?
            /// Devices whose lease this station holds now.
            public var leases: Int
            /// Outcomes it recorded in this run, and in the last minute.
            public var outcomes: Int
            public var outcomesLastMinute: Int
        }
        /// Pending devices nobody hears: the first few, and how many.
        public struct Unheard: Sendable, Equatable {
            public var devices: [String]
            public var count: Int
            public init(devices: [String], count: Int) {
                self.devices = devices
                self.count = count
            }
        }
        /// A device under review: why, and the irreversible step announced for it.
        public struct Review: Sendable, Equatable {
            public var device: String
            public var reason: String?
            public var step: String?
            public init(device: String, reason: String?, step: String?) {
                self.device = device
                self.reason = reason
                self.step = step
            }
        }
        /// Devices per state, expired leases counted as what the next sweep makes them.
        public var counts: [DeviceState: Int]
        public var stations: [Station]
        /// Outcomes recorded in the last minute.
        public var outcomesLastMinute: Int
        /// The database's clock when the status was read.
        public var now: Date
        /// The first `listLimit` pending devices, in inventory order (`counts[.pending]` says how many).
        public var pending: [String] = []
        /// The pending devices no station has heard, in inventory order (the first `listLimit`), and how
        /// many; nil when the line cannot know (no station tells what it hears — `--claim all` — or the
        /// database's schema is older than 4).
        public var unheard: Unheard?
        /// The devices under review (the first `listLimit`, by id).
        public var inReview: [Review] = []
        /// Devices that finished (succeeded or failed) in the recent window, and that window: the last
        /// five minutes, or less when the stations now working started later.
        public var finishedRecently = 0
        public var window: Duration = .zero
        public var total: Int { counts.values.reduce(0, +) }

        /// Devices finished per minute over the recent window (nil before any finished in it).
        public var ratePerMinute: Double? {
            // Half a minute at least: a rate over a few seconds says little.
            guard finishedRecently > 0, window >= .seconds(30) else { return nil }
            return Double(finishedRecently) / (Double(window.components.seconds) / 60 + Double(window.components.attoseconds) / 6e19)
        }

        /// The time left for the pending and claimed devices at the recent rate, while a station works
        /// the line (nil when none does, nothing is left, or nothing finished recently).
        public var estimatedTimeLeft: Duration? {
            let left = (counts[.pending] ?? 0) + (counts[.claimed] ?? 0)
            guard left > 0, let rate = ratePerMinute, stations.contains(where: { $0.stopped == nil }) else { return nil }
            return .seconds((Double(left) / rate * 60).rounded(.up))
        }
    }

    /// How many devices of each list `status` names.
    public static let listLimit = 20

    /// The status of a run. `heard`: the database has the `provision.heard` table (schema 5 or newer).
    public func status(run: String, heard: Bool = true) async throws -> Status {
        var statements = [
            PostgresStatement("""
                SELECT s.device_id FROM provision.device_status AS s
                JOIN provision.devices AS d ON d.run_id = s.run_id AND d.device_id = s.device_id
                WHERE s.run_id = $1 AND s.state = 'pending' ORDER BY d.position, s.device_id LIMIT $2
                """, [.text(run), .int(Self.listLimit)]),
            PostgresStatement("""
                SELECT device_id, review_reason, intent_step FROM provision.device_status
                WHERE run_id = $1 AND state = 'needs_review' ORDER BY device_id LIMIT $2
                """, [.text(run), .int(Self.listLimit)]),
            PostgresStatement("""
                SELECT (SELECT count(DISTINCT o.device_id) FROM provision.outcomes AS o
                        WHERE o.run_id = r.run_id AND o.outcome IN ('succeeded', 'failed') AND o.recorded_at > now() - interval '5 minutes') AS recent,
                       least(300000, greatest(0, floor(extract(epoch FROM now() - coalesce(
                           (SELECT min(st.started_at) FROM provision.stations AS st WHERE st.run_id = r.run_id AND st.stopped_at IS NULL),
                           r.started_at)) * 1000)))::bigint AS window_ms
                FROM provision.runs AS r WHERE r.run_id = $1
                """, [.text(run)]),
        ]
        if heard {
            statements += [
                PostgresStatement("""
                    SELECT s.device_id, count(*) OVER () AS n FROM provision.device_status AS s
                    JOIN provision.devices AS d ON d.run_id = s.run_id AND d.device_id = s.device_id
                    WHERE s.run_id = $1 AND s.state = 'pending'
                      AND NOT EXISTS (SELECT 1 FROM provision.heard AS h WHERE h.run_id = s.run_id AND h.device_id = s.device_id)
                    ORDER BY d.position, s.device_id LIMIT $2
                    """, [.text(run), .int(Self.listLimit)]),
                PostgresStatement("SELECT EXISTS (SELECT 1 FROM provision.heard WHERE run_id = $1) AS told", [.text(run)]),
            ]
        }
        let lists = try await connection.pipeline(statements, timeout: timeout, label: "read the devices of run \(run) to name")
        var status = try await counts(run: run)
        status.pending = try lists[0].map { try $0.decode("device_id") }
        status.inReview = try lists[1].map {
            Status.Review(device: try $0.decode("device_id"), reason: try $0.decodeIfPresent("review_reason"), step: try $0.decodeIfPresent("intent_step"))
        }
        if let rate = lists[2].first {
            status.finishedRecently = try rate.decode("recent")
            status.window = .milliseconds(try rate.decode("window_ms", as: Int.self))
        }
        if heard, try lists[4].first?.decode("told", as: Bool.self) == true {
            status.unheard = Status.Unheard(devices: try lists[3].map { try $0.decode("device_id") }, count: try lists[3].first?.decode("n", as: Int.self) ?? 0)
        }
        return status
    }

    /// Devices by state, the stations and their leases, and the last minute's outcomes.
    private func counts(run: String) async throws -> Status {
        let results = try await connection.pipeline([
            PostgresStatement("SELECT state, count(*) AS n FROM provision.device_status WHERE run_id = $1 GROUP BY state", [.text(run)]),
            PostgresStatement("""
                SELECT s.station_id, s.name, s.host, to_jsonb(s.adapters) AS adapters, coalesce(to_jsonb(s) -> 'identities', '[]') AS identities,
                       s.started_at, s.heartbeat_at, s.stopped_at, s.stop_reason, s.stop_message,
                       (SELECT count(*) FROM provision.devices AS d
                        WHERE d.run_id = $1 AND d.lease_owner = s.station_id AND d.state = 'claimed' AND d.lease_expires_at > now()) AS leases,
                       (SELECT count(*) FROM provision.outcomes AS o WHERE o.run_id = $1 AND o.station_id = s.station_id) AS outcomes,
                       (SELECT count(*) FROM provision.outcomes AS o
                        WHERE o.run_id = $1 AND o.station_id = s.station_id AND o.recorded_at > now() - interval '1 minute') AS recent
                FROM provision.stations AS s WHERE s.run_id = $1 ORDER BY s.name, s.started_at, s.station_id
                """, [.text(run)]),
            PostgresStatement("""
                SELECT count(*) AS n, now() AS now FROM provision.outcomes WHERE run_id = $1 AND recorded_at > now() - interval '1 minute'
                """, [.text(run)]),
        ], timeout: timeout, label: "read the status of run \(run)")
        var counts: [DeviceState: Int] = [:]
        for row in results[0] { counts[try row.decode("state", as: DeviceState.self)] = try row.decode("n") }
        let stations = try results[1].map { row in
            Status.Station(id: try row.decode("station_id"), name: try row.decode("name"), host: try row.decode("host"),
                           adapters: try row.decodeJSON("adapters", as: [String].self),
                           identities: try row.decodeJSON("identities", as: [String].self), started: try row.decode("started_at"),
                           heartbeat: try row.decode("heartbeat_at"), stopped: try row.decodeIfPresent("stopped_at"),
                           stopReason: try row.decodeIfPresent("stop_reason"), stopMessage: try row.decodeIfPresent("stop_message"),
                           leases: try row.decode("leases"), outcomes: try row.decode("outcomes"), outcomesLastMinute: try row.decode("recent"))
        }
        let recent: Int = try results[2].first?.decode("n") ?? 0
        let now: Date = try results[2].first?.decode("now") ?? Date()
        return Status(counts: counts, stations: stations, outcomesLastMinute: recent, now: now)
    }

    /// One device of a run for the merged report: its state and its latest outcome's record, if any.
    public struct DeviceEntry: Sendable, Equatable {
        public var device: String
        public var state: DeviceState
        public var attempt: Int
        /// The latest outcome's device record (JSON), nil when the device has none yet.
        public var record: String?
        /// The station of the latest outcome.
        public var station: String?
        /// The latest outcome's attempt (it may be older than `attempt`, the current claim's).
        public var outcomeAttempt: Int?
        /// For a device under review: why, and the step announced.
        public var reviewReason: String?
        public var intentStep: String?
        /// For a claimed device: who holds it.
        public var leaseOwner: String?
    }

    /// Every device of a run in id order with its latest outcome (what `provision report --line` merges).
    public func devices(run: String, resolutions: Bool = true) async throws -> [DeviceEntry] {
        var all: [DeviceEntry] = []
        try await devices(run: run, resolutions: resolutions) { all += $0 }
        return all
    }

    /// Every device of a run in inventory order with its latest outcome, handed over 2,000 at a time (one
    /// query, read through a cursor: a 100,000-device run is never one result in memory).
    /// `resolutions`: the database has `provision.resolutions` (schema 6 or newer); a device an operator
    /// resolved then reads as the resolution's record.
    public func devices(run: String, resolutions: Bool = true, _ page: ([DeviceEntry]) throws -> Void) async throws {
        try await connection.transaction(label: "read the devices of run \(run)", timeout: timeout) { tx in
            if resolutions {
                try await tx.query("""
                    DECLARE run_devices NO SCROLL CURSOR FOR
                    SELECT s.device_id, s.state, s.attempt, s.review_reason, s.intent_step, s.lease_owner,
                           coalesce(rs.record, o.record) AS record, o.station_id, o.attempt AS outcome_attempt
                    FROM provision.device_status AS s
                    JOIN provision.devices AS d ON d.run_id = s.run_id AND d.device_id = s.device_id
                    LEFT JOIN provision.latest_outcomes AS o ON o.run_id = s.run_id AND o.device_id = s.device_id
                    LEFT JOIN provision.resolutions AS rs ON rs.run_id = s.run_id AND rs.device_id = s.device_id AND rs.attempt = s.attempt
                    WHERE s.run_id = $1
                    ORDER BY d.position, s.device_id
                    """, [.text(run)], label: "open a cursor over the devices of run \(run)")
            } else {
                try await tx.query("""
                    DECLARE run_devices NO SCROLL CURSOR FOR
                    SELECT s.device_id, s.state, s.attempt, s.review_reason, s.intent_step, s.lease_owner,
                           o.record, o.station_id, o.attempt AS outcome_attempt
                    FROM provision.device_status AS s
                    JOIN provision.devices AS d ON d.run_id = s.run_id AND d.device_id = s.device_id
                    LEFT JOIN provision.latest_outcomes AS o ON o.run_id = s.run_id AND o.device_id = s.device_id
                    WHERE s.run_id = $1
                    ORDER BY d.position, s.device_id
                    """, [.text(run)], label: "open a cursor over the devices of run \(run)")
            }
            while true {
                let rows = try await tx.query("FETCH FORWARD 2000 FROM run_devices", label: "read the devices of run \(run)")
                if rows.isEmpty { break }
                try page(try rows.map(Self.entry))
            }
        }
    }

    /// One device of a run as `devices` reads it (schema 6 or newer); nil when the run has no such device.
    public func device(run: String, id: String) async throws -> DeviceEntry? {
        let rows = try await connection.query("""
            SELECT s.device_id, s.state, s.attempt, s.review_reason, s.intent_step, s.lease_owner,
                   coalesce(rs.record, o.record) AS record, o.station_id, o.attempt AS outcome_attempt
            FROM provision.device_status AS s
            LEFT JOIN provision.latest_outcomes AS o ON o.run_id = s.run_id AND o.device_id = s.device_id
            LEFT JOIN provision.resolutions AS rs ON rs.run_id = s.run_id AND rs.device_id = s.device_id AND rs.attempt = s.attempt
            WHERE s.run_id = $1 AND s.device_id = $2
            """, [.text(run), .text(id)], timeout: timeout, label: "read device \(id) of run \(run)")
        return try rows.first.map(Self.entry)
    }

    /// One row of the queries above.
    private static func entry(_ row: PostgresRow) throws -> DeviceEntry {
        DeviceEntry(device: try row.decode("device_id"), state: try row.decode("state"), attempt: try row.decode("attempt"),
                    record: try row.decodeIfPresent("record"), station: try row.decodeIfPresent("station_id"),
                    outcomeAttempt: try row.decodeIfPresent("outcome_attempt"),
                    reviewReason: try row.decodeIfPresent("review_reason"), intentStep: try row.decodeIfPresent("intent_step"),
                    leaseOwner: try row.decodeIfPresent("lease_owner"))
    }

    /// An operator's resolution of a device under review (`provision review --line --mark`), as one
    /// transaction: the device of `attempt`, if it is still under review (recorded so, or claimed by a
    /// station whose lease expired after an intent), becomes `outcome`, and the resolution — with `note`,
    /// `by`, the database role and the doubt it replaces — is added to `provision.resolutions`, whose
    /// `record` the merged report shows from then on. Returns false, changing nothing, when the device is
    /// not under review at that attempt (resolved meanwhile, or claimed again).
    public func resolve(run: String, device: String, attempt: Int, as outcome: DeviceState, note: String, by: String,
                        record: String) async throws -> Bool {
        guard outcome == .succeeded || outcome == .failed else {
            throw LineError.invalidRequest("a device under review is resolved as succeeded or failed, not \(outcome.rawValue)")
        }
        let rows = try await connection.query("""
            WITH target AS (
                SELECT d.device_id, d.attempt, d.intent_step, coalesce(d.review_reason, 'lease_expired_after_intent') AS review_reason
                FROM provision.devices AS d
                WHERE d.run_id = $1 AND d.device_id = $2 AND d.attempt = $3
                  AND (d.state = 'needs_review' OR (d.state = 'claimed' AND d.lease_expires_at <= now() AND d.intent_step IS NOT NULL))
                FOR UPDATE
            ), done AS (
                UPDATE provision.devices AS d
                SET state = $4, review_reason = NULL, intent_step = NULL, intent_at = NULL, lease_owner = NULL, lease_expires_at = NULL,
                    updated_at = now()
                FROM target AS t
                WHERE d.run_id = $1 AND d.device_id = t.device_id
                RETURNING d.device_id
            ), logged AS (
                INSERT INTO provision.resolutions (run_id, device_id, attempt, outcome, step, review_reason, note, resolved_by, record)
                SELECT $1, t.device_id, t.attempt, $4, t.intent_step, t.review_reason, $5, $6, $7::jsonb FROM target AS t
                RETURNING device_id
            )
            SELECT (SELECT count(*) FROM done) AS resolved, (SELECT count(*) FROM logged) AS logged
            """, [.text(run), .text(device), .int(attempt), .text(outcome.rawValue), .text(note), .text(by), .json(record)],
            timeout: timeout, label: "resolve device \(device) of run \(run)")
        return try rows.first?.decode("resolved", as: Int.self) == 1
    }

    /// The stations that worked a run: id, name, host and adapters.
    public func stations(run: String) async throws -> [(id: String, name: String, host: String, adapters: [String], toolVersion: String)] {
        let rows = try await connection.query("""
            SELECT station_id, name, host, to_jsonb(adapters) AS adapters, tool_version FROM provision.stations
            WHERE run_id = $1 ORDER BY name, started_at, station_id
            """, [.text(run)], timeout: timeout, label: "read the stations of run \(run)")
        return try rows.map { row in
            (try row.decode("station_id"), try row.decode("name"), try row.decode("host"),
             try row.decodeJSON("adapters", as: [String].self), try row.decode("tool_version"))
        }
    }
}
