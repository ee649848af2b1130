import Foundation
import LineDatabase
import PostgresClient
import TestSupport

/// A line database for one test: a fresh database on the shared cluster, migrated, with one run of
/// `devices` devices, an admin connection, and stations made on demand (each with its own connection).
struct LineFixture {
    let cluster: PostgresCluster
    let connectionString: String
    let admin: PostgresConnection
    let run: LineRun
    let devices: [String]

    static func make(devices count: Int = 20, cluster: PostgresCluster? = nil) async throws -> LineFixture {
        let cluster = if let cluster { cluster } else { try await PostgresCluster.shared() }
        let cs = try await cluster.createDatabase()
        let admin = try await cluster.connect(cs)
        try await LineSchema.migrate(admin, toolVersion: "test")
        let run = LineRun(id: "run-\(UUID().uuidString.prefix(8))",
                          workflow: LineFile(name: "test-provisioning", path: "workflows/test.yaml", sha256: String(repeating: "a", count: 64)),
                          inventory: LineFile(path: "inventory/test.yaml", sha256: String(repeating: "b", count: 64)),
                          options: ["concurrency": "16"], toolVersion: "test")
        let devices = (0..<count).map { String(format: "SN-%05d", $0) }
        let runs = LineRuns(connection: admin)
        try await runs.join(run, createdBy: "fixture")
        try await runs.addDevices(devices, run: run.id)
        return LineFixture(cluster: cluster, connectionString: cs, admin: admin, run: run, devices: devices)
    }

    /// A station joined to the run (its own connection).
    func station(_ name: String, lease: Duration = .seconds(60), timeout: Duration = .seconds(30)) async throws -> LineStation {
        try await LineStation.join(ConnectionString(connectionString), run: run,
                                   station: LineStationInfo(id: "\(name)/\(UUID().uuidString.prefix(4))", name: name, host: "test-host",
                                                            adapters: ["sim"], toolVersion: "test", pid: 1),
                                   devices: devices, lease: lease, timeout: timeout)
    }

    /// "Time passes": every lease of `station` (or of every station) expired a second ago, on the
    /// database's clock, as if the station had stopped renewing.
    func expireLeases(of station: String? = nil) async throws {
        if let station {
            try await admin.query("UPDATE provision.devices SET lease_expires_at = now() - interval '1 second' WHERE run_id = $1 AND lease_owner = $2 AND state = 'claimed'",
                                  [.text(run.id), .text(station)])
        } else {
            try await admin.query("UPDATE provision.devices SET lease_expires_at = now() - interval '1 second' WHERE run_id = $1 AND state = 'claimed'",
                                  [.text(run.id)])
        }
    }

    /// The stored state of a device: state, attempt, lease owner, intent step, review reason.
    func device(_ id: String) async throws -> (state: DeviceState, attempt: Int, owner: String?, intent: String?, review: String?) {
        let row = try await admin.query("SELECT state, attempt, lease_owner, intent_step, review_reason FROM provision.devices WHERE run_id = $1 AND device_id = $2",
                                        [.text(run.id), .text(id)])[0]
        return (try row.decode("state"), try row.decode("attempt"), try row.decodeIfPresent("lease_owner"),
                try row.decodeIfPresent("intent_step"), try row.decodeIfPresent("review_reason"))
    }

    /// Outcome rows of a device: (attempt, station, outcome).
    func outcomes(_ id: String) async throws -> [(attempt: Int, station: String, outcome: String)] {
        try await admin.query("SELECT attempt, station_id, outcome FROM provision.outcomes WHERE run_id = $1 AND device_id = $2 ORDER BY attempt",
                              [.text(run.id), .text(id)]).map { row in
            (try row.decode("attempt"), try row.decode("station_id"), try row.decode("outcome"))
        }
    }

    static func outcome(_ claim: LineClaim, _ kind: LineOutcome.Kind = .succeeded, firmware: String = "2.4.1") -> LineOutcome {
        LineOutcome(device: claim.device, attempt: claim.attempt, outcome: kind, errorKind: kind == .failed ? "verify_failed" : nil,
                    firmware: firmware, adapter: "sim", rssi: -60, started: Date(timeIntervalSince1970: 1_796_072_994),
                    finished: Date(timeIntervalSince1970: 1_796_072_995.5), durationMs: 1500,
                    record: #"{"id":"\#(claim.device)","outcome":"\#(kind.rawValue)","captured":{"fw":"\#(firmware)"}}"#)
    }

    func close() { admin.close() }
}
