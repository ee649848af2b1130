import BLESimulator
import Foundation
import Workflow

/// `provision dev-inventory --devices N --out DIR`: writes a large synthetic inventory (for benchmarks).
///
/// Hidden: a developer tool. Writes `DIR/inventory.yaml` with N sensor-v2 devices, four blob files
/// under `DIR/blobs/` and the device model the inventory names under `DIR/models/` (everything the
/// inventory refers to), deterministic for a given N.
public struct DevInventoryCommand: Command {
    public init() {}

    public let name = "dev-inventory"
    public let summary = "write a synthetic N-device inventory (benchmarks)"
    public let isHidden = true
    public let positionals: [PositionalSpec] = []
    public let options = [
        OptionSpec("devices", short: "n", kind: .value("N"), help: "number of devices (default 10000)"),
        OptionSpec("out", short: "o", kind: .value("DIR"), help: "directory to write into (created)"),
        OptionSpec("csv", kind: .flag, help: "write inventory.csv instead of inventory.yaml"),
        OptionSpec("model", kind: .value("FILE"), help: "device model copied to DIR/models/ (default inventory/models/sensor-v2.yaml)"),
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        guard let count = Int(arguments.value("devices") ?? "10000"), (1...1_000_000).contains(count) else {
            out.err("error: `--devices` must be a number from 1 to 1000000")
            return ExitCode.invalidInput
        }
        guard let dir = arguments.value("out") else {
            out.err("error: `--out` is required")
            out.err("usage: \(usage)")
            return ExitCode.invalidInput
        }
        // The model the YAML inventory names is written beside it (a CSV inventory names none).
        let csv = arguments.flag("csv")
        var model: (name: String, bytes: Data)?
        if !csv {
            let given = arguments.value("model") ?? "inventory/models/sensor-v2.yaml"
            let path = ValueSpec.resolve(path: given, baseDirectory: context.currentDirectory)
            guard let bytes = FileManager.default.contents(atPath: path) else {
                out.err("error: cannot read the device model \(given)")
                out.err("    hint: run from the repository, or give the model with --model FILE")
                return ExitCode.invalidInput
            }
            do {
                _ = try DeviceModel.parse([UInt8](bytes), file: given)
            } catch {
                out.err("error: \(error)")
                return ExitCode.invalidInput
            }
            model = ((given as NSString).lastPathComponent, bytes)
        }
        let fm = FileManager.default
        do {
            try fm.createDirectory(atPath: dir + "/blobs", withIntermediateDirectories: true)
            var seed: UInt64 = 0x5EED
            for (i, size) in [1024, 2048, 3072, 4096].enumerated() {
                var bytes = [UInt8](repeating: 0, count: size)
                for k in 0..<size {
                    seed = seed &* 6364136223846793005 &+ 1442695040888963407
                    bytes[k] = UInt8(truncatingIfNeeded: seed >> 33)
                }
                try Data(bytes).write(to: URL(fileURLWithPath: "\(dir)/blobs/blob-\(i).bin"))
            }
            if let model {
                try fm.createDirectory(atPath: dir + "/models", withIntermediateDirectories: true)
                try model.bytes.write(to: URL(fileURLWithPath: "\(dir)/models/\(model.name)"))
            }
            var text = ""
            text.reserveCapacity(count * 140)
            text += model.map { "simulator: { model: models/\($0.name) }\ndevices:\n" } ?? "id,address,name,config,blob\n"
            for n in 1...count {
                let id = "SN-" + digits(n, 6)
                let name = "SNS-" + digits(n, 6)
                let address = String(format: "C0:5E:00:%02X:%02X:%02X", (n >> 16) & 0xFF, (n >> 8) & 0xFF, n & 0xFF)
                let config = String(format: "%08x%08x", UInt32(truncatingIfNeeded: n &* 2654435761), UInt32(truncatingIfNeeded: n &* 40503))
                let blob = "blobs/blob-\(n % 4).bin"
                if csv {
                    text += "\(id),\(address),\(name),\(config),\(blob)\n"
                } else {
                    text += "  - { id: \(id), name: \(name), address: \"\(address)\", vars: { config: \"\(config)\", blob: \(blob) } }\n"
                }
            }
            let file = "\(dir)/inventory.\(csv ? "csv" : "yaml")"
            try Data(text.utf8).write(to: URL(fileURLWithPath: file))
            out.out("wrote \(file) (\(count) devices, \(text.utf8.count) bytes)")
            return ExitCode.success
        } catch {
            out.err("error: cannot write \(dir): \(error)")
            return ExitCode.environment
        }
    }

    private func digits(_ n: Int, _ width: Int) -> String {
        let s = String(n)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }
}
