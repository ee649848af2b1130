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
        let results = try await connection.pipeline([
            PostgresStatement("""
                INSERT INTO provision.runs (run_id, workflow_name, workflow_path, workflow_sha256, inventory_path, inventory_sha256,
                                            options, tool_version, created_by)
                VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9)
                ON CONFLICT (run_id) DO NOTHING
                RETURNING run_id
                """, [.text(run.id), .text(run.workflow.name), .text(run.workflow.path), .text(run.workflow.sha256),
                      .text(run.inventory.path), .text(run.inventory.sha256), .json(options), .text(run.toolVersion), .text(station)]),
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

    /// Adds devices to a run as `pending` (devices already there are left as they are). Returns how many
    /// were new. Large inventories go in chunks of 10,000 ids per statement.
    @discardableResult
    public func addDevices(_ devices: [String], run: String) async throws -> Int {
        var added = 0
        var start = 0
        while start < devices.count {
            let chunk = Array(devices[start..<min(start + 10_000, devices.count)])
            let rows = try await connection.query("""
                INSERT INTO provision.devices (run_id, device_id)
                SELECT $1, id FROM unnest($2::text[]) AS u(id)
                ON CONFLICT (run_id, device_id) DO NOTHING
                """, [.text(run), .textArray(chunk)], timeout: timeout, label: "add devices to run \(run)")
            added += rows.rowsAffected ?? 0
            start += chunk.count
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

    /// Marks a station stopped (its leases, if any, still expire as usual).
    public func stopped(station: String) async throws {
        try await connection.query("UPDATE provision.stations SET stopped_at = now(), heartbeat_at = now() WHERE station_id = $1",
                                   [.text(station)], timeout: timeout, label: "mark station \(station) stopped")
    }

    /// Records the end of a run (a stop reason when the line was stopped).
    public func end(run: String, stopReason: String? = nil, message: String? = nil) async throws {
        try await connection.query("""
            UPDATE provision.runs SET ended_at = coalesce(ended_at, now()), stop_reason = $2, stop_message = $3 WHERE run_id = $1
            """, [.text(run), .text(stopReason), .text(message)], timeout: timeout, label: "end run \(run)")
    }

    // MARK: Reading

    /// A run's devices by state, its stations and their leases, and the recent rate (`provision line status`).
    public struct Status: Sendable, Equatable {
        public struct Station: Sendable, Equatable {
            public var id: String
            public var name: String
            public var host: String
            public var adapters: [String]
            public var heartbeat: Date
            public var stopped: Date?
            /// Devices whose lease this station holds now.
            public var leases: Int
        }
        /// Devices per state, expired leases counted as what the next sweep makes them.
        public var counts: [DeviceState: Int]
        public var stations: [Station]
        /// Outcomes recorded in the last minute.
        public var outcomesLastMinute: Int
        public var total: Int { counts.values.reduce(0, +) }
    }

    public func status(run: String) async throws -> Status {
        let results = try await connection.pipeline([
            PostgresStatement("SELECT state, count(*) AS n FROM provision.device_status WHERE run_id = $1 GROUP BY state", [.text(run)]),
            PostgresStatement("""
                SELECT s.station_id, s.name, s.host, to_jsonb(s.adapters) AS adapters, s.heartbeat_at, s.stopped_at,
                       (SELECT count(*) FROM provision.devices AS d
                        WHERE d.run_id = $1 AND d.lease_owner = s.station_id AND d.state = 'claimed' AND d.lease_expires_at > now()) AS leases
                FROM provision.stations AS s WHERE s.run_id = $1 ORDER BY s.name, s.station_id
                """, [.text(run)]),
            PostgresStatement("SELECT count(*) AS n FROM provision.outcomes WHERE run_id = $1 AND recorded_at > now() - interval '1 minute'",
                              [.text(run)]),
        ], timeout: timeout, label: "read the status of run \(run)")
        var counts: [DeviceState: Int] = [:]
        for row in results[0] { counts[try row.decode("state", as: DeviceState.self)] = try row.decode("n") }
        let stations = try results[1].map { row in
            Status.Station(id: try row.decode("station_id"), name: try row.decode("name"), host: try row.decode("host"),
                           adapters: try row.decodeJSON("adapters", as: [String].self), heartbeat: try row.decode("heartbeat_at"),
                           stopped: try row.decodeIfPresent("stopped_at"), leases: try row.decode("leases"))
        }
        let recent: Int = try results[2].first?.decode("n") ?? 0
        return Status(counts: counts, stations: stations, outcomesLastMinute: recent)
    }

    /// One device of a run for the merged report: its state and its latest outcome's record, if any.
    public struct DeviceEntry: Sendable, Equatable {
        public var device: String
        public var state: DeviceState
        public var attempt: Int
        /// The latest outcome's device record (JSON), nil when the device has none yet.
        public var record: String?
        public var station: String?
    }

    /// Every device of a run in id order with its latest outcome (what `provision report --line` merges).
    public func devices(run: String) async throws -> [DeviceEntry] {
        let rows = try await connection.query("""
            SELECT s.device_id, s.state, s.attempt, o.record, o.station_id
            FROM provision.device_status AS s
            LEFT JOIN provision.latest_outcomes AS o ON o.run_id = s.run_id AND o.device_id = s.device_id
            WHERE s.run_id = $1
            ORDER BY s.device_id
            """, [.text(run)], timeout: timeout, label: "read the devices of run \(run)")
        return try rows.map { row in
            DeviceEntry(device: try row.decode("device_id"), state: try row.decode("state"), attempt: try row.decode("attempt"),
                        record: try row.decodeIfPresent("record"), station: try row.decodeIfPresent("station_id"))
        }
    }
}
