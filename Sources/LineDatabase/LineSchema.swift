import Foundation
import PostgresClient

/// The line database's schema (`provision` in PostgreSQL), versioned, and the migrations that bring a
/// database to this tool's version. docs/line.md ("Schema") documents every table and column.
///
/// `migrate` runs on first use: every pending migration in one transaction, under a transaction-level
/// advisory lock, so stations starting at once apply each migration exactly once (the others wait for
/// the lock, then find nothing to do). A database whose schema is newer than the tool is refused; one
/// at this version is checked without taking the lock or needing any privilege beyond reading.
public enum LineSchema {
    /// The schema version this tool writes and reads.
    public static var version: Int { migrations.last?.version ?? 0 }

    /// The advisory lock key of schema changes ("provline" in ASCII).
    static let lockKey = 0x7072_6F76_6C69_6E65

    /// One step of the schema's history. Never edit a released migration: add the next one.
    struct Migration: Sendable {
        var version: Int
        var name: String
        var statements: [PostgresStatement]
    }

    /// What `migrate` found and did.
    public struct MigrationResult: Sendable, Equatable {
        /// The version before (nil: no line schema in this database).
        public var from: Int?
        public var to: Int
        /// Migrations this call applied (empty when another station had applied them, or none were due).
        public var applied: [Int]
    }

    /// The schema version of the database behind `connection` (nil when it has no line schema).
    public static func databaseVersion(_ connection: PostgresConnection, timeout: Duration? = nil) async throws -> Int? {
        let present = try await connection.query("SELECT to_regclass('provision.schema_migrations') IS NOT NULL AS present",
                                                  timeout: timeout, label: "read the line schema version")
        guard try present.first?.decode("present", as: Bool.self) == true else { return nil }
        let rows = try await connection.query("SELECT coalesce(max(version), 0) AS version FROM provision.schema_migrations",
                                               timeout: timeout, label: "read the line schema version")
        return try rows.first?.decode("version", as: Int.self)
    }

    /// Brings the database to `version`: nothing when it is there; otherwise every pending migration in
    /// one transaction under the schema lock. Throws `LineError.schemaTooNew` for a newer database and
    /// `LineError.cannotMigrate` when the role may not change the schema.
    @discardableResult
    public static func migrate(_ connection: PostgresConnection, toolVersion: String, timeout: Duration = .seconds(60)) async throws -> MigrationResult {
        let before = try await databaseVersion(connection, timeout: timeout)
        if let before {
            if before > version { throw LineError.schemaTooNew(database: before, tool: version) }
            if before == version { return MigrationResult(from: before, to: before, applied: []) }
        }
        do {
            return try await connection.transaction(label: "migrate the line schema", timeout: timeout) { tx in
                try await tx.pipeline([
                    PostgresStatement("SELECT pg_advisory_xact_lock($1::bigint)", [.int(lockKey)]),
                    PostgresStatement("CREATE SCHEMA IF NOT EXISTS provision"),
                    PostgresStatement("""
                        CREATE TABLE IF NOT EXISTS provision.schema_migrations (
                            version      integer PRIMARY KEY,
                            name         text NOT NULL,
                            applied_at   timestamptz NOT NULL DEFAULT now(),
                            applied_by   text NOT NULL DEFAULT current_user,
                            tool_version text NOT NULL
                        )
                        """),
                ], label: "lock the line schema")
                let rows = try await tx.query("SELECT coalesce(max(version), 0) AS version FROM provision.schema_migrations",
                                              label: "read the line schema version")
                let current = try rows.first?.decode("version", as: Int.self) ?? 0
                if current > version { throw LineError.schemaTooNew(database: current, tool: version) }
                var applied: [Int] = []
                for m in migrations where m.version > current {
                    try await tx.pipeline(m.statements + [
                        PostgresStatement("INSERT INTO provision.schema_migrations (version, name, tool_version) VALUES ($1, $2, $3)",
                                          [.int(m.version), .text(m.name), .text(toolVersion)]),
                    ], label: "apply line schema migration \(m.version) (\(m.name))")
                    applied.append(m.version)
                }
                return MigrationResult(from: before, to: version, applied: applied)
            }
        } catch let error as PostgresError where error.sqlState == SQLState.insufficientPrivilege {
            throw LineError.cannotMigrate(database: before, tool: version, cause: error)
        }
    }

    // MARK: Roles

    /// The group roles `grant` gives privileges to when no roles are named (an administrator creates
    /// them: `CREATE ROLE provision_station NOLOGIN`, docs/line.md).
    public static let stationGroup = "provision_station"
    public static let auditorGroup = "provision_auditor"

    /// Who may do what on the line (run by the schema's owner after `migrate`, and again after a
    /// migration adds a table; docs/line.md shows the same privileges):
    /// - `stations`: read everything; add runs, devices and stations and update them (claims, leases,
    ///   heartbeats); add intents, outcomes, what they hear and operators' resolutions (`provision review
    ///   --line --mark`), never change or delete them.
    /// - `auditors`: read everything, change nothing.
    /// Roles are granted to directly, so the owner needs no right to create or administer roles (a
    /// database owner has none by default); every role must exist, else `LineError.missingRoles` names
    /// them. Only the schema's owner (or a superuser) can grant: another role gets `LineError.notOwner`
    /// (PostgreSQL would only warn and grant nothing).
    public static func grant(_ connection: PostgresConnection, stations: [String] = [stationGroup], auditors: [String] = [auditorGroup],
                             timeout: Duration = .seconds(60)) async throws {
        let roles = Array(Set(stations + auditors)).sorted()
        let results = try await connection.pipeline([
            PostgresStatement("SELECT rolname FROM pg_roles WHERE rolname = ANY($1::text[])", [.textArray(roles)]),
            PostgresStatement("""
                SELECT pg_get_userbyid(n.nspowner) AS owner, current_user AS me,
                       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser
                FROM pg_namespace AS n WHERE n.nspname = 'provision'
                """),
        ], timeout: timeout, label: "check the line roles")
        let present = Set(try results[0].map { try $0.decode("rolname", as: String.self) })
        guard let owner = results[1].first else { throw LineError.noSchema }
        let schemaOwner: String = try owner.decode("owner")
        let me: String = try owner.decode("me")
        let superuser = try owner.decodeIfPresent("superuser", as: Bool.self) ?? false
        guard schemaOwner == me || superuser else {
            throw LineError.notOwner(owner: schemaOwner, role: me)
        }
        let missing = roles.filter { !present.contains($0) }
        guard missing.isEmpty else { throw LineError.missingRoles(missing) }
        let settings = PostgresStatement("SELECT set_config('provision.grant_stations', $1, true), set_config('provision.grant_auditors', $2, true)",
                                         [.text(try Self.jsonArray(stations)), .text(try Self.jsonArray(auditors))])
        _ = try await connection.transaction(label: "grant the line's privileges", timeout: timeout) { tx in
            try await tx.pipeline([
                settings,
                grantStatement,
            ], label: "grant the line's privileges")
        }
    }

    /// Grants the privileges to the roles named (as JSON arrays) in two settings of the transaction:
    /// role names are identifiers, quoted by `format('%I')`, never spliced into the statement's text.
    static let grantStatement = PostgresStatement("""
        DO $$
        DECLARE r text;
        BEGIN
            FOR r IN SELECT jsonb_array_elements_text(current_setting('provision.grant_stations')::jsonb) LOOP
                EXECUTE format('GRANT USAGE ON SCHEMA provision TO %I', r);
                EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA provision TO %I', r);
                EXECUTE format('GRANT INSERT, UPDATE ON provision.runs, provision.stations, provision.devices TO %I', r);
                EXECUTE format('GRANT INSERT ON provision.intents, provision.outcomes, provision.heard, provision.resolutions TO %I', r);
            END LOOP;
            FOR r IN SELECT jsonb_array_elements_text(current_setting('provision.grant_auditors')::jsonb) LOOP
                EXECUTE format('GRANT USAGE ON SCHEMA provision TO %I', r);
                EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA provision TO %I', r);
            END LOOP;
        END $$
        """)

    private static func jsonArray(_ names: [String]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: names), as: UTF8.self)
    }

    // MARK: History

    /// The first version with `provision.resolutions` (operators' resolutions of devices under review).
    public static let resolutionsVersion = 6

    /// Migrations that add a table: after one, the owner grants again (`provision line grant`).
    public static let addsTables: Set<Int> = [1, 5, 6]

    static let migrations: [Migration] = [
        Migration(version: 1, name: "runs, stations, devices, intents, outcomes", statements: [
            PostgresStatement("""
                CREATE TABLE provision.runs (
                    run_id           text PRIMARY KEY,
                    workflow_name    text,
                    workflow_path    text NOT NULL,
                    workflow_sha256  text NOT NULL,
                    inventory_path   text NOT NULL,
                    inventory_sha256 text NOT NULL,
                    options          jsonb NOT NULL DEFAULT '{}'::jsonb,
                    tool_version     text NOT NULL,
                    created_by       text NOT NULL,
                    started_at       timestamptz NOT NULL DEFAULT now(),
                    ended_at         timestamptz,
                    stop_reason      text,
                    stop_message     text
                )
                """),
            PostgresStatement("""
                CREATE TABLE provision.stations (
                    station_id   text PRIMARY KEY,
                    name         text NOT NULL,
                    host         text NOT NULL,
                    adapters     text[] NOT NULL DEFAULT '{}',
                    tool_version text NOT NULL,
                    pid          integer,
                    run_id       text REFERENCES provision.runs (run_id) ON DELETE SET NULL,
                    started_at   timestamptz NOT NULL DEFAULT now(),
                    heartbeat_at timestamptz NOT NULL DEFAULT now(),
                    stopped_at   timestamptz
                )
                """),
            PostgresStatement("""
                CREATE TABLE provision.devices (
                    run_id           text NOT NULL REFERENCES provision.runs (run_id) ON DELETE CASCADE,
                    device_id        text NOT NULL,
                    state            text NOT NULL DEFAULT 'pending'
                                     CHECK (state IN ('pending', 'claimed', 'succeeded', 'failed', 'needs_review')),
                    attempt          integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
                    lease_owner      text REFERENCES provision.stations (station_id),
                    lease_expires_at timestamptz,
                    claimed_at       timestamptz,
                    intent_step      text,
                    intent_at        timestamptz,
                    review_reason    text,
                    updated_at       timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (run_id, device_id),
                    CONSTRAINT devices_lease_iff_claimed
                        CHECK ((state = 'claimed') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL))
                )
                """),
            PostgresStatement("CREATE INDEX devices_leases ON provision.devices (run_id, lease_expires_at) WHERE state = 'claimed'"),
            PostgresStatement("CREATE INDEX devices_lease_owner ON provision.devices (lease_owner) WHERE state = 'claimed'"),
            PostgresStatement("""
                CREATE TABLE provision.intents (
                    run_id      text NOT NULL,
                    device_id   text NOT NULL,
                    attempt     integer NOT NULL,
                    step_index  integer NOT NULL,
                    step        text NOT NULL,
                    station_id  text NOT NULL REFERENCES provision.stations (station_id),
                    recorded_at timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (run_id, device_id, attempt, step_index),
                    FOREIGN KEY (run_id, device_id) REFERENCES provision.devices (run_id, device_id) ON DELETE CASCADE
                )
                """),
            PostgresStatement("""
                CREATE TABLE provision.outcomes (
                    run_id        text NOT NULL,
                    device_id     text NOT NULL,
                    attempt       integer NOT NULL,
                    station_id    text NOT NULL REFERENCES provision.stations (station_id),
                    outcome       text NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'skipped', 'interrupted')),
                    error_kind    text,
                    error_step    text,
                    error_message text,
                    firmware      text,
                    adapter       text,
                    rssi          integer,
                    started_at    timestamptz,
                    finished_at   timestamptz NOT NULL,
                    duration_ms   double precision,
                    record        jsonb NOT NULL,
                    recorded_at   timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (run_id, device_id, attempt),
                    FOREIGN KEY (run_id, device_id) REFERENCES provision.devices (run_id, device_id) ON DELETE CASCADE
                )
                """),
            PostgresStatement("CREATE INDEX outcomes_by_outcome ON provision.outcomes (run_id, outcome, error_kind)"),
            PostgresStatement("CREATE INDEX outcomes_by_time ON provision.outcomes (run_id, recorded_at)"),
            PostgresStatement("""
                CREATE VIEW provision.latest_outcomes AS
                SELECT DISTINCT ON (o.run_id, o.device_id) o.*
                FROM provision.outcomes AS o
                ORDER BY o.run_id, o.device_id, o.attempt DESC
                """),
            PostgresStatement("""
                CREATE VIEW provision.device_status AS
                SELECT d.run_id, d.device_id,
                       CASE WHEN d.state = 'claimed' AND d.lease_expires_at <= now()
                            THEN CASE WHEN d.intent_step IS NULL THEN 'pending' ELSE 'needs_review' END
                            ELSE d.state END AS state,
                       d.state AS stored_state, d.attempt, d.lease_owner, d.lease_expires_at,
                       d.intent_step, d.review_reason, d.updated_at
                FROM provision.devices AS d
                """),
            PostgresStatement("""
                CREATE VIEW provision.device_report AS
                SELECT s.run_id, s.device_id, s.state, s.attempt, s.review_reason,
                       o.outcome, o.error_kind, o.error_step, o.error_message, o.firmware, o.adapter, o.rssi,
                       o.started_at, o.finished_at, o.duration_ms, o.station_id, st.name AS station_name, st.host AS station_host,
                       o.record
                FROM provision.device_status AS s
                LEFT JOIN provision.latest_outcomes AS o ON o.run_id = s.run_id AND o.device_id = s.device_id
                LEFT JOIN provision.stations AS st ON st.station_id = o.station_id
                """),
            PostgresStatement("COMMENT ON SCHEMA provision IS 'provision line database: runs, stations, device claims, intents and outcomes (docs/line.md)'"),
            PostgresStatement("COMMENT ON TABLE provision.runs IS 'One run of one workflow over one inventory, shared by every station of the line'"),
            PostgresStatement("COMMENT ON TABLE provision.stations IS 'One station process: its identity, host, adapters and heartbeat; lease owner of claimed devices'"),
            PostgresStatement("COMMENT ON TABLE provision.devices IS 'Every device of a run: its state, claim (lease owner, expiry, attempt) and unresolved intent'"),
            PostgresStatement("COMMENT ON TABLE provision.intents IS 'Irreversible writes announced before they were sent (one row per device, attempt and step)'"),
            PostgresStatement("COMMENT ON TABLE provision.outcomes IS 'One outcome per device and attempt: typed columns for audits, the redacted device record as JSON'"),
            PostgresStatement("COMMENT ON VIEW provision.device_status IS 'devices with expired leases shown as they will be swept: pending, or needs_review after an intent'"),
            PostgresStatement("COMMENT ON VIEW provision.device_report IS 'One row per device of a run: current state and latest outcome, for audits'"),
        ]),
        Migration(version: 2, name: "attempt owners, inventory order, station stop reasons", statements: [
            // Who claimed the current attempt, kept after its lease ends: a station cut off from the line
            // longer than its lease may still record the outcome of work it did, as long as nobody claimed
            // the device since.
            PostgresStatement("ALTER TABLE provision.devices ADD COLUMN attempt_owner text"),
            PostgresStatement("UPDATE provision.devices SET attempt_owner = lease_owner WHERE lease_owner IS NOT NULL"),
            // The device's place in the inventory: stations that may reach every device claim in this order.
            PostgresStatement("ALTER TABLE provision.devices ADD COLUMN position integer"),
            PostgresStatement("CREATE INDEX devices_pending ON provision.devices (run_id, position, device_id) WHERE state = 'pending'"),
            PostgresStatement("ALTER TABLE provision.stations ADD COLUMN stop_reason text"),
            PostgresStatement("ALTER TABLE provision.stations ADD COLUMN stop_message text"),
            PostgresStatement("COMMENT ON COLUMN provision.devices.attempt_owner IS 'The station that claimed the current attempt (kept after its lease ends)'"),
            PostgresStatement("COMMENT ON COLUMN provision.devices.position IS 'The device''s place in the inventory (claims without a preference follow it)'"),
            PostgresStatement("COMMENT ON COLUMN provision.stations.stop_reason IS 'Why the station stopped early (interrupted, failure_threshold, journal_failed), if it did'"),
        ]),
        Migration(version: 3, name: "capture types of a run", statements: [
            // The type of each value the workflow captures (report schema provision.report/2), so the
            // merged report compares captured values as the workflow typed them.
            PostgresStatement("ALTER TABLE provision.runs ADD COLUMN capture_types jsonb"),
            PostgresStatement("COMMENT ON COLUMN provision.runs.capture_types IS 'The type of each captured value (name to uint, int, real, text, bytes, version, boolean), as the report''s run.capture_types'"),
        ]),
        Migration(version: 4, name: "station identities per adapter", statements: [
            // The address each adapter connects from (the station's identity there, under which devices
            // keep their bonds), known once the adapters are open: `line status` names it.
            PostgresStatement("ALTER TABLE provision.stations ADD COLUMN identities text[] NOT NULL DEFAULT '{}'"),
            PostgresStatement("COMMENT ON COLUMN provision.stations.identities IS 'Per adapter (in the order of adapters): the address the station connects from there, empty when none is kept (the simulator)'"),
        ]),
        Migration(version: 5, name: "devices heard by each station", statements: [
            // Which station heard which device first, so `provision line status` can name the pending
            // devices nobody hears. No foreign key: a key check would lock the device row that claims
            // take with SKIP LOCKED. One row per station and device, written once.
            PostgresStatement("""
                CREATE TABLE provision.heard (
                    run_id     text NOT NULL,
                    device_id  text NOT NULL,
                    station_id text NOT NULL,
                    heard_at   timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (run_id, device_id, station_id)
                )
                """),
            PostgresStatement("COMMENT ON TABLE provision.heard IS 'Devices each station heard (first time), for line status: the pending devices nobody hears'"),
        ]),
        Migration(version: 6, name: "operators' resolutions of devices under review, checksum widths of a run", statements: [
            // An operator's resolution of a device under review (`provision review --line --mark`): the
            // outcome found on the device, with the note, who and when, beside the doubt it replaces. One
            // per device and attempt; never changed or deleted. `record` is the device record the merged
            // report shows for the device from then on (the doubt as `review.previous`).
            PostgresStatement("""
                CREATE TABLE provision.resolutions (
                    run_id        text NOT NULL,
                    device_id     text NOT NULL,
                    attempt       integer NOT NULL,
                    outcome       text NOT NULL CHECK (outcome IN ('succeeded', 'failed')),
                    step          text,
                    review_reason text,
                    note          text NOT NULL CHECK (note <> ''),
                    resolved_by   text NOT NULL,
                    role          text NOT NULL DEFAULT current_user,
                    record        jsonb NOT NULL,
                    resolved_at   timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (run_id, device_id, attempt),
                    FOREIGN KEY (run_id, device_id) REFERENCES provision.devices (run_id, device_id) ON DELETE CASCADE
                )
                """),
            PostgresStatement("COMMENT ON TABLE provision.resolutions IS 'Operators'' resolutions of devices under review: outcome, note, who (resolved_by, and the database role) and when'"),
            // The audit view shows a resolved device as resolved: the resolution's outcome, error and
            // record in place of the doubt's, and who resolved it, when and why (new columns at the end).
            PostgresStatement("""
                CREATE OR REPLACE VIEW provision.device_report AS
                SELECT s.run_id, s.device_id, s.state, s.attempt, s.review_reason,
                       coalesce(rs.outcome, o.outcome) AS outcome,
                       CASE WHEN rs.device_id IS NULL THEN o.error_kind ELSE rs.record #>> '{error,kind}' END AS error_kind,
                       CASE WHEN rs.device_id IS NULL THEN o.error_step ELSE rs.record #>> '{error,step}' END AS error_step,
                       CASE WHEN rs.device_id IS NULL THEN o.error_message ELSE rs.record #>> '{error,message}' END AS error_message,
                       o.firmware, o.adapter, o.rssi,
                       o.started_at, o.finished_at, o.duration_ms, o.station_id, st.name AS station_name, st.host AS station_host,
                       coalesce(rs.record, o.record) AS record,
                       rs.resolved_by, rs.note AS resolution_note, rs.resolved_at
                FROM provision.device_status AS s
                LEFT JOIN provision.latest_outcomes AS o ON o.run_id = s.run_id AND o.device_id = s.device_id
                LEFT JOIN provision.stations AS st ON st.station_id = o.station_id
                LEFT JOIN provision.resolutions AS rs ON rs.run_id = s.run_id AND rs.device_id = s.device_id AND rs.attempt = s.attempt
                """),
            // The captured values that are checksums, with their width in bits (the report's
            // `run.checksums`), so the merged report shows them in hex as each station's own does.
            PostgresStatement("ALTER TABLE provision.runs ADD COLUMN checksums jsonb"),
            PostgresStatement("COMMENT ON COLUMN provision.runs.checksums IS 'The captured values that are checksums: name to width in bits, as the report''s run.checksums'"),
        ]),
    ]
}
