import BLE
import BLESecurity
import BLESimulator
import Foundation
import HCI
import Workflow

/// Opens the adapters named by `--adapter` specs: `sim` (the simulated fleet built from the inventory's
/// device models) or an HCI controller (`hci:tcp:…`, `hci:serial:…`, `hci:user:…`).
enum AdapterFactory {
    /// A problem with the input (exit 2), as opposed to the environment (exit 3).
    struct InputError: Error {
        var message: String
    }

    static func isWellFormed(_ spec: String) -> Bool { problem(with: spec) == nil }

    /// What is wrong with a spec (`sim`, or an HCI spec with its `,option=value` pairs), nil when nothing.
    static func problem(with spec: String) -> String? {
        if spec == "sim" { return nil }
        do {
            _ = try AdapterConfiguration(parsing: spec)
            return nil
        } catch {
            return error.description
        }
    }

    /// `slots`: connection slots for an HCI controller (`--slots`; default 8, what small controllers hold;
    /// a `slots=` option in the spec wins for that adapter). The spec's other options (scan, connection
    /// interval, data length, PHY, accept list) are applied by `HCIAdapter.open(spec:)`.
    /// `bonds`: the station's bond store (`--bonds`), for either kind of adapter. `verbose`: the HCI
    /// host's log (what it learned of the controller, fallbacks, connections) goes to stderr, as with
    /// `PROVISION_HCI_LOG`. `packetTap` sees every H4 packet of an HCI adapter (`--trace`).
    /// `hears`: the simulator's devices in this station's range (`--sim-hears`; nil: all of the inventory).
    static func open(_ spec: String, inventory: Inventory, devices: [InventoryDevice], seed: UInt64, latencyScale: Double,
                     statePath: String?, slots: Int? = nil, bonds: BondStore? = nil, verbose: Bool = false,
                     packetTap: HCIPacketTap? = nil, hears: [InventoryDevice]? = nil) async throws -> any Central {
        if spec == "sim" {
            return try simulator(inventory: inventory, seed: seed, latencyScale: latencyScale, statePath: statePath, bonds: bonds,
                                 hears: hears)
        }
        var options = HCIAdapter.Options(connectionSlots: slots ?? 8)
        options.packetTap = packetTap
        options.bonds = bonds
        if verbose { options.log = Self.logToStandardError }
        do {
            return try await HCIAdapter.open(spec: spec, options: options)
        } catch let e as AdapterSpecError {
            throw InputError(message: "\(e)")
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

    /// The simulated fleet: every device of the inventory (not only the selected ones, as on a real line),
    /// or those in this station's range (`hears`),
    /// each with the model its `simulator:` entry names or the inventory's default model.
    static func simulator(inventory: Inventory, seed: UInt64, latencyScale: Double, statePath: String?,
                          connectionInterval: Duration? = nil, bonds: BondStore? = nil, hears: [InventoryDevice]? = nil) throws -> SimulatedCentral {
        guard let modelPath = inventory.simulatorModel else {
            throw InputError(message: "`--adapter sim` needs a device model: add `simulator: { model: models/sensor-v2.yaml }` to \(inventory.path)")
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
