import BLE
import Engine
import Foundation
import Testing
import EngineTestSupport
import TestSupport

/// `provision run` with ESP32 Wi-Fi provisioning over `hci:tcp:` against the Bumble ESP fixture
/// (Tests/Fixtures/esp_device.py: ESP32-like units speaking protocomm over GATT on the fleet's paced
/// radio), checked on the device side: what each unit was given and where its station ended.
@Suite(.serialized, .enabled(if: BumbleFleet.available, "needs Python with Bumble: run `make test`, or set PROVISION_PYTHON"))
struct BumbleESPTests {
    static let passphrase = "demo-line-5-passphrase"

    static let workflow = """
        name: esp-line
        defaults:
          timeout: 20s
          retry: { attempts: 2, backoff: [200ms], on: [timeout, disconnected] }
        steps:
          - connect: { mtu: 247, timeout: 20s }
          - wifi_provision: { ssid: "${ssid}", passphrase: "${wifi_passphrase}", security: 2, username: wifiprov, pop: "${pop}", timeout: 45s }
          - esp_custom: { endpoint: custom-data, value: { utf8: "wifi?" }, capture: wifi_check }
          - verify: { value: "${wifi_check}", matches: '^connected ' }
          - disconnect: {}

        """

    /// The issue's line: 16 units, 7.5 ms each way on the link; unit 5's label carries the wrong PoP,
    /// unit 9 is out of the access point's range.
    static let line = ["--devices", "0", "--esp-devices", "16", "--link-latency", "7.5ms", "--esp-join-time", "500ms"]
    static let fleet = line + ["--esp-fault", "5:wrong_pop", "--esp-fault", "9:no_ap"]

    /// The line's files: the inventory (each unit's PoP from its label), the workflow, the secrets file.
    static func files(for fleet: BumbleFleet, in line: TestLine) throws {
        var inventory = "secrets: [pop]\ndefaults:\n  vars: { ssid: line-5-iot }\ndevices:\n"
        for d in fleet.espDevices {
            inventory += "  - { id: \(d.id), name: \(d.name), address: \"\(d.address)\", vars: { pop: \"pop-\(d.id)\" } }\n"
        }
        try Data(inventory.utf8).write(to: URL(fileURLWithPath: line.directory + "/esp-line.yaml"))
        try Data(Self.workflow.utf8).write(to: URL(fileURLWithPath: line.directory + "/esp.yaml"))
        // The passphrase comes from the line's secrets file, as on a real line.
        let secrets = line.directory + "/line.secrets"
        try Data("wifi_passphrase: \"\(Self.passphrase)\"\n".utf8).write(to: URL(fileURLWithPath: secrets))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: secrets)
    }

    static let arguments = ["run", "esp.yaml", "--inventory", "esp-line.yaml", "--secrets", "line.secrets", "--concurrency", "16", "--slots", "16",
                            "--report", "report.json", "--events", "events.jsonl"]

    @Test func sixteenUnitsAllJoin() async throws {
        try await BumbleFleet.with(Self.line) { fleet in
            let line = try TestLine()
            defer { line.remove() }
            try Self.files(for: fleet, in: line)
            let child = try ChildProcess(Self.arguments + ["--adapter", fleet.spec], directory: line.directory)
            for await _ in child.lines {}
            let stderr = await child.stderr()
            #expect(await child.wait() == 0, "\(stderr)")
            let report = try RunReport.read(from: line.directory + "/report.json")
            #expect(report.devices.count == 16 && report.devices.allSatisfy { $0.outcome == .succeeded })
            for d in fleet.espDevices {
                let state = try fleet.state(d.id)
                #expect(state["station"] as? String == "connected", "\(d.id)")
                #expect(state["passphrase_sha256"] as? String == Array(Self.passphrase.utf8).sha256Hex, "\(d.id)")
            }
        }
    }

    @Test func sixteenUnitsJoinAndEachFaultFailsOnlyItsOwnUnitWithItsKind() async throws {
        try await BumbleFleet.with(Self.fleet) { fleet in
            #expect(fleet.espDevices.count == 16)
            let line = try TestLine()
            defer { line.remove() }
            try Self.files(for: fleet, in: line)
            let child = try ChildProcess(Self.arguments + ["--adapter", fleet.spec], directory: line.directory)
            var stdout = ""
            for await l in child.lines { stdout += l + "\n" }
            let stderr = await child.stderr()
            #expect(await child.wait() == 1, "two units fail by design: \(stderr)")

            let report = try RunReport.read(from: line.directory + "/report.json")
            let byID = Dictionary(uniqueKeysWithValues: report.devices.map { ($0.id, $0) })
            #expect(byID["ESP-0005"]?.outcome == .failed && byID["ESP-0005"]?.error?.kind.rawValue == "security_failed")
            #expect(byID["ESP-0009"]?.outcome == .failed && byID["ESP-0009"]?.error?.kind.rawValue == "wifi_ap_not_found")
            let hash = Array(Self.passphrase.utf8).sha256Hex
            for d in fleet.espDevices {
                let state = try fleet.state(d.id)
                let counters = state["counters"] as? [String: Any] ?? [:]
                switch d.id {
                case "ESP-0005":
                    // The session failed at the proof: nothing was set, nothing applied.
                    #expect(counters["failed_proofs"] as? Int == 1 && counters["set_configs"] as? Int == 0 && counters["applies"] as? Int == 0)
                    #expect(state["passphrase_sha256"] is NSNull)
                case "ESP-0009":
                    #expect(state["station"] as? String == "connection_failed" && counters["applies"] as? Int == 1)
                default:
                    #expect(byID[d.id]?.outcome == .succeeded, "\(d.id): \(byID[d.id]?.error?.message ?? "")")
                    #expect(state["station"] as? String == "connected", "\(d.id)")
                    #expect(counters["sessions"] as? Int == 1 && counters["applies"] as? Int == 1, "\(d.id): \(counters)")
                }
                if d.id != "ESP-0005" {
                    // The unit keeps the passphrase only as the hash it compares with.
                    #expect(state["passphrase_sha256"] as? String == hash, "\(d.id)")
                }
                let text = try String(contentsOfFile: d.state_file, encoding: .utf8)
                #expect(!text.contains(Self.passphrase) && !text.contains("pop-\(d.id)"), "\(d.id)'s state shows a secret")
            }
            for file in ["report.json", "report.journal", "events.jsonl"] {
                let text = try String(contentsOfFile: line.directory + "/" + file, encoding: .utf8)
                #expect(!text.contains(Self.passphrase) && !text.contains("pop-ESP-"), "\(file) shows a secret")
            }
            #expect(!(stdout + stderr).contains(Self.passphrase))
        }
    }
}
