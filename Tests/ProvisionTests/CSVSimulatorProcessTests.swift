import Engine
import Foundation
import Testing
import EngineTestSupport
import TestSupport

/// A CSV inventory (which cannot name a device model) on the simulator: `--sim-model PATH`, and a
/// refusal that names the workflow's own model.
@Suite(.serialized) struct CSVSimulatorProcessTests {
    /// The repository's workflows and inventories, copied.
    static func examples() throws -> String {
        let dir = NSTemporaryDirectory() + "provision-csv-\(UUID().uuidString)"
        let fm = FileManager.default
        try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for sub in ["workflows", "inventory"] { try fm.copyItem(atPath: TestLine.packageRoot + "/" + sub, toPath: dir + "/" + sub) }
        // The thermostats as CSV.
        try """
            id,address,name,room,interval_s
            TH-0101,D1:0C:00:00:01:01,THERMO-0101,Kitchen,300
            TH-0102,D1:0C:00:00:01:02,THERMO-0102,Salle à manger,60
            """.write(toFile: dir + "/inventory/thermostats.csv", atomically: true, encoding: .utf8)
        return dir
    }

    static func run(_ args: [String], in dir: String) async throws -> (status: Int32, stderr: String) {
        let child = try ChildProcess(args, directory: dir)
        for await _ in child.lines {}
        let stderr = await child.stderr()
        return (await child.wait(), stderr)
    }

    @Test func aCSVInventoryRunsOnTheSimulatorWithSimModelAndTheHintNamesTheWorkflowsModel() async throws {
        let dir = try Self.examples()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let base = ["--adapter", "sim", "--quiet", "--sim-latency", "0"]
        let refused = try await Self.run(["run", "workflows/thermostat.yaml", "--inventory", "inventory/thermostats.csv", "--report", "r.json"] + base, in: dir)
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("error: `--adapter sim` needs a device model for inventory/thermostats.csv: give `--sim-model inventory/models/thermostat.yaml` (a CSV inventory cannot name one)"),
                "\(refused.stderr)")
        let other = try await Self.run(["run", "workflows/sensor-v2.yaml", "--inventory", "inventory/line-3.csv", "--report", "r.json"] + base, in: dir)
        #expect(other.stderr.contains("give `--sim-model inventory/models/sensor-v2.yaml`"), "each workflow its own model: \(other.stderr)")

        let ran = try await Self.run(["run", "workflows/thermostat.yaml", "--inventory", "inventory/thermostats.csv", "--report", "t.json",
                                      "--sim-model", "inventory/models/thermostat.yaml", "--sim-dump", "dump.json"] + base, in: dir)
        #expect(ran.status == 0, "\(ran.stderr)")
        let report = try RunReport.read(from: dir + "/t.json")
        #expect(report.devices.map(\.outcome) == [.succeeded, .succeeded])
        let hci = try await Self.run(["run", "workflows/thermostat.yaml", "--inventory", "inventory/thermostats.csv", "--report", "u.json",
                                      "--sim-model", "inventory/models/thermostat.yaml", "--adapter", "hci:tcp:127.0.0.1:1", "--quiet"], in: dir)
        #expect(hci.status == 2 && hci.stderr.contains("`--sim-model` goes with `--adapter sim`"), "\(hci.stderr)")
    }
}
