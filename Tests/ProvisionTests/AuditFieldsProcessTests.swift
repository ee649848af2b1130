import Engine
import EngineTestSupport
import Foundation
import Testing
import TestSupport

/// `provision report` over what a station and the link's security say: `station` and `security.*`
/// filtered, grouped and in the CSV, on reports the binary wrote.
@Suite(.serialized, .timeLimit(.minutes(3))) struct AuditFieldsProcessTests {
    private func run(_ arguments: [String], in dir: String) async throws -> (status: Int32, stdout: [String]) {
        try await RunProcessTests.run(arguments, in: dir)
    }

    @Test func stationAndSecurityAreFieldsOfEveryQuery() async throws {
        let dir = try SecureLine.copy()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let ran = try await run(["run", "sensor-v2-secure.yaml", "--inventory", "inventory.yaml", "--adapter", "sim", "--sim-latency", "0",
                                 "--report", "line.json", "--quiet"], in: dir)
        #expect(ran.status == 1, "SN-S005 refuses pairing")
        let report = try RunReport.read(from: dir + "/line.json")
        // A station away from a line is its host.
        let host = ProcessInfo.processInfo.hostName
        #expect(report.devices.allSatisfy { $0.station == host })

        let byStation = try await run(["report", "line.json", "--group-by", "station", "--json"], in: dir)
        #expect(byStation.status == 0)
        #expect(byStation.stdout.joined().contains("\"\(host)\""), "\(byStation.stdout)")
        let mine = try await run(["report", "line.json", "--where", "station == \"\(host)\" and security.level == authenticated", "--json"], in: dir)
        #expect(mine.status == 0)
        let selected = try JSONSerialization.jsonObject(with: Data(mine.stdout.joined().utf8)) as? [String: Any]
        let ids = ((selected?["devices"] as? [[String: Any]]) ?? []).compactMap { $0["id"] as? String }
        #expect(ids.count == report.devices.count - 1 && !ids.contains("SN-S005"), "\(ids)")
        let bonds = try await run(["report", "line.json", "--group-by", "security.bond"], in: dir)
        #expect(bonds.status == 0)
        #expect(bonds.stdout.contains { $0.contains("made") } && bonds.stdout.contains { $0.contains("none") }, "\(bonds.stdout)")
        #expect(try await run(["report", "line.json", "--where", "security.bond == stolen"], in: dir).status == 2, "an enumeration is checked")

        let csv = try await run(["report", "line.json", "--csv"], in: dir)
        let header = try #require(csv.stdout.first).split(separator: ",").map(String.init)
        let station = try #require(header.firstIndex(of: "station"))
        let level = try #require(header.firstIndex(of: "security_level"))
        let method = try #require(header.firstIndex(of: "security_method"))
        let row = try #require(csv.stdout.dropFirst().first { $0.hasPrefix("SN-S001,") }).split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        #expect(row[station] == host && row[level] == "authenticated" && row[method] == "passkey_entry", "\(row)")
    }
}

extension AuditFieldsProcessTests {
    @Test func comparingReportsOfDifferentWorkflowsWarnsWhateverTheFormat() async throws {
        let dir = try SecureLine.copy()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let common = ["--inventory", "inventory.yaml", "--adapter", "sim", "--sim-latency", "0", "--bonds", "bonds.json", "--quiet"]
        #expect(try await run(["run", "sensor-v2-secure.yaml"] + common + ["--report", "line.json"], in: dir).status == 1)
        #expect(try await run(["run", "fleet-audit-secure.yaml"] + common + ["--report", "audit.json"], in: dir).status == 1)
        for format in [[], ["--json"], ["--csv"]] {
            let child = try ChildProcess(["report", "audit.json", "--compare", "line.json"] + format, directory: dir)
            var stdout: [String] = []
            for await l in child.lines { stdout.append(l) }
            let stderr = await child.stderr()
            #expect(await child.wait() == 0)
            #expect(stderr.contains("warning: the reports come from different workflows: "), "\(format): \(stderr)")
            #expect(stderr.contains("ran `sensor-v2-secure-provisioning`") || stderr.contains("ran `sensor-v2"), "\(stderr)")
            #expect(!stdout.contains { $0.hasPrefix("warning:") }, "the warning stays off the data")
        }
        // One workflow against itself: no warning.
        let same = try ChildProcess(["report", "line.json", "--compare", "line.json", "--json"], directory: dir)
        for await _ in same.lines {}
        #expect(await same.stderr() == "")
        #expect(await same.wait() == 0)
    }
}

extension AuditFieldsProcessTests {
    @Test func checksumsTheWorkflowComputesShowAsHex() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let workflow = TestLine.workflow().replacingOccurrences(
            of: "steps:\n", with: "steps:\n  - set: { id: config_crc, crc: CRC-16/CCITT-FALSE, of: \"${config}\" }\n")
        let paths = try line.write(count: 2, workflow: workflow)
        let ran = try await run(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet", "--sim-latency", "0",
                                 "--report", "r.json"], in: line.directory)
        #expect(ran.status == 0)
        let report = try RunReport.read(from: line.directory + "/r.json")
        #expect(report.run.checksums == ["config_crc": 16])
        let csv = try await run(["report", "r.json", "--csv", "--html", "r.html"], in: line.directory)
        let header = try #require(csv.stdout.first).split(separator: ",").map(String.init)
        let column = try #require(header.firstIndex(of: "config_crc"))
        let html = try String(contentsOfFile: line.directory + "/r.html", encoding: .utf8)
        for (d, row) in zip(report.devices, csv.stdout.dropFirst()) {
            // A number in the JSON (machine-readable), hex where a person reads it.
            guard case .integer(let n)? = d.captured["config_crc"] else {
                Issue.record("\(d.id): no config_crc in \(d.captured)")
                continue
            }
            let hex = "0x" + String(repeating: "0", count: max(0, 4 - String(n, radix: 16).count)) + String(n, radix: 16, uppercase: true)
            let cells = row.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            #expect(cells[column] == hex, "\(d.id): \(cells[column])")
            #expect(html.contains("<td>\(hex)</td>"), "\(d.id) in the HTML report")
        }
    }
}
