import BLE
import BLESimulator
import Digests
import Foundation
import Workflow
import Engine

/// A small production line in a temporary directory: the sensor-v2 model, blob files, an inventory and
/// a workflow with short timeouts, run on the simulator in process.
public struct TestLine: Sendable {
    public static let packageRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    public let directory: String

    public init() throws {
        directory = NSTemporaryDirectory() + "provision-engine-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory + "/models", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: directory + "/blobs", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Self.packageRoot + "/inventory/models/sensor-v2.yaml",
                                         toPath: directory + "/models/sensor-v2.yaml")
    }

    public func remove() { try? FileManager.default.removeItem(atPath: directory) }

    /// The provisioning workflow of workflows/sensor-v2.yaml with test-sized timeouts: a lost `end blob`
    /// ack restarts at `begin blob` (a re-sent `04` would answer `04 01`); a lost commit ack is settled by
    /// reading the state (`confirm`, unless `confirm` is false) before anything is sent again.
    public static func workflow(ackTimeout: String = "300ms", resend: String = "[50ms, 50ms]", retryAttempts: Int = 2,
                         reconnect: String = "{ attempts: 2, delay: 20ms }", commitIrreversible: Bool = true,
                         confirm: Bool = true) -> String {
        """
        name: test-provisioning
        defaults:
          timeout: 2s
          retry: { attempts: \(retryAttempts), backoff: [20ms], on: [timeout, disconnected, busy, connect_failed] }
          reconnect: \(reconnect)
        steps:
          - scan: { name: "${name}", services: [FFF0], timeout: 500ms, retry: { attempts: 1 } }
          - connect: { mtu: 247, timeout: 1s }
          - read: { id: serial, service: 180A, characteristic: 2A25, as: utf8 }
          - verify: { value: "${serial}", equals: "${id}" }
          - read: { id: fw, service: 180A, characteristic: 2A26, as: utf8 }
          - name: firmware is supported
            verify: { value: "${fw}", matches: '^2\\.' }
          - subscribe: { id: acks, service: FFF0, characteristic: FFF3 }
          - name: set configuration
            await:
              subscription: acks
              trigger: { service: FFF0, characteristic: FFF1, value: { hex: "01${config}" } }
              equals: { hex: "0100" }
              busy: { hex: "^0102" }
              timeout: \(ackTimeout)
              resend: \(resend)
          - name: begin blob
            await:
              subscription: acks
              trigger: { service: FFF0, characteristic: FFF1, value: [ { hex: "03" }, { uint32le: { length_of: "${blob}" } } ] }
              equals: { hex: "0300" }
              busy: { hex: "^0302" }
              timeout: \(ackTimeout)
              resend: \(resend)
          - write_blob: { service: FFF0, characteristic: FFF4, file: "${blob}" }
            retry_from: begin blob
          - name: end blob
            await:
              subscription: acks
              trigger: { service: FFF0, characteristic: FFF1, value: { hex: "04" } }
              equals: { hex: "0400" }
              busy: { hex: "^0402" }
              fails_on: { hex: "^0401" }
              timeout: \(ackTimeout)
            retry: { attempts: \(retryAttempts), backoff: [20ms], on: [timeout, disconnected, busy, mismatch] }
            retry_from: begin blob
          - name: commit
            await:
              subscription: acks
              trigger: { service: FFF0, characteristic: FFF1, value: { hex: "02" }\(commitIrreversible ? ", irreversible: true, idempotent: true" : "") }
              equals: { hex: "0200" }
              busy: { hex: "^0202" }
              timeout: \(ackTimeout)
              resend: \(resend)
              \(confirm ? "confirm: { service: FFF0, characteristic: FFF2, equals: { hex: \"02\" } }" : "")
          - read: { id: state, service: FFF0, characteristic: FFF2, as: hex }
          - verify: { value: "${state}", equals: "02" }
          - disconnect: {}
        """
    }

    /// Writes the workflow and an inventory of `count` devices; `faults` maps a device number to its
    /// `simulator:` overrides (YAML flow text).
    public func write(count: Int, workflow: String = TestLine.workflow(), faults: [Int: String] = [:]) throws -> (workflow: String, inventory: String) {
        var blobs: [String] = []
        for b in 0..<3 {
            var g = UInt64(b + 7) &* 0x9E3779B97F4A7C15
            let size = 600 + b * 700
            let bytes = (0..<size).map { _ -> UInt8 in
                g = g &* 6364136223846793005 &+ 1442695040888963407
                return UInt8(truncatingIfNeeded: g >> 33)
            }
            let name = "blobs/cert-\(b).bin"
            try Data(bytes).write(to: URL(fileURLWithPath: directory + "/" + name))
            blobs.append(name)
        }
        var inv = "simulator: { model: models/sensor-v2.yaml }\ndevices:\n"
        for i in 1...count {
            let id = String(format: "SN-%04d", i)
            let name = String(format: "SNS-%04d", i)
            let address = String(format: "C0:5E:00:00:%02X:%02X", i >> 8, i & 0xFF)
            let config = String(format: "%02x%02x0a0b0c", i >> 8, i & 0xFF)
            var line = "  - { id: \(id), name: \(name), address: \"\(address)\", vars: { config: \"\(config)\", blob: \(blobs[i % 3]) }"
            if let f = faults[i] { line += ", simulator: \(f)" }
            inv += line + " }\n"
        }
        let wPath = directory + "/workflow.yaml"
        let iPath = directory + "/inventory.yaml"
        try Data(workflow.utf8).write(to: URL(fileURLWithPath: wPath))
        try Data(inv.utf8).write(to: URL(fileURLWithPath: iPath))
        return (wPath, iPath)
    }

    public struct Loaded: Sendable {
        public var workflow: Workflow
        public var inventory: Inventory
        public var devices: [InventoryDevice]
    }

    public func load(_ paths: (workflow: String, inventory: String), limit: String? = nil) throws -> Loaded {
        let r = Validator.validate(workflowPath: paths.workflow, inventoryPath: paths.inventory, limit: limit)
        guard r.isValid, let w = r.workflow, let i = r.inventory else {
            throw TestLineError(message: r.diagnostics.map { "\($0.path):\($0.line):\($0.column): \($0.message)" }.joined(separator: "\n"))
        }
        return Loaded(workflow: w, inventory: i, devices: r.selectedDevices)
    }

    public func simulator(_ loaded: Loaded, latency: Double = 0, statePath: String? = nil, seed: UInt64 = 1, slots: Int = 256) throws -> SimulatedCentral {
        let model = try DeviceModel.load(path: directory + "/models/sensor-v2.yaml")
        let specs = loaded.inventory.devices.map {
            SimulatedDeviceSpec(id: $0.id, name: $0.name, address: $0.address, variables: $0.vars, overrides: $0.simulator)
        }
        return try SimulatedCentral(models: [model.name: model], devices: specs, defaultModel: model.name,
                                    inventoryFile: loaded.inventory.path,
                                    options: SimulatorOptions(seed: seed, latencyScale: latency, statePath: statePath, connectionSlots: slots))
    }

    public func options(_ name: String = "run") -> TestRunOptions {
        var o = TestRunOptions(journalPath: directory + "/\(name).journal", reportPath: directory + "/\(name).json")
        o.fsync = false
        o.stopGrace = .seconds(5)
        return o
    }

    /// SHA-256 (hex) of a file, as the simulator reports a received blob.
    public static func sha256(ofFile path: String) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return SHA256.hexDigest([UInt8](data))
    }
}

public struct TestLineError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
