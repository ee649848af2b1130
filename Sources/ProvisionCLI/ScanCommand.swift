import BLE
import Foundation
import HCI
import Support
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
        OptionSpec("adapter", short: "a", kind: .repeated("SPEC"), help: "adapter (repeatable): hci:tcp:HOST:PORT, hci:serial:DEV[@BAUD], hci:user:N, or sim"),
        OptionSpec("timeout", short: "t", kind: .value("DURATION"), help: "how long to listen (default 5s)"),
        OptionSpec("inventory", short: "i", kind: .value("FILE"), help: "with `--adapter sim`: the inventory whose fleet to simulate"),
        OptionSpec("name", kind: .value("NAME"), help: "only devices advertising this name"),
        OptionSpec("service", kind: .repeated("UUID"), help: "only devices advertising this service"),
        OptionSpec("json", kind: .flag, help: "print JSON (one array)"),
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        let specs = arguments.values("adapter")
        guard !specs.isEmpty else {
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
        for spec in specs where !AdapterFactory.isWellFormed(spec) {
            out.err("error: `--adapter \(spec)` is not an adapter spec (sim, hci:tcp:HOST:PORT, hci:serial:DEV[@BAUD], hci:user:N)")
            return ExitCode.invalidInput
        }
        var centrals: [any Central] = []
        func closeAll() async { for c in centrals { await c.close() } }
        for spec in specs {
            do {
                if spec == "sim" {
                    guard let path = arguments.value("inventory") else {
                        out.err("error: `--adapter sim` needs `--inventory FILE` (the fleet to simulate)")
                        await closeAll()
                        return ExitCode.invalidInput
                    }
                    let loaded = Validator.loadInventory(path, currentDirectory: context.currentDirectory)
                    guard let inventory = loaded.inventory, !loaded.diagnostics.contains(where: { $0.severity == .error }) else {
                        for d in loaded.diagnostics { out.err(ValidateCommand.render(d, output: out)) }
                        await closeAll()
                        return ExitCode.invalidInput
                    }
                    centrals.append(try AdapterFactory.simulator(inventory: inventory, seed: 1, latencyScale: 1, statePath: nil))
                } else {
                    centrals.append(try await HCIAdapter.open(spec: spec))
                }
            } catch let e as AdapterFactory.InputError {
                out.err("error: \(e.message)")
                await closeAll()
                return ExitCode.invalidInput
            } catch {
                out.err(escaping: "error: adapter `\(spec)`: \(error)")
                await closeAll()
                return ExitCode.environment
            }
        }
        // Every adapter listens at once; a device heard by several appears once per adapter.
        let scanFilter = filter
        let listen = duration
        let results: [Result<[DiscoveredDevice], ScanFailure>] = await withTaskGroup(of: (Int, Result<[DiscoveredDevice], ScanFailure>).self) { group in
            for (i, c) in centrals.enumerated() {
                group.addTask {
                    // The result is made before the tuple: Swift 6.3's optimizer drops the store of `i`
                    // when a tuple returned from an async closure is built around a `try await` whose
                    // error a local `catch` handles (`return (i, .success(try await …))`), so release
                    // builds read an uninitialised index here and trapped.
                    let result: Result<[DiscoveredDevice], ScanFailure>
                    do {
                        result = .success(try await DeviceDiscovery.scan(on: c, for: listen, filter: scanFilter))
                    } catch {
                        result = .failure(ScanFailure(message: "\(error)"))
                    }
                    return (i, result)
                }
            }
            var out = [Result<[DiscoveredDevice], ScanFailure>](repeating: .success([]), count: centrals.count)
            for await (i, r) in group { out[i] = r }
            return out
        }
        await closeAll()
        var devices: [DiscoveredDevice] = []
        for (i, r) in results.enumerated() {
            switch r {
            case .success(let found): devices += found
            case .failure(let error):
                out.err(escaping: "error: scan on `\(specs[i])` failed: \(error.message)")
                return ExitCode.environment
            }
        }
        devices.sort { ($0.rssi, $1.address) > ($1.rssi, $0.address) }
        if arguments.flag("json") {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            encoder.keyEncodingStrategy = .convertToSnakeCase
            let data = (try? encoder.encode(devices)) ?? Data("[]".utf8)
            out.out(String(decoding: data, as: UTF8.self))
        } else {
            out.out("ADDRESS            TYPE    RSSI  NAME              SERVICES" + (specs.count > 1 ? "        ADAPTER" : ""))
            for d in devices {
                let name = (d.name ?? "-").padding(toLength: 16, withPad: " ", startingAt: 0)
                let services = d.services.joined(separator: ",")
                var row = "\(d.address)  \(d.addressType.padding(toLength: 6, withPad: " ", startingAt: 0))  \(String(format: "%4d", d.rssi))  \(name)  \(services)"
                if specs.count > 1 { row = row.padding(toLength: max(row.count, 66), withPad: " ", startingAt: 0) + "  " + d.adapter }
                out.out(escaping: row)
            }
            out.out("\(devices.count) device(s) in \(duration)")
        }
        return ExitCode.success
    }
}

/// Why one adapter's scan failed (carried out of the task that ran it).
struct ScanFailure: Error, Sendable {
    var message: String
}
