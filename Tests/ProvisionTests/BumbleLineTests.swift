import Engine
import EngineTestSupport
import Foundation
import PostgresClient
import Testing
import TestSupport

/// Two `provision run --line` station processes on a Bumble fleet, each with its own station controller
/// (a real Bluetooth stack nobody here wrote): every device is heard by both; each is worked once.
@Suite(.serialized, .enabled(if: BumbleFleet.available && PostgresCluster.shouldRun, "needs Python with Bumble and PostgreSQL: run `make test`"))
struct BumbleLineTests {
    @Test func twoStationsOnOneBumbleFleetProvisionEveryDeviceOnce() async throws {
        try await BumbleFleet.with(["--devices", "12", "--stations", "2"]) { fleet in
            let line = try TestLine()
            defer { line.remove() }
            let cluster = try await PostgresCluster.shared()
            let cs = try await cluster.createDatabase()
            let admin = try await cluster.connect(cs)
            defer { admin.close() }
            let inventory = try BumbleRunTests.inventory(for: fleet, in: line)
            let workflow = line.directory + "/workflow.yaml"
            try Data(TestLine.workflow(ackTimeout: "400ms", resend: "[100ms]", retryAttempts: 3).utf8).write(to: URL(fileURLWithPath: workflow))
            let stations = try fleet.ports.enumerated().map { i, port in
                try ChildProcess(["run", workflow, "--inventory", inventory, "--adapter", "hci:tcp:127.0.0.1:\(port)", "--quiet",
                                  "--line", cs, "--run", "bumble-line", "--station", "s\(i + 1)", "--lease", "5s", "--idle", "5s",
                                  "--concurrency", "2", "--report", "s\(i + 1).json"], directory: line.directory)
            }
            var statuses: [Int32] = []
            var errors = ""
            for s in stations {
                statuses.append(await s.wait())
                errors += await s.stderr() + "\n"
            }
            #expect(statuses == [0, 0], "\(errors)")
            let reports = try (1...2).map { try RunReport.read(from: line.directory + "/s\($0).json") }
            let worked = reports.map { Set($0.devices.map(\.id)) }
            #expect(worked[0].isDisjoint(with: worked[1]))
            #expect(!worked[0].isEmpty && !worked[1].isEmpty, "both stations worked: \(worked.map(\.count))")
            #expect(worked[0].union(worked[1]) == Set(fleet.devices.map(\.id)))
            // Each device: one succeeded outcome on the line, claimed once, committed once on the device side.
            let rows = try await admin.query("""
                SELECT d.device_id, d.state, d.attempt, count(o.*) AS outcomes FROM provision.devices AS d
                LEFT JOIN provision.outcomes AS o USING (run_id, device_id) WHERE d.run_id = 'bumble-line'
                GROUP BY d.device_id, d.state, d.attempt
                """)
            #expect(rows.count == fleet.devices.count)
            for row in rows {
                let id: String = try row.decode("device_id")
                #expect(try row.decode("state", as: String.self) == "succeeded", "\(id)")
                #expect(try row.decode("attempt", as: Int.self) == 1, "\(id) claimed more than once")
                #expect(try row.decode("outcomes", as: Int.self) == 1, "\(id)")
                let state = try fleet.state(id)
                #expect(state["commits"] as? Int == 1, "\(id) committed \(state["commits"] ?? "?") times")
                #expect((state["fff1_writes"] as? [String])?.filter { $0 == "02" }.count == 1, "\(id): \(state["fff1_writes"] ?? "?")")
            }
        }
    }
}
