import BLE
import BLESecurity
import BLESimulator
import Foundation
import HCI
import Workflow

/// One `--adapter`: the simulated fleet, or an HCI controller with the options of its spec (the spec's
/// syntax is HCI's: `AdapterConfiguration`).
enum AdapterChoice: Sendable, Equatable {
    case simulator
    case hci(spec: String, AdapterConfiguration)

    /// The spec as given: the adapter's id in reports, traces and messages.
    var spec: String {
        switch self {
        case .simulator: return "sim"
        case .hci(let spec, _): return spec
        }
    }

    var isSimulator: Bool { self == .simulator }

    /// `sim`, or an HCI spec with its `,option=value` pairs (`--adapter TEXT`).
    @Sendable static func parse(_ text: String) throws(UsageError) -> AdapterChoice {
        try parse(text, shownAs: "--adapter \(text)")
    }

    /// The same, the message naming the spec as `shown` (`adapter: TEXT` in a defaults file).
    static func parse(_ text: String, shownAs shown: String) throws(UsageError) -> AdapterChoice {
        if text == "sim" { return .simulator }
        do {
            return .hci(spec: text, try AdapterConfiguration(parsing: text))
        } catch {
            throw UsageError("`\(shown)` is not an adapter spec (sim, hci:tcp:HOST:PORT, hci:serial:DEV[@BAUD], hci:user:N): \(error.description)")
        }
    }
}

/// Opens the adapters named by `--adapter`: the simulated fleet built from the inventory's device
/// models, or an HCI controller (`hci:tcp:…`, `hci:serial:…`, `hci:user:…`).
enum AdapterFactory {
    /// A problem with the input (exit 2), as opposed to the environment (exit 3).
    struct InputError: Error {
        var message: String
    }

    /// The connection slots of an HCI controller unless `--slots` or its spec's `slots=` says otherwise:
    /// what small controllers hold.
    static let defaultHCISlots = 8

    /// `slots`: connection slots for an HCI controller (`--slots`; default 8, what small controllers hold;
    /// a `slots=` option in the spec wins for that adapter). The spec's other options (scan, connection
    /// interval, data length, PHY, accept list) are applied by `HCIAdapter.open(spec:)`.
    /// `bonds`: the station's bond store (`--bonds`), for either kind of adapter. `verbose`: the HCI
    /// host's log (what it learned of the controller, fallbacks, connections) goes to stderr, as with
    /// `PROVISION_HCI_LOG`. `packetTap` sees every H4 packet of an HCI adapter (`--trace`).
    /// `hears`: the simulator's devices in this station's range (`--sim-hears`; nil: all of the inventory).
    /// `workflowPath`: the workflow run, for the hint when the inventory names no device model.
    static func open(_ choice: AdapterChoice, inventory: Inventory, seed: UInt64, latencyScale: Double,
                     statePath: String?, slots: Int? = nil, bonds: BondStore? = nil, verbose: Bool = false,
                     packetTap: HCIPacketTap? = nil, hears: [InventoryDevice]? = nil, workflowPath: String? = nil) async throws -> any Central {
        switch choice {
        case .simulator:
            return try simulator(inventory: inventory, seed: seed, latencyScale: latencyScale, statePath: statePath, bonds: bonds,
                                 hears: hears, workflowPath: workflowPath)
        case .hci(let spec, let configuration):
            var options = HCIAdapter.Options(connectionSlots: slots ?? defaultHCISlots)
            options.packetTap = packetTap
            options.bonds = bonds
            if verbose { options.log = Self.logToStandardError }
            return try await hci(spec, configuration, options: options)
        }
    }

    /// An HCI controller from its parsed spec (`id` is the spec as given); the spec's options win over `options`.
    static func hci(_ id: String, _ configuration: AdapterConfiguration, options: HCIAdapter.Options = HCIAdapter.Options()) async throws -> HCIAdapter {
        try await HCIAdapter.open(configuration, id: id, options: options)
    }

    /// The slots an adapter will have, known before it opens: `slots=` in an HCI spec, else `--slots`,
    /// else the adapter's own limit.
    static func expectedSlots(_ choice: AdapterChoice, slots: Int?) -> Int {
        switch choice {
        case .simulator: return slots ?? SimulatorOptions().connectionSlots
        case .hci(_, let configuration): return configuration.slots ?? slots ?? defaultHCISlots
        }
    }

    /// `--verbose`: the HCI host's log lines on stderr, as `PROVISION_HCI_LOG` gives them.
    static let logToStandardError: @Sendable (String) -> Void = { line in
        try? FileHandle.standardError.write(contentsOf: Data("hci: \(line)\n".utf8))
    }

    /// The line `provision run` prints at start when, without `--slots`, the concurrency asked for
    /// exceeds the links the radios hold (nil otherwise): fewer devices are connected at once than the
    /// operator may think.
    static func concurrencyNote(concurrency: Int, slots: Int?, adapters: [any Central]) -> String? {
        let held = adapters.reduce(0) { $0 + $1.connectionSlots }
        guard slots == nil, adapters.contains(where: { !$0.isSimulated }), concurrency > held else { return nil }
        let each = adapters.map { "\($0.id): \($0.connectionSlots)" }.joined(separator: ", ")
        return "note: --concurrency \(concurrency) but the adapters hold \(held) link(s) at once (\(each)); at most \(held) device(s)"
            + " are connected at a time. If a controller holds more, say so with --slots N or slots=N in its spec"
    }

    /// What to do when the inventory names no device model: `--sim-model` (the only way for a CSV
    /// inventory) or the inventory's `simulator:` key, naming the model that goes with the workflow —
    /// the one of its name in the `models/` beside the inventory (or the workflow), else those there.
    static func missingModel(inventory: String, workflowPath: String?) -> String {
        let fm = FileManager.default
        let inventoryDir = (inventory as NSString).deletingLastPathComponent
        // Where to look, and how to name a model there: from the current directory (`--sim-model`) and
        // from the inventory (its `simulator:` key).
        var dirs = [(path: inventoryDir.isEmpty ? "models" : inventoryDir + "/models", fromInventory: "models")]
        if let w = workflowPath {
            let beside = ((w as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent + "/inventory/models"
            dirs.append((beside, beside))
        }
        let stem = workflowPath.map { (($0 as NSString).lastPathComponent as NSString).deletingPathExtension }
        var suggestion: (cli: String, key: String)?
        var found: [(cli: String, key: String)] = []
        for dir in dirs {
            let models = ((try? fm.contentsOfDirectory(atPath: dir.path)) ?? []).filter { $0.hasSuffix(".yaml") }.sorted()
            if let stem, let own = models.first(where: { ($0 as NSString).deletingPathExtension == stem }) {
                suggestion = (dir.path + "/" + own, dir.fromInventory + "/" + own)
                break
            }
            if found.isEmpty { found = models.map { (dir.path + "/" + $0, dir.fromInventory + "/" + $0) } }
        }
        let model = suggestion ?? (found.count == 1 ? found[0] : ("MODEL.yaml", "MODEL.yaml"))
        let csv = inventory.lowercased().hasSuffix(".csv")
        var message = "`--adapter sim` needs a device model for \(inventory): give `--sim-model \(model.cli)`"
            + (csv ? " (a CSV inventory cannot name one)" : ", or add `simulator: { model: \(model.key) }` to the inventory")
        if suggestion == nil, found.count > 1 { message += "; models found: " + found.map(\.cli).joined(separator: ", ") }
        return message
    }

    /// The simulated fleet: every device of the inventory (not only the selected ones, as on a real line),
    /// or those in this station's range (`hears`),
    /// each with the model its `simulator:` entry names or the inventory's default model.
    static func simulator(inventory: Inventory, seed: UInt64, latencyScale: Double, statePath: String?,
                          connectionInterval: Duration? = nil, bonds: BondStore? = nil, hears: [InventoryDevice]? = nil,
                          workflowPath: String? = nil) throws -> SimulatedCentral {
        guard let modelPath = inventory.simulatorModel else {
            throw InputError(message: missingModel(inventory: inventory.path, workflowPath: workflowPath))
        }
        let defaultModel: DeviceModel
        do { defaultModel = try DeviceModel.load(path: modelPath) } catch { throw InputError(message: "\(error)") }
        // Other models beside it can be named per device (`simulator: { model: NAME }`).
        var models: [String: DeviceModel] = [:]
        do { models = try DeviceModel.loadDirectory((modelPath as NSString).deletingLastPathComponent) } catch {
            models = [:]
        }
        models[defaultModel.name] = defaultModel
        let specs = (hears ?? inventory.devices).map {
            SimulatedDeviceSpec(id: $0.id, name: $0.name, address: $0.address, variables: $0.vars, overrides: $0.simulator)
        }
        do {
            return try SimulatedCentral(models: models, devices: specs, defaultModel: defaultModel.name, inventoryFile: inventory.path,
                                        options: SimulatorOptions(seed: seed, latencyScale: latencyScale, statePath: statePath,
                                                                  connectionInterval: connectionInterval, bonds: bonds))
        } catch {
            throw InputError(message: "\(error)")
        }
    }
}
