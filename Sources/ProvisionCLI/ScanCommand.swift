import BLE
import BLESimulator
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
        Scans for --timeout (default 5s) and prints every device heard, strongest first. --name takes a
        glob (`SNS-00*`, `SNS-?[0-4]*`). With --inventory, each device heard is marked with the unit it is
        (by address, else by name) and the units not heard are listed; with `sim`, that inventory's fleet
        is the one simulated. Exit status: 0 done, 2 usage, 3 adapter failure.
        """
    public let positionals: [PositionalSpec] = []
    static let timeout = SharedOptions.timeout("how long to listen (default 5s)", examples: "5s, 500ms", positive: false)
    static let names = TypedOption<String>(OptionSpec("name", kind: .value("GLOB"), help: "only devices advertising a name that matches (SNS-00*)"))
    static let services = TypedOption(OptionSpec("service", kind: .repeated("UUID"), help: "only devices advertising this service")) {
        text throws(UsageError) -> BluetoothUUID in
        guard let u = BluetoothUUID(text) else { throw UsageError("`--service \(text)` is not a UUID (180A, 0x180A, or the 128-bit form)") }
        return u
    }

    public let options = [
        SharedOptions.adapters.help("adapter (repeatable): hci:tcp:HOST:PORT, hci:serial:DEV[@BAUD], hci:user:N, or sim").required.spec,
        timeout.spec,
        SharedOptions.inventory.help("mark the units heard and list those not heard; with `--adapter sim`, the fleet to simulate").spec,
        names.spec,
        services.spec,
        OptionSpec("json", kind: .flag, help: "print JSON (one array)"),
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        let adapters: [AdapterChoice], duration: Duration, inventoryPath: String?, namePattern: String?
        var filter = ScanFilter()
        do throws(UsageError) {
            adapters = try arguments.values(SharedOptions.adapters)
            guard !adapters.isEmpty else { throw UsageError("`--adapter SPEC` is required") }
            duration = try arguments.value(Self.timeout) ?? .seconds(5)
            namePattern = arguments.text(Self.names)
            filter.services = try arguments.values(Self.services)
            inventoryPath = arguments.text(SharedOptions.inventory)
        } catch {
            out.err("error: \(error.message)")
            out.err("usage: \(usage)")
            return ExitCode.invalidInput
        }
        let specs = adapters.map(\.spec)
        var inventory: Inventory?
        if let path = inventoryPath {
            let loaded = Validator.loadInventory(path, currentDirectory: context.currentDirectory)
            guard let inv = loaded.inventory, !loaded.diagnostics.contains(where: { $0.severity == .error }) else {
                for d in loaded.diagnostics { out.err(ValidateCommand.render(d, output: out)) }
                return ExitCode.invalidInput
            }
            inventory = inv
        }
        var centrals: [any Central] = []
        var units = InventoryUnits(inventory)
        func closeAll() async { for c in centrals { await c.close() } }
        for adapter in adapters {
            let spec = adapter.spec
            do {
                switch adapter {
                case .simulator:
                    guard let inventory else {
                        out.err("error: `--adapter sim` needs `--inventory FILE` (the fleet to simulate)")
                        await closeAll()
                        return ExitCode.invalidInput
                    }
                    let sim = try AdapterFactory.simulator(inventory: inventory, seed: 1, latencyScale: 1, statePath: nil)
                    units.learnAddresses(of: sim)
                    centrals.append(sim)
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
        if let pattern = namePattern {
            devices = devices.filter { d in d.name.map { DeviceSelection.glob(pattern, matches: $0) } ?? false }
        }
        devices.sort { ($0.rssi, $1.address) > ($1.rssi, $0.address) }
        let heard = devices.map { units.unit(heard: $0) }
        // With --name, the units listened for are those whose name matches.
        let listenedFor = units.devices.filter { d in namePattern.map { p in d.name.map { DeviceSelection.glob(p, matches: $0) } ?? false } ?? true }
        let unheard = units.notHeard(heard.compactMap { $0 }, among: listenedFor)
        if arguments.flag(SharedOptions.json) {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            encoder.keyEncodingStrategy = .convertToSnakeCase
            let rows = zip(devices, heard).map { ScanRow(device: $0, unit: $1, marked: inventory != nil) }
                + unheard.map { ScanRow(unheard: $0) }
            let data = (try? encoder.encode(rows)) ?? Data("[]".utf8)
            out.out(String(decoding: data, as: UTF8.self))
        } else {
            let unit = inventory == nil ? "" : "UNIT      "
            out.out(unit + "ADDRESS            TYPE    RSSI  NAME              SERVICES" + (specs.count > 1 ? "        ADAPTER" : ""))
            for (d, id) in zip(devices, heard) {
                let name = (d.name ?? "-").padding(toLength: 16, withPad: " ", startingAt: 0)
                let services = d.services.joined(separator: ",")
                var row = "\(d.address)  \(d.addressType.padding(toLength: 6, withPad: " ", startingAt: 0))  \(String(format: "%4d", d.rssi))  \(name)  \(services)"
                if specs.count > 1 { row = row.padding(toLength: max(row.count, 66), withPad: " ", startingAt: 0) + "  " + d.adapter }
                if inventory != nil { row = (id ?? "-").padding(toLength: max(8, (id ?? "").count), withPad: " ", startingAt: 0) + "  " + row }
                out.out(escaping: row)
            }
            out.out("\(devices.count) device(s) in \(duration)")
            if inventory != nil {
                let count = listenedFor.count
                var line = "inventory: \(count - unheard.count) of \(count) unit(s)\(namePattern.map { " matching `\($0)`" } ?? "") heard"
                if !unheard.isEmpty {
                    line += "; not heard: " + unheard.prefix(20).map(\.id).joined(separator: ", ") + (unheard.count > 20 ? ", … (\(unheard.count - 20) more)" : "")
                }
                out.out(escaping: line)
            }
        }
        return ExitCode.success
    }
}

/// The units of `--inventory`, to tell which one a device heard is: by address (the inventory's, or the
/// simulator's for a unit without one), else by advertised name.
struct InventoryUnits {
    let devices: [InventoryDevice]
    private var byAddress: [UInt64: String] = [:]
    private var byName: [String: String] = [:]

    init(_ inventory: Inventory?) {
        devices = inventory?.devices ?? []
        for d in devices {
            if let a = d.address { byAddress[a.value] = byAddress[a.value] ?? d.id }
            if let n = d.name { byName[n] = byName[n] ?? d.id }
        }
    }

    mutating func learnAddresses(of sim: SimulatedCentral) {
        for d in devices { if let a = sim.address(of: d.id) { byAddress[a.value] = byAddress[a.value] ?? d.id } }
    }

    /// The unit a device heard is, if the inventory has it.
    func unit(heard d: DiscoveredDevice) -> String? {
        if let a = BluetoothAddress(d.address), let id = byAddress[a.value] { return id }
        return d.name.flatMap { byName[$0] }
    }

    /// The units of `candidates` not among `heard`, in inventory order.
    func notHeard(_ heard: [String], among candidates: [InventoryDevice]) -> [InventoryDevice] {
        let ids = Set(heard)
        return candidates.filter { !ids.contains($0.id) }
    }
}

/// One element of `scan --json`: a device heard (with its unit and `"heard": true` when `--inventory`
/// is given), or an inventory unit not heard (`"heard": false`, its id, and its address and name when known).
struct ScanRow: Encodable {
    var device: DiscoveredDevice?
    var unit: String?
    var heard: Bool?
    var address: String?
    var name: String?

    init(device: DiscoveredDevice, unit: String?, marked: Bool) {
        self.device = device
        self.unit = unit
        heard = marked ? true : nil
    }

    init(unheard d: InventoryDevice) {
        unit = d.id
        heard = false
        address = d.address?.description
        name = d.name
    }

    private enum Keys: String, CodingKey { case id, heard, address, name }

    func encode(to encoder: any Encoder) throws {
        try device?.encode(to: encoder)
        var c = encoder.container(keyedBy: Keys.self)
        try c.encodeIfPresent(unit, forKey: .id)
        try c.encodeIfPresent(heard, forKey: .heard)
        if device == nil {
            try c.encodeIfPresent(address, forKey: .address)
            try c.encodeIfPresent(name, forKey: .name)
        }
    }
}

/// Why one adapter's scan failed (carried out of the task that ran it).
struct ScanFailure: Error, Sendable {
    var message: String
}
