import BLESimulator
import Engine
import EngineTestSupport
import Foundation
import LineDatabase
import LineStore
import PostgresClient
import TestSupport
import Workflow

/// A line for one test: a fresh database (on the shared cluster, or one of its own), a small production
/// line on the simulator (TestLine), and stations made on demand, each a `LineRunStore` with its own
/// simulated radio over a device-side state file all stations share.
struct LineBench: Sendable {
    let cluster: PostgresCluster
    let connectionString: String
    let admin: PostgresConnection
    let line: TestLine
    let loaded: TestLine.Loaded
    let runID: String
    /// The device side every station's simulator appends to.
    var statePath: String { line.directory + "/devices.state" }

    static func make(devices: Int, faults: [Int: String] = [:], workflow: String = TestLine.workflow(),
                     cluster: PostgresCluster? = nil) async throws -> LineBench {
        let cluster = if let cluster { cluster } else { try await PostgresCluster.shared() }
        let cs = try await cluster.createDatabase()
        let admin = try await cluster.connect(cs)
        let line = try TestLine()
        let loaded = try line.load(try line.write(count: devices, workflow: workflow, faults: faults))
        return LineBench(cluster: cluster, connectionString: cs, admin: admin, line: line, loaded: loaded,
                         runID: "test-run-\(UUID().uuidString.prefix(6))")
    }

    /// A station's store: short leases, claims of what its radio hears (or any device).
    func store(_ name: String, lease: Duration = .seconds(3), heardOnly: Bool = true, idle: Duration? = .seconds(3),
               connectionString: String? = nil, intentWait: Duration = .seconds(1), closeWait: Duration = .seconds(20)) throws -> LineRunStore {
        let run = LineRun(id: runID, workflow: LineFile(name: loaded.workflow.name, path: loaded.workflow.path, sha256: loaded.workflow.sha256),
                          inventory: LineFile(path: loaded.inventory.path, sha256: loaded.inventory.sha256), toolVersion: "test")
        var settings = LineRunStore.Settings(
            connectionString: try ConnectionString(connectionString ?? self.connectionString), run: run,
            station: LineStationInfo.thisProcess(name: name, adapters: ["sim"], toolVersion: "test"),
            devices: loaded.inventory.devices.map(\.id), spoolPath: line.directory + "/\(name).spool",
            policy: ClaimPolicy(heardOnly: heardOnly, retry: .milliseconds(50), maxRetry: .milliseconds(300), idleLimit: idle))
        settings.lease = lease
        settings.timeout = .seconds(5)
        settings.intentWait = intentWait
        settings.closeWait = closeWait
        return LineRunStore(settings)
    }

    /// A station's simulated radio, hearing `hears` (default: every device), on the shared device side.
    func radio(hears: [String]? = nil, latency: Double = 0.2, seed: UInt64 = 1) throws -> SimulatedCentral {
        var heard = loaded
        if let hears {
            let wanted = Set(hears)
            heard.inventory.devices = loaded.inventory.devices.filter { wanted.contains($0.id) }
        }
        return try line.simulator(heard, latency: latency, statePath: statePath, seed: seed)
    }

    /// Runs one station to its end.
    func run(_ store: LineRunStore, radio: SimulatedCentral, name: String, concurrency: Int = 4,
             controller: RunController = RunController(), events: EventBus = EventBus()) async throws -> RunReport {
        var options = line.options(name)
        options.store = store
        options.concurrency = concurrency
        options.station = name
        return try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices, adapters: [radio],
                                    options: options, events: events, controller: controller)
    }

    /// The device side as every station left it: the shared state file folded by a fresh simulator.
    func deviceSide() async throws -> SimulatorDump {
        try await line.simulator(loaded, latency: 0, statePath: statePath).dump()
    }

    /// Per device: its stored state and how many outcome rows it has (and of which outcomes).
    func outcomes() async throws -> [String: (state: String, rows: [String])] {
        let rows = try await admin.query("""
            SELECT d.device_id, d.state, coalesce(array_to_json(array_agg(o.outcome ORDER BY o.attempt) FILTER (WHERE o.outcome IS NOT NULL)), '[]') AS outcomes
            FROM provision.devices AS d LEFT JOIN provision.outcomes AS o ON o.run_id = d.run_id AND o.device_id = d.device_id
            WHERE d.run_id = $1 GROUP BY d.device_id, d.state
            """, [.text(runID)])
        var out: [String: (state: String, rows: [String])] = [:]
        for row in rows {
            out[try row.decode("device_id")] = (try row.decode("state"), try row.decodeJSON("outcomes", as: [String].self))
        }
        return out
    }

    func close() {
        admin.close()
        line.remove()
    }
}

/// Run events as a stream, for tests that act when something happens.
final class EventTap: RunEventSink {
    let events: AsyncStream<RunEvent>
    private let continuation: AsyncStream<RunEvent>.Continuation

    init() {
        (events, continuation) = AsyncStream.makeStream(of: RunEvent.self)
    }

    func emit(_ event: RunEvent) { continuation.yield(event) }
    func finish() async { continuation.finish() }
}
