import BLE
import Foundation
import HCI
import Workflow

/// `provision scan --adapter SPEC [--timeout 5s] [--json]`: the devices in range, like
/// `bluetoothctl scan on` but finite and scriptable.
public struct ScanCommand: Command {
    public init() {}

    public let name = "scan"
    public let summary = "list the devices an adapter hears (address, type, name, RSSI, services)"
    public let discussion = """
        Scans for --timeout (default 5s) and prints every device heard, strongest first. With `sim`, the
        simulated fleet of --inventory is scanned. Exit status: 0 done, 2 usage, 3 adapter failure.
        """
    public let positionals: [PositionalSpec] = []
    public let options = [
        OptionSpec("adapter", short: "a", kind: .value("SPEC"), help: "adapter: hci:tcp:HOST:PORT, hci:serial:DEV[@BAUD], hci:user:N, or sim"),
        OptionSpec("timeout", short: "t", kind: .value("DURATION"), help: "how long to listen (default 5s)"),
        OptionSpec("inventory", short: "i", kind: .value("FILE"), help: "with `--adapter sim`: the inventory whose fleet to simulate"),
        OptionSpec("name", kind: .value("NAME"), help: "only devices advertising this name"),
        OptionSpec("service", kind: .repeated("UUID"), help: "only devices advertising this service"),
        OptionSpec("json", kind: .flag, help: "print JSON (one array)"),
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        guard let spec = arguments.value("adapter") else {
            out.err("error: `--adapter SPEC` is required")
            out.err("usage: \(usage)")
            return ExitCode.invalidInput
        }
        var duration: Duration = .seconds(5)
        if let t = arguments.value("timeout") {
            guard case .success(let d) = DurationText.parse(t) else {
                out.err("error: `--timeout` must be a duration with a unit (5s, 500ms), not `\(t)`")
                return ExitCode.invalidInput
            }
            duration = d
        }
        var filter = ScanFilter()
        if let n = arguments.value("name") { filter.names = [n] }
        for s in arguments.values("service") {
            guard let u = BluetoothUUID(s) else {
                out.err("error: `--service \(s)` is not a UUID (180A, 0x180A, or the 128-bit form)")
                return ExitCode.invalidInput
            }
            filter.services.append(u)
        }
        guard AdapterFactory.isWellFormed(spec) else {
            out.err("error: `--adapter \(spec)` is not an adapter spec (sim, hci:tcp:HOST:PORT, hci:serial:DEV[@BAUD], hci:user:N)")
            return ExitCode.invalidInput
        }
        let central: any Central
        do {
            if spec == "sim" {
                guard let path = arguments.value("inventory") else {
                    out.err("error: `--adapter sim` needs `--inventory FILE` (the fleet to simulate)")
                    return ExitCode.invalidInput
                }
                let loaded = Validator.loadInventory(path, currentDirectory: context.currentDirectory)
                guard let inventory = loaded.inventory, !loaded.diagnostics.contains(where: { $0.severity == .error }) else {
                    for d in loaded.diagnostics { out.err(ValidateCommand.render(d, output: out)) }
                    return ExitCode.invalidInput
                }
                central = try AdapterFactory.simulator(inventory: inventory, seed: 1, latencyScale: 1, statePath: nil)
            } else {
                central = try await HCIAdapter.open(spec: spec)
            }
        } catch let e as AdapterFactory.InputError {
            out.err("error: \(e.message)")
            return ExitCode.invalidInput
        } catch {
            out.err("error: adapter `\(spec)`: \(error)")
            return ExitCode.environment
        }
        let devices: [DiscoveredDevice]
        do {
            devices = try await DeviceDiscovery.scan(on: central, for: duration, filter: filter)
        } catch {
            await central.close()
            out.err("error: scan on `\(spec)` failed: \(error)")
            return ExitCode.environment
        }
        await central.close()
        if arguments.flag("json") {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            encoder.keyEncodingStrategy = .convertToSnakeCase
            let data = (try? encoder.encode(devices)) ?? Data("[]".utf8)
            out.out(String(decoding: data, as: UTF8.self))
        } else {
            out.out("ADDRESS            TYPE    RSSI  NAME              SERVICES")
            for d in devices {
                let name = (d.name ?? "-").padding(toLength: 16, withPad: " ", startingAt: 0)
                out.out("\(d.address)  \(d.addressType.padding(toLength: 6, withPad: " ", startingAt: 0))  \(String(format: "%4d", d.rssi))  \(name)  \(d.services.joined(separator: ","))")
            }
            out.out("\(devices.count) device(s) in \(duration)")
        }
        return ExitCode.success
    }
}
