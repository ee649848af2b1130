import Digests
import BLE
import MCUboot
import McuMgr
import YAML

/// A device model's `mcumgr:` section: an MCUmgr SMP server with MCUboot behind it (docs/simulator.md).
///
/// ```yaml
/// mcumgr:
///   buffers: { count: 4, size: 2475 }      # CONFIG_MCUMGR_TRANSPORT_NETBUF_COUNT / _SIZE
///   reassembly: true                       # requests may span writes
///   parameters: true                       # answers MCUmgr parameters (OS command 6)
///   smp_v2: true                           # answers version 2 requests in version 2
///   flash: { write: 100KB/s, erase: 300ms }
///   boot: 1s                               # off the air after a reset
///   running: { version: "1.0.0" }          # the factory image (hash: its SHA-256 TLV, hex; derived if absent)
/// ```
public struct McuMgrConfig: Sendable, Equatable {
    public var bufferCount = 4
    public var bufferSize = 2475
    public var reassembly = true
    public var parameters = true
    public var smpV2 = true
    /// Bytes per second the flash takes.
    public var writeRate = 100_000.0
    public var eraseTime = Duration.milliseconds(300)
    public var bootTime = Duration.seconds(1)
    public var resetDelay = Duration.milliseconds(50)
    public var slotSize = 1 << 20
    public var fileHash = true
    /// Refuse any upload that is not newer (not only those with `upgrade: true`).
    public var downgradePrevention = false
    /// The factory image: version and hash (templates: per-device variables may set them).
    public var runningVersion = Template(literal: "1.0.0")
    public var runningHash: Template?

    public init() {}

    /// How long the flash takes to write `bytes`.
    func writeTime(bytes: Int) -> Duration {
        guard writeRate > 0 else { return .zero }
        return .nanoseconds(Int64(Double(bytes) / writeRate * 1e9))
    }

    static let keys = ["buffers", "reassembly", "parameters", "smp_v2", "flash", "boot", "reset_delay", "slot_size", "file_hash",
                       "downgrade_prevention", "running"]

    static func parse(_ node: YAMLNode, _ r: ModelReader) throws(SimulatorError) -> McuMgrConfig {
        var c = McuMgrConfig()
        for (key, value) in try r.mapping(node, "mcumgr", allowed: keys) {
            switch key {
            case "buffers":
                for (k, v) in try r.mapping(value, "mcumgr.buffers", allowed: ["count", "size"]) {
                    if k == "count" { c.bufferCount = try r.int(v, "mcumgr.buffers.count", in: 1...64) }
                    if k == "size" { c.bufferSize = try r.int(v, "mcumgr.buffers.size", in: 64...65_535) }
                }
            case "reassembly": c.reassembly = try r.bool(value, key)
            case "parameters": c.parameters = try r.bool(value, key)
            case "smp_v2": c.smpV2 = try r.bool(value, key)
            case "flash":
                for (k, v) in try r.mapping(value, "mcumgr.flash", allowed: ["write", "erase"]) {
                    if k == "write" { c.writeRate = try rate(v, "mcumgr.flash.write", r) }
                    if k == "erase" { c.eraseTime = try r.duration(v, "mcumgr.flash.erase") }
                }
            case "boot": c.bootTime = try r.duration(value, "mcumgr.boot")
            case "reset_delay": c.resetDelay = try r.duration(value, "mcumgr.reset_delay")
            case "slot_size": c.slotSize = try r.int(value, "mcumgr.slot_size", in: 1024...(64 << 20))
            case "file_hash": c.fileHash = try r.bool(value, key)
            case "downgrade_prevention": c.downgradePrevention = try r.bool(value, key)
            case "running":
                for (k, v) in try r.mapping(value, "mcumgr.running", allowed: ["version", "hash"]) {
                    if k == "version" { c.runningVersion = try r.template(v, "mcumgr.running.version") }
                    if k == "hash" { c.runningHash = try r.template(v, "mcumgr.running.hash") }
                }
            default: break
            }
        }
        return c
    }

    /// `100KB/s`, `1MB/s`, `50000B/s` (K and M are 1000 and 1,000,000).
    private static func rate(_ node: YAMLNode, _ what: String, _ r: ModelReader) throws(SimulatorError) -> Double {
        let text = try r.string(node, what)
        let units: [(String, Double)] = [("MB/s", 1e6), ("KB/s", 1e3), ("kB/s", 1e3), ("B/s", 1)]
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            if let v = Double(text.dropLast(suffix.count)), v > 0, v.isFinite { return v * factor }
        }
        throw r.fail("\(what) must be a rate such as 100KB/s, not `\(text)`", node)
    }

    /// The factory image of a device: its version and hash (the model's, or a hash derived from the
    /// version so that devices of one version agree).
    func factoryImage(_ variables: (String) -> String?) -> McuMgrState.SlotImage {
        let version = (try? runningVersion.expand(variables).get()) ?? runningVersion.source
        if let template = runningHash, case .success(let text) = template.expand(variables),
           let bytes = [UInt8](hex: text), bytes.count == 32 {
            return McuMgrState.SlotImage(hash: bytes, version: version)
        }
        return McuMgrState.SlotImage(hash: SHA256.hash(Array("factory image \(version)".utf8)), version: version)
    }

    /// The SMP service, added to a model that has `mcumgr:` but does not declare it.
    static var service: DeviceModel.Service {
        DeviceModel.Service(uuid: SMPGATT.service, characteristics: [
            DeviceModel.Characteristic(uuid: SMPGATT.characteristic, properties: [.writeWithoutResponse, .notify], value: .hex(Template(literal: "")),
                                       mark: SourceMark(line: 1, column: 1)),
        ])
    }
}
