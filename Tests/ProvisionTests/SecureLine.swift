import Foundation
import EngineTestSupport
import TestSupport

/// A copy of the passkey-protected example line in a temporary directory: inventory/secure-line.yaml as
/// `inventory.yaml` (8 units; SN-S005's passkey is misprinted, so it fails pairing), its model, blobs, and
/// the workflows `sensor-v2-secure.yaml` and `fleet-audit-secure.yaml`.
struct SecureLine {
    let directory: String

    init() throws {
        directory = NSTemporaryDirectory() + "provision-secure-\(UUID().uuidString)"
        let fm = FileManager.default
        try fm.createDirectory(atPath: directory + "/models", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: directory + "/blobs", withIntermediateDirectories: true)
        let root = TestLine.packageRoot
        try fm.copyItem(atPath: root + "/inventory/models/sensor-v2-secure.yaml", toPath: directory + "/models/sensor-v2-secure.yaml")
        for b in ["a", "b", "c", "d"] {
            try fm.copyItem(atPath: root + "/inventory/blobs/cert-\(b).bin", toPath: directory + "/blobs/cert-\(b).bin")
        }
        try fm.copyItem(atPath: root + "/inventory/secure-line.yaml", toPath: directory + "/inventory.yaml")
        for w in ["sensor-v2-secure", "fleet-audit-secure"] {
            try fm.copyItem(atPath: root + "/workflows/\(w).yaml", toPath: directory + "/\(w).yaml")
        }
    }

    /// A new copy's directory.
    static func copy() throws -> String { try SecureLine().directory }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    func path(_ name: String) -> String { directory + "/" + name }
    func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: path(name)) }
}
