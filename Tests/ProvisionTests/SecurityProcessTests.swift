import EngineTestSupport
import Foundation
import Testing

/// `provision run` with security on the simulator, as a user runs it: the passkey-protected example line
/// (workflows/sensor-v2-secure.yaml, inventory/secure-line.yaml) paired and bonded, then audited over
/// its bonds; `--bonds` in the output-path check; no key in anything a run writes or prints.
@Suite(.serialized, .timeLimit(.minutes(3))) struct SecurityProcessTests {
    /// A copy of the example line in a temporary directory.
    private func line() throws -> String { try SecureLine.copy() }

    private func run(_ arguments: [String], in dir: String) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await ChildProcess.run(arguments, in: dir)
    }

    private func devices(_ path: String) throws -> [[String: Any]] {
        let report = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any]
        return report?["devices"] as? [[String: Any]] ?? []
    }

    @Test func theSecureLineIsPairedBondedAndAuditedOverItsBondsAndNoKeyShowsAnywhere() async throws {
        let dir = try line()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let common = ["--inventory", "inventory.yaml", "--adapter", "sim", "--sim-latency", "0", "--bonds", "bonds.json",
                      "--sim-state", "devices.state"]
        let first = try await run(["run", "sensor-v2-secure.yaml"] + common + ["--report", "line.json", "--events", "line.events",
                                                                             "--junit", "line.xml", "--sim-dump", "line-dump.json"], in: dir)
        #expect(first.status == 1, "\(first.stderr)")
        let line = try devices(dir + "/line.json")
        for d in line {
            let security = d["security"] as? [String: Any]
            if d["id"] as? String == "SN-S005" {
                #expect(d["outcome"] as? String == "failed")
                #expect((d["error"] as? [String: Any])?["kind"] as? String == "pairing_failed")
                #expect(security?["level"] as? String == "none")
            } else {
                #expect(d["outcome"] as? String == "succeeded")
                #expect(security?["level"] as? String == "authenticated" && security?["method"] as? String == "passkey_entry")
                #expect(security?["bond"] as? String == "made")
            }
        }
        var info = stat()
        #expect(stat(dir + "/bonds.json", &info) == 0 && info.st_mode & 0o777 == 0o600)

        let audit = try await run(["run", "fleet-audit-secure.yaml"] + common + ["--report", "audit.json", "--events", "audit.events",
                                                                               "--sim-dump", "audit-dump.json"], in: dir)
        #expect(audit.status == 1, "\(audit.stderr)")
        for d in try devices(dir + "/audit.json") where d["id"] as? String != "SN-S005" {
            let security = d["security"] as? [String: Any]
            #expect(d["outcome"] as? String == "succeeded")
            #expect(security?["bond"] as? String == "used" && security?["method"] == nil)
        }
        // The device side: one pairing each, one encryption with the bond; writes arrived authenticated.
        let dump = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir + "/audit-dump.json"))) as? [String: Any]
        for d in dump?["devices"] as? [[String: Any]] ?? [] where d["id"] as? String != "SN-S005" {
            let security = d["security"] as? [String: Any]
            #expect((security?["pairings"] as? [Any])?.count == 1 && security?["encryptions"] as? Int == 1, "\(d["id"] ?? "?")")
            let links = (d["commands"] as? [[String: Any]] ?? []).compactMap { $0["link"] as? String }
            #expect(!links.isEmpty && links.allSatisfy { $0 == "authenticated" })
        }

        // No key in any rendering, in anything either run wrote or printed.
        let bonds = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir + "/bonds.json"))) as? [String: Any]
        let stations = bonds?["stations"] as? [[String: Any]] ?? []
        let keys = stations.flatMap { ($0["bonds"] as? [[String: Any]] ?? []).compactMap { $0["ltk"] as? String } }
        #expect(keys.count == 7)
        var renderings: [String] = []
        for key in keys {
            let bytes = [UInt8](hex: key) ?? []
            let reversed = Array(bytes.reversed())
            renderings += [key, key.uppercased(), reversed.hexString, reversed.hexString.uppercased(),
                           Data(bytes).base64EncodedString(), Data(reversed).base64EncodedString()]
        }
        var texts = ["stdout 1": first.stdout, "stderr 1": first.stderr, "stdout 2": audit.stdout, "stderr 2": audit.stderr]
        for file in ["line.json", "line.journal", "line.events", "line.xml", "line-dump.json", "audit.json", "audit.journal",
                     "audit.events", "audit-dump.json", "devices.state"] {
            texts[file] = try String(contentsOfFile: dir + "/" + file, encoding: .utf8)
        }
        for (name, text) in texts {
            for r in renderings { #expect(!text.contains(r), "\(name) shows a key") }
        }
        // Nor a passkey: they are inventory secrets.
        let inventory = try String(contentsOfFile: dir + "/inventory.yaml", encoding: .utf8)
        let passkeys = inventory.split(separator: "\"").map(String.init).filter { $0.count == 6 && $0.allSatisfy(\.isNumber) }
        #expect(passkeys.count == 8)
        for (name, text) in texts where name != "devices.state" && !name.contains("dump") {
            for p in passkeys { #expect(!text.contains(p), "\(name) shows a passkey") }
        }
    }

    @Test func aBondsFileOthersCanReadIsRefusedBeforeAnythingIsTouched() async throws {
        let dir = try line()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(FileManager.default.createFile(atPath: dir + "/bonds.json",
                                               contents: Data(#"{"format":"provision-bonds","version":1,"stations":[]}"#.utf8),
                                               attributes: [.posixPermissions: 0o644]))
        let result = try await run(["run", "sensor-v2-secure.yaml", "--inventory", "inventory.yaml", "--adapter", "sim",
                                    "--sim-latency", "0", "--bonds", "bonds.json", "--report", "r.json"], in: dir)
        #expect(result.status == 2)
        #expect(result.stderr.contains("bonds file \(dir)/bonds.json can be read by other users (mode 644); it holds keys: run chmod 600"))
        #expect(!FileManager.default.fileExists(atPath: dir + "/r.json"))
    }

    @Test func theBondsFileIsNeverAnInputNorAnotherOutput() async throws {
        let dir = try line()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clash = try await run(["run", "sensor-v2-secure.yaml", "--inventory", "inventory.yaml", "--adapter", "sim",
                                   "--bonds", "inventory.yaml"], in: dir)
        #expect(clash.status == 2)
        #expect(clash.stderr.contains("`--bonds inventory.yaml` is the inventory"))
        let same = try await run(["run", "sensor-v2-secure.yaml", "--inventory", "inventory.yaml", "--adapter", "sim",
                                  "--bonds", "state", "--sim-state", "state"], in: dir)
        #expect(same.status == 2)
        #expect(same.stderr.contains("are the same file"))
    }
}
