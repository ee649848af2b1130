import EngineTestSupport
import Foundation
import Testing

/// Link security and the typed workflow language together, as a user runs them: the smart-lock example
/// (typed reads, `set:`, `when:`, measurements, a declared secret key) on a lock whose settings and
/// battery level need an encrypted or authenticated link, commissioned with Passkey Entry and `--bonds`,
/// then audited over the bonds — both runs traced (`--trace`, through the ATT tracing wrapper). The
/// report carries `security` beside `measurements` and typed `captured`; no pairing key and no passkey
/// is in anything either run wrote or printed, the trace included.
@Suite(.serialized, .timeLimit(.minutes(3))) struct SecureAuditProcessTests {
    /// The example smart-lock line in a temporary directory, with its model made secure: the battery
    /// level needs an encrypted link, the command and the lock's settings an authenticated one, and each
    /// unit displays the passkey on its label (the inventory's secret `passkey`).
    private func secureLockLine() throws -> String {
        let dir = NSTemporaryDirectory() + "provision-secure-audit-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir + "/models", withIntermediateDirectories: true)
        let root = TestLine.packageRoot

        var model = try String(contentsOfFile: root + "/inventory/models/smart-lock.yaml", encoding: .utf8)
        let modelEdits = [
            ("model: smart-lock\n", "model: smart-lock-secure\n"),
            (#"{ uuid: 2A19, properties: [read, notify], value: { uint8: "${battery}" } }"#,
             #"{ uuid: 2A19, properties: [read, notify], value: { uint8: "${battery}" }, security: { read: encrypted } }"#),
            ("{ uuid: FFE1, properties: [write] }", "{ uuid: FFE1, properties: [write], security: { write: authenticated } }"),
            (#"{ uuid: FFE4, properties: [read, write], value: "" }"#,
             #"{ uuid: FFE4, properties: [read, write], value: "", security: authenticated }"#),
            (#"{ uuid: FFE5, properties: [read, write], value: { hex: "3c00" } }"#,
             #"{ uuid: FFE5, properties: [read, write], value: { hex: "3c00" }, security: authenticated }"#),
            (#"{ uuid: FFE6, properties: [read, write, notify], value: { hex: "00" } }"#,
             #"{ uuid: FFE6, properties: [read, write, notify], value: { hex: "00" }, security: authenticated }"#),
        ]
        for (old, new) in modelEdits {
            #expect(model.contains(old), "the smart-lock model changed: \(old)")
            model = model.replacingOccurrences(of: old, with: new)
        }
        model += """

            security:
              io: display
              passkey: "${passkey}"
              secure_connections: true
              require_mitm: true
              bond: true

            """
        try model.write(toFile: dir + "/models/smart-lock-secure.yaml", atomically: true, encoding: .utf8)

        var workflow = try String(contentsOfFile: root + "/workflows/smart-lock.yaml", encoding: .utf8)
        #expect(workflow.contains("  - connect: {}\n"), "the smart-lock workflow changed")
        workflow = workflow.replacingOccurrences(of: "  - connect: {}\n",
                                                 with: "  - connect: { security: authenticated, passkey: \"${passkey}\" }\n")
        try workflow.write(toFile: dir + "/smart-lock-secure.yaml", atomically: true, encoding: .utf8)

        var inventory = try String(contentsOfFile: root + "/inventory/smart-lock-line.yaml", encoding: .utf8)
        #expect(inventory.contains("simulator: { model: models/smart-lock.yaml }\n"), "the smart-lock line changed")
        inventory = inventory.replacingOccurrences(of: "simulator: { model: models/smart-lock.yaml }\n",
                                                   with: "simulator: { model: models/smart-lock-secure.yaml }\nsecrets: [passkey]\n")
        for n in 1...8 {
            let old = "address: \"D0:0C:00:00:00:0\(n)\", vars: { lock_key:"
            #expect(inventory.contains(old), "the smart-lock line changed: SL-000\(n)")
            inventory = inventory.replacingOccurrences(of: old, with: "address: \"D0:0C:00:00:00:0\(n)\", vars: { passkey: \"\(Self.passkey(n))\", lock_key:")
        }
        try inventory.write(toFile: dir + "/inventory.yaml", atomically: true, encoding: .utf8)

        try Self.audit.write(toFile: dir + "/audit.yaml", atomically: true, encoding: .utf8)
        return dir
    }

    /// SL-000n's passkey.
    private static func passkey(_ n: Int) -> String { "70\(n)3\(n)9" }

    /// Typed reads and measurements over the bond the commissioning made; changes nothing.
    private static let audit = """
        name: smart-lock-audit-secure
        vars:
          site: { utf8: [1, 32] }
        defaults:
          timeout: 5s
          retry: { attempts: 3, backoff: [500ms, 1s], on: [timeout, disconnected, connect_failed] }
        steps:
          - scan: { name: "${name}", services: [FFE0], timeout: 10s }
          - connect: { security: authenticated, passkey: "${passkey}" }
          - read: { id: firmware, service: 180A, characteristic: 2A26, as: version }
          - read: { id: battery, service: 180F, characteristic: 2A19, as: uint8 }
          - read: { id: site_stored, service: FFE0, characteristic: FFE4, as: utf8 }
          - read: { id: state, service: FFE0, characteristic: FFE3, as: uint8 }
          - name: battery level
            verify: { value: "${battery}", min: 30, max: 100, unit: "%" }
            continue_on_error: true
          - name: site name kept
            verify: { value: "${site_stored}", equals: "${site}" }
            continue_on_error: true
          - name: commissioned
            verify: { value: "${state}", equals: 2 }
            continue_on_error: true
          - disconnect

        """

    private func run(_ arguments: [String], in dir: String) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await ChildProcess.run(arguments, in: dir)
    }

    private func json(_ path: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any] ?? [:]
    }

    private func measurement(_ device: [String: Any], _ name: String) -> [String: Any]? {
        (device["measurements"] as? [[String: Any]])?.first { $0["name"] as? String == name }
    }

    /// The ATT trace's records, as (link, name, value).
    private func trace(_ path: String) throws -> [(link: String, name: String, value: String)] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map { line in
            let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] ?? [:]
            return (o["link"] as? String ?? "", o["name"] as? String ?? "", o["value"] as? String ?? "")
        }
    }

    @Test func aSecureLockLineIsCommissionedAndAuditedWithMeasurementsSecurityAndTracesAndNoKeyShows() async throws {
        let dir = try secureLockLine()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let ids = (1...8).map { "SL-000\($0)" }
        let common = ["--inventory", "inventory.yaml", "--adapter", "sim", "--sim-latency", "0", "--bonds", "bonds.json",
                      "--sim-state", "devices.state"]

        // 1. Commissioning: every unit paired with its passkey and bonded; SL-0008 fails its battery check.
        let first = try await run(["run", "smart-lock-secure.yaml"] + common
                                  + ["--report", "line.json", "--events", "line.events", "--junit", "line.xml", "--html", "line.html",
                                     "--trace", "line.trace.jsonl", "--sim-dump", "line-dump.json"], in: dir)
        #expect(first.status == 1, "\(first.stderr)")
        let line = try json(dir + "/line.json")
        #expect(line["schema"] as? String == "provision.report/2")
        let captureTypes = (line["run"] as? [String: Any])?["capture_types"] as? [String: String]
        #expect(captureTypes?["battery"] == "uint" && captureTypes?["firmware"] == "version" && captureTypes?["bolt_state"] == "uint")
        let lineDevices = line["devices"] as? [[String: Any]] ?? []
        #expect(lineDevices.compactMap { $0["id"] as? String } == ids)
        for d in lineDevices {
            let id = d["id"] as? String ?? "?"
            let security = d["security"] as? [String: Any]
            #expect(security?["level"] as? String == "authenticated" && security?["method"] as? String == "passkey_entry", "\(id)")
            #expect(security?["bond"] as? String == "made" && security?["key_size"] as? Int == 16, "\(id)")
            #expect(security?["secure_connections"] as? Bool == true, "\(id)")
            let captured = d["captured"] as? [String: Any] ?? [:]
            // Typed values read over the encrypted link: the battery level (encrypted) as a number.
            #expect(captured["battery"] as? Int == (id == "SL-0008" ? 12 : 80), "\(id)")
            #expect(captured["firmware"] as? String == (["SL-0003", "SL-0006"].contains(id) ? "1.9.2" : "2.1.0"), "\(id)")
            let battery = measurement(d, "battery level")
            #expect(battery?["value"] as? Int == captured["battery"] as? Int && battery?["unit"] as? String == "%", "\(id)")
            if id == "SL-0008" {
                #expect(d["outcome"] as? String == "failed")
                #expect((d["error"] as? [String: Any])?["kind"] as? String == "verify_failed")
                #expect(battery?["outcome"] as? String == "fail")
                #expect(battery?["message"] as? String == "battery level 12 % is below min 30 %")
            } else {
                #expect(d["outcome"] as? String == "succeeded", "\(id): \(d["error"] ?? "")")
                #expect(battery?["outcome"] as? String == "pass", "\(id)")
                // Written and read back over authenticated links: the site name, the bolt, the commit.
                #expect(measurement(d, "site name stored")?["outcome"] as? String == "pass", "\(id)")
                #expect(captured["bolt_state"] as? Int == 1 && captured["state"] as? Int == 2, "\(id)")
                // A value derived from the secret key is a secret too.
                #expect(captured["key_check"] as? String == "***", "\(id)")
            }
        }
        // The devices' side: one pairing each; every command arrived on an authenticated link; settings stored.
        let lineDump = try json(dir + "/line-dump.json")
        for d in lineDump["devices"] as? [[String: Any]] ?? [] {
            let id = d["id"] as? String ?? "?"
            let security = d["security"] as? [String: Any]
            #expect((security?["pairings"] as? [[String: Any]])?.count == 1 && security?["encryptions"] as? Int == 0, "\(id)")
            let links = (d["commands"] as? [[String: Any]] ?? []).compactMap { $0["link"] as? String }
            #expect(links.allSatisfy { $0 == "authenticated" }, "\(id)")
            if id != "SL-0008" {
                #expect(!links.isEmpty, "\(id)")
                #expect((d["stored"] as? [String: String])?["FFE0/FFE6"] == "01", "\(id)")
            }
        }
        // The trace went through the wrapper with security on: every unit's ATT traffic, and no request
        // refused for want of encryption or authentication (each link was secured before it was used).
        let lineTrace = try trace(dir + "/line.trace.jsonl")
        #expect(Set(lineTrace.map(\.link)) == Set(ids))
        #expect(!lineTrace.contains { $0.name == "Error Response" && ($0.value.hasSuffix("05") || $0.value.hasSuffix("0f")) })

        // 2. The audit over the bonds: nobody pairs; typed reads of protected values give measurements.
        let audit = try await run(["run", "audit.yaml"] + common
                                  + ["--report", "audit.json", "--events", "audit.events", "--junit", "audit.xml",
                                     "--trace", "audit.trace.jsonl", "--sim-dump", "audit-dump.json"], in: dir)
        #expect(audit.status == 1, "\(audit.stderr)")
        let auditDevices = try json(dir + "/audit.json")["devices"] as? [[String: Any]] ?? []
        #expect(auditDevices.compactMap { $0["id"] as? String } == ids)
        for d in auditDevices {
            let id = d["id"] as? String ?? "?"
            let security = d["security"] as? [String: Any]
            #expect(security?["level"] as? String == "authenticated" && security?["bond"] as? String == "used", "\(id)")
            #expect(security?["method"] == nil, "\(id)")
            let measurements = d["measurements"] as? [[String: Any]] ?? []
            #expect(measurements.compactMap { $0["name"] as? String } == ["battery level", "site name kept", "commissioned"], "\(id)")
            let expected = id == "SL-0008" ? ["fail", "fail", "fail"] : ["pass", "pass", "pass"]
            #expect(measurements.compactMap { $0["outcome"] as? String } == expected, "\(id)")
            #expect(d["outcome"] as? String == (id == "SL-0008" ? "failed" : "succeeded"), "\(id)")
            #expect((d["captured"] as? [String: Any])?["site_stored"] as? String == (id == "SL-0008" ? "" : "Building 7, door A"), "\(id)")
        }
        let auditDump = try json(dir + "/audit-dump.json")
        for d in auditDump["devices"] as? [[String: Any]] ?? [] {
            let security = d["security"] as? [String: Any]
            #expect((security?["pairings"] as? [Any])?.count == 1 && security?["encryptions"] as? Int == 1, "\(d["id"] ?? "?")")
        }
        let auditTrace = try trace(dir + "/audit.trace.jsonl")
        #expect(Set(auditTrace.map(\.link)) == Set(ids))
        #expect(!auditTrace.contains { $0.name == "Error Response" && ($0.value.hasSuffix("05") || $0.value.hasSuffix("0f")) })

        // No pairing key in any rendering, and no passkey, in anything either run wrote or printed: the
        // traces included. The lock keys (a declared secret) are in no report, journal, event or JUnit
        // file (a trace holds what was sent to the devices, so it has them: docs/cli.md).
        let bonds = try json(dir + "/bonds.json")
        let keys = (bonds["stations"] as? [[String: Any]] ?? []).flatMap {
            ($0["bonds"] as? [[String: Any]] ?? []).compactMap { $0["ltk"] as? String }
        }
        #expect(keys.count == 8)
        var renderings: [String] = []
        for key in keys {
            let bytes = [UInt8](hex: key) ?? []
            let reversed = Array(bytes.reversed())
            renderings += [key, key.uppercased(), reversed.hexString, reversed.hexString.uppercased(),
                           Data(bytes).base64EncodedString(), Data(reversed).base64EncodedString()]
        }
        var texts = ["stdout 1": first.stdout, "stderr 1": first.stderr, "stdout 2": audit.stdout, "stderr 2": audit.stderr]
        for file in ["line.json", "line.journal", "line.events", "line.xml", "line.html", "line.trace.jsonl", "line-dump.json",
                     "audit.json", "audit.journal", "audit.events", "audit.xml", "audit.trace.jsonl", "audit-dump.json", "devices.state"] {
            texts[file] = try String(contentsOfFile: dir + "/" + file, encoding: .utf8)
        }
        for (name, text) in texts {
            for r in renderings { #expect(!text.contains(r), "\(name) shows a pairing key") }
        }
        // A passkey as a number of its own (not six digits inside a longer one, such as a duration's).
        for (name, text) in texts where name != "devices.state" && !name.contains("dump") {
            for n in 1...8 {
                let alone = try Regex("(^|[^0-9])\(Self.passkey(n))([^0-9]|$)")
                #expect(!text.contains(alone), "\(name) shows a passkey")
            }
        }
        let inventory = try String(contentsOfFile: dir + "/inventory.yaml", encoding: .utf8)
        let lockKeys = inventory.split(separator: "\"").map(String.init).filter { $0.count == 32 && [UInt8](hex: $0) != nil }
        #expect(lockKeys.count == 8)
        for (name, text) in texts where !name.contains("trace") && !name.contains("dump") && name != "devices.state" {
            for k in lockKeys { #expect(!text.lowercased().contains(k), "\(name) shows a lock key") }
        }
    }
}
