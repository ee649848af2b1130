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
    static let timeout = SharedOptions.timeout("how long to listen (default 5s)", examples: "5s, 500ms", positive: false)
    static let names = TypedOption<String>(OptionSpec("name", kind: .value("NAME"), help: "only devices advertising this name"))
    static let services = TypedOption(OptionSpec("service", kind: .repeated("UUID"), help: "only devices advertising this service")) {
        text throws(UsageError) -> BluetoothUUID in
        guard let u = BluetoothUUID(text) else { throw UsageError("`--service \(text)` is not a UUID (180A, 0x180A, or the 128-bit form)") }
        return u
    }

    public let options = [
        SharedOptions.adapters.help("adapter (repeatable): hci:tcp:HOST:PORT, hci:serial:DEV[@BAUD], hci:user:N, or sim").spec,
        timeout.spec,
        SharedOptions.inventory.help("with `--adapter sim`: the inventory whose fleet to simulate").spec,
        names.spec,
        services.spec,
        OptionSpec("json", kind: .flag, help: "print JSON (one array)"),
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        let adapters: [AdapterChoice], duration: Duration, inventoryPath: String?
        var filter = ScanFilter()
        do throws(UsageError) {
            adapters = try arguments.values(SharedOptions.adapters)
            guard !adapters.isEmpty else { throw UsageError("`--adapter SPEC` is required") }
            duration = try arguments.value(Self.timeout) ?? .seconds(5)
            if let n = arguments.text(Self.names) { filter.names = [n] }
            filter.services = try arguments.values(Self.services)
            inventoryPath = arguments.text(SharedOptions.inventory)
        } catch {
            out.err("error: \(error.message)")
            out.err("usage: \(usage)")
            return ExitCode.invalidInput
        }
        let specs = adapters.map(\.spec)
        var centrals: [any Central] = []
        func closeAll() async { for c in centrals { await c.close() } }
        for adapter in adapters {
            let spec = adapter.spec
            do {
                switch adapter {
                case .simulator:
                    guard let path = inventoryPath else {
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
                case .hci(let spec, let configuration):
                    centrals.append(try await AdapterFactory.hci(spec, configuration))
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
        if arguments.flag(SharedOptions.json) {
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
