import BLE
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

    static func isWellFormed(_ spec: String) -> Bool {
        if spec == "sim" { return true }
        return (try? AdapterSpec(parsing: spec)) != nil
    }

    /// `slots`: connection slots for an HCI controller (`--slots`; default 8, what small controllers hold).
    static func open(_ spec: String, inventory: Inventory, devices: [InventoryDevice], seed: UInt64, latencyScale: Double,
                     statePath: String?, slots: Int? = nil) async throws -> any Central {
        if spec == "sim" {
            return try simulator(inventory: inventory, seed: seed, latencyScale: latencyScale, statePath: statePath)
        }
        do {
            return try await HCIAdapter.open(spec: spec, options: HCIAdapter.Options(connectionSlots: slots ?? 8))
        } catch let e as AdapterSpecError {
            throw InputError(message: "\(e)")
        }
    }

    /// The simulated fleet: every device of the inventory (not only the selected ones, as on a real line),
    /// each with the model its `simulator:` entry names or the inventory's default model.
    static func simulator(inventory: Inventory, seed: UInt64, latencyScale: Double, statePath: String?,
                          connectionInterval: Duration? = nil) throws -> SimulatedCentral {
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
        let specs = inventory.devices.map {
            SimulatedDeviceSpec(id: $0.id, name: $0.name, address: $0.address, variables: $0.vars, overrides: $0.simulator)
        }
        do {
            return try SimulatedCentral(models: models, devices: specs, defaultModel: defaultModel.name, inventoryFile: inventory.path,
                                        options: SimulatorOptions(seed: seed, latencyScale: latencyScale, statePath: statePath,
                                                                  connectionInterval: connectionInterval))
        } catch {
            throw InputError(message: "\(error)")
        }
    }
}
