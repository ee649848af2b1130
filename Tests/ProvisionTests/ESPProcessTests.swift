import Foundation
import Testing

/// ESP32 Wi-Fi provisioning as a user runs it: the example workflow and inventory (workflows/esp32-wifi.yaml,
/// inventory/esp-line.yaml) on the simulated line, the release binary under `make test`. What each unit
/// ended with, what the units received, and that no passphrase or proof of possession reaches anything
/// the run writes or prints, in any encoding.
@Suite(.serialized) struct ESPProcessTests {
    static let passphrase = "demo-line-5-passphrase"
    static let pops = (1...16).map { String(format: "k7Q2-%04d", $0) }

    /// A copy of the example line in a temporary directory (the inventory's model path kept).
    static func line() throws -> String {
        let dir = NSTemporaryDirectory() + "provision-esp-\(UUID().uuidString)"
        let fm = FileManager.default
        try fm.createDirectory(atPath: dir + "/inventory/models", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: dir + "/workflows", withIntermediateDirectories: true)
        for file in ["inventory/esp-line.yaml", "inventory/models/esp32-prov.yaml", "workflows/esp32-wifi.yaml"] {
            try fm.copyItem(atPath: ChildProcess.packageRoot + "/" + file, toPath: dir + "/" + file)
        }
        return dir
    }

    /// Every form a secret could take in a file or on a terminal: as written, its UTF-8 as hex (either
    /// case), and the start of its base64.
    static func renderings(_ secret: String) -> [String] {
        let bytes = Array(secret.utf8)
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        return [secret, hex, hex.uppercased(), String(Data(bytes).base64EncodedString().prefix(12))]
    }

    static func run(_ arguments: [String], in dir: String) async throws -> (status: Int32, stdout: String, stderr: String) {
        let child = try ChildProcess(arguments, directory: dir)
        var stdout = ""
        for await l in child.lines { stdout += l + "\n" }
        let stderr = await child.stderr()
        return (await child.wait(), stdout, stderr)
    }

    @Test func theExampleLineEndsEachUnitAsItsFaultSaysAndShowsNoSecret() async throws {
        let dir = try Self.line()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let validate = try await Self.run(["validate", "workflows/esp32-wifi.yaml", "--inventory", "inventory/esp-line.yaml"], in: dir)
        #expect(validate.status == 0, "\(validate.stderr)")
        let r = try await Self.run(["run", "workflows/esp32-wifi.yaml", "--inventory", "inventory/esp-line.yaml", "--adapter", "sim",
                                    "--sim-latency", "0", "--concurrency", "16", "--report", "r.json", "--junit", "r.xml",
                                    "--events", "events.jsonl", "--trace", "att.jsonl", "--sim-dump", "dump.json"], in: dir)
        #expect(r.status == 1, "some units fail by design: \(r.stderr)")

        let report = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir + "/r.json"))) as? [String: Any]
        let devices = try #require(report?["devices"] as? [[String: Any]])
        var kinds: [String: String] = [:]
        for d in devices {
            let id = d["id"] as? String ?? ""
            let error = (d["steps"] as? [[String: Any]])?.compactMap { $0["error"] as? [String: Any] }.last
            kinds[id] = d["outcome"] as? String == "succeeded" ? "ok" : (error?["kind"] as? String ?? "?")
            if d["outcome"] as? String == "succeeded" {
                let captured = d["captured"] as? [String: Any]
                #expect(captured?["wifi_state"] as? String == "connected" && captured?["wifi_ip"] as? String == "10.40.0.23", "\(id)")
                #expect(captured?["wifi_check"] as? String == "connected 10.40.0.23", "\(id)")
                #expect((captured?["aps"] as? String)?.hasPrefix("line-5-iot (channel 6") == true, "\(id)")
            }
        }
        #expect(kinds["ESP-0005"] == "security_failed")
        #expect(kinds["ESP-0006"] == "wifi_ap_not_found")
        #expect(kinds["ESP-0007"] == "wifi_auth_failed")
        for id in ["ESP-0001", "ESP-0004", "ESP-0008", "ESP-0009", "ESP-0016"] { #expect(kinds[id] == "ok", "\(id): \(kinds)") }
        #expect(kinds.values.filter { $0 == "ok" }.count == 13, "\(kinds)")

        // The device side: what each unit was given, the passphrase only as its hash.
        let dump = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir + "/dump.json"))) as? [String: Any]
        let units = Dictionary(uniqueKeysWithValues: (dump?["devices"] as? [[String: Any]] ?? []).map { ($0["id"] as? String ?? "", $0) })
        func esp(_ id: String) -> [String: Any]? { units[id]?["esp"] as? [String: Any] }
        let hash = Array(Self.passphrase.utf8).sha256Hex
        #expect(esp("ESP-0001")?["passphrase_sha256"] as? String == hash && esp("ESP-0001")?["station"] as? String == "connected")
        #expect(esp("ESP-0001")?["custom"] as? [String] == ["custom-data: wifi?"])
        // A wrong PoP: the session failed, nothing was set or applied.
        #expect(esp("ESP-0005")?["applies"] as? Int == 0 && esp("ESP-0005")?["ssid"] == nil && esp("ESP-0005")?["failed_proofs"] as? Int == 1)
        // The unit that dropped the link on apply was given the network again on the retry, in a new session.
        #expect(esp("ESP-0009")?["applies"] as? Int == 2 && esp("ESP-0009")?["sessions"] as? Int == 2)
        #expect(esp("ESP-0009")?["station"] as? String == "connected")
        let dumpText = try String(contentsOfFile: dir + "/dump.json", encoding: .utf8)
        #expect(!dumpText.contains(Self.passphrase), "the unit keeps only the passphrase's hash")

        var texts = ["stdout": r.stdout, "stderr": r.stderr]
        for file in ["r.json", "r.journal", "r.xml", "events.jsonl", "att.jsonl"] {
            texts[file] = try String(contentsOfFile: dir + "/" + file, encoding: .utf8)
        }
        for (name, text) in texts {
            for secret in [Self.passphrase] + Self.pops {
                for form in Self.renderings(secret) {
                    #expect(!text.contains(form), "\(name) shows \(secret) as \(form)")
                }
            }
        }
    }

    @Test func theLinesPassphraseMayComeFromAnOwnerOnlySecretsFileAndOnlyFromOne() async throws {
        let dir = try Self.line()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // The inventory without the passphrase; the line's secrets file gives it.
        let inventory = dir + "/inventory/esp-line.yaml"
        let text = try String(contentsOfFile: inventory, encoding: .utf8)
            .replacingOccurrences(of: ", wifi_passphrase: \"\(Self.passphrase)\"", with: "")
        try Data(text.utf8).write(to: URL(fileURLWithPath: inventory))
        let secrets = dir + "/line.secrets"
        try Data("wifi_passphrase: \"\(Self.passphrase)\"\n".utf8).write(to: URL(fileURLWithPath: secrets))

        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: secrets)
        let refused = try await Self.run(["run", "workflows/esp32-wifi.yaml", "--inventory", "inventory/esp-line.yaml", "--adapter", "sim",
                                          "--sim-latency", "0", "--secrets", "line.secrets", "--report", "r.json", "--sim-dump", "dump.json"], in: dir)
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("line.secrets:1:1: error: the secrets file can be read or written by other users (mode 644)"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/r.json") && !FileManager.default.fileExists(atPath: dir + "/dump.json"))

        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: secrets)
        let r = try await Self.run(["run", "workflows/esp32-wifi.yaml", "--inventory", "inventory/esp-line.yaml", "--adapter", "sim",
                                    "--sim-latency", "0", "--secrets", "line.secrets", "--limit", "ESP-0001,ESP-0002",
                                    "--report", "r.json", "--events", "events.jsonl", "--sim-dump", "dump.json"], in: dir)
        #expect(r.status == 0, "\(r.stderr)")
        let dump = try String(contentsOfFile: dir + "/dump.json", encoding: .utf8)
        #expect(dump.contains(Array(Self.passphrase.utf8).sha256Hex), "the units joined with the file's passphrase")
        for file in ["r.json", "r.journal", "events.jsonl"] {
            let text = try String(contentsOfFile: dir + "/" + file, encoding: .utf8)
            for form in Self.renderings(Self.passphrase) { #expect(!text.contains(form), "\(file) shows the passphrase as \(form)") }
        }
        for form in Self.renderings(Self.passphrase) { #expect(!(r.stdout + r.stderr).contains(form)) }
    }
}

extension Array where Element == UInt8 {
    /// SHA-256 as lower-case hex (through the system's `sha256sum`: the test checks the product's digest
    /// with a tool it did not write).
    var sha256Hex: String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        let input = Pipe(), output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        guard (try? p.run()) != nil else { return "" }
        input.fileHandleForWriting.write(Data(self))
        try? input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self).split(separator: " ").first.map(String.init) ?? ""
    }
}
