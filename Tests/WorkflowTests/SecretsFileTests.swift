import Foundation
import Testing
import YAML

@testable import Workflow

/// `--secrets FILE`: owner-only, every value secret and given to every device, no clash with the inventory.
@Suite struct SecretsFileTests {
    private func write(_ text: String, mode: Int) throws -> String {
        let path = NSTemporaryDirectory() + "secrets-\(UInt64.random(in: 0...UInt64.max)).yaml"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        return path
    }

    @Test func aFileOthersCanReadIsRefusedBeforeItIsRead() throws {
        for mode in [0o644, 0o640, 0o604, 0o620] {
            let path = try write("wifi_passphrase: correct horse\n", mode: mode)
            defer { try? FileManager.default.removeItem(atPath: path) }
            let (values, diagnostics) = SecretsFile.load(path, shownAs: "line.secrets")
            #expect(values.isEmpty)
            #expect(diagnostics.first?.message == "the secrets file can be read or written by other users (mode \(String(mode, radix: 8)))")
            #expect(diagnostics.first?.hint == "it holds the line's secrets: run chmod 600 line.secrets")
            #expect(!diagnostics.map(\.message).joined().contains("horse"))
        }
    }

    @Test func anOwnerOnlyFileGivesEveryDeviceItsValuesAsSecrets() throws {
        let path = try write("wifi_passphrase: correct horse\npop: abcd1234\n", mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let (values, diagnostics) = SecretsFile.load(path, shownAs: "line.secrets")
        #expect(diagnostics.isEmpty && values == ["wifi_passphrase": "correct horse", "pop": "abcd1234"])
        let mark = SourceMark(line: 1, column: 1)
        let inventory = Inventory(path: "i.yaml", sha256: "", baseDirectory: "/", devices: [
            InventoryDevice(id: "SN-1", vars: ["ssid": "line-5"], mark: mark), InventoryDevice(id: "SN-2", vars: ["ssid": "line-5"], mark: mark),
        ])
        let (merged, clashes) = inventory.addingLineSecrets(values, from: "line.secrets")
        #expect(clashes.isEmpty)
        #expect(merged.devices.allSatisfy { $0.vars["wifi_passphrase"] == "correct horse" && $0.vars["pop"] == "abcd1234" })
        #expect(merged.isSecret("wifi_passphrase") && merged.isSecret("pop") && !merged.isSecret("ssid"))
        #expect(merged.redact("psk=correct horse", for: merged.devices[1]) == "psk=***")
    }

    @Test func aNameTheInventoryAlsoGivesIsAnError() throws {
        let mark = SourceMark(line: 1, column: 1)
        let inventory = Inventory(path: "i.yaml", sha256: "", baseDirectory: "/", devices: [
            InventoryDevice(id: "SN-1", vars: ["pop": "x"], mark: mark),
        ])
        let (_, clashes) = inventory.addingLineSecrets(["pop": "abcd1234"], from: "line.secrets")
        #expect(clashes.map(\.message) == ["`pop` is given by both the secrets file and the inventory i.yaml"])
    }

    @Test func aMalformedFileIsReportedAtItsPosition() throws {
        let path = try write("pop: abcd1234\n- oops\n", mode: 0o600)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let (values, diagnostics) = SecretsFile.load(path, shownAs: "line.secrets")
        #expect(values.isEmpty)
        #expect(diagnostics.first?.path == "line.secrets" && diagnostics.first?.line == 2)
    }
}
