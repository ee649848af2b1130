import BLE
import BLESimulator
import Foundation
import Support
import Workflow
import YAML

/// What validation learns from the simulator model an inventory names (`simulator: { model: … }`):
/// the model file's own errors, the devices' `simulator:` overrides, and every service and
/// characteristic the workflow uses, checked against the model of each selected device (it must exist
/// and allow what the step does). So `provision validate` finds before a run what the run would meet.
enum ModelCheck {
    /// Runs on what could be read of an invalid workflow or inventory too, so that its problems are
    /// reported in the same pass as theirs.
    static func diagnostics(_ result: ValidationResult) -> [Diagnostic] {
        guard let inventory = result.inventory ?? result.partialInventory, let modelPath = inventory.simulatorModel else { return [] }
        let defaultModel: DeviceModel
        do {
            defaultModel = try DeviceModel.load(path: modelPath)
        } catch {
            return [diagnostic(error)]
        }
        var out: [Diagnostic] = []
        // Other models beside it, as the simulator loads them; a broken one matters only to a device that names it.
        let directory = (modelPath as NSString).deletingLastPathComponent
        var models = [defaultModel.name: defaultModel]
        var broken: [String: SimulatorError] = [:]
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.isEmpty ? "." : directory)) ?? []
        for name in names.sorted() where (name.hasSuffix(".yaml") || name.hasSuffix(".yml")) {
            let path = directory.isEmpty ? name : directory + "/" + name
            guard path != modelPath else { continue }
            do {
                let m = try DeviceModel.load(path: path)
                if models[m.name] == nil { models[m.name] = m }
            } catch {
                broken[name] = error
            }
        }
        // Which model each device uses (by name): its `simulator: { model: NAME or FILE }`, else the default.
        var modelOf: [String: String] = [:]
        for device in inventory.devices {
            guard let named = device.simulator?["model"]?.scalar else {
                modelOf[device.id] = defaultModel.name
                continue
            }
            let file = named.split(separator: "/").last.map(String.init) ?? named
            if let m = models[named] ?? models.values.first(where: { ($0.file as NSString).lastPathComponent == file }) {
                modelOf[device.id] = m.name
            } else if let error = broken[file] {
                out.append(diagnostic(error))
            } else {
                out.append(Diagnostic(path: inventory.path, mark: device.simulator?["model"]?.mark ?? device.mark,
                                      message: "device \(device.id) names the simulator model `\(named)`, which is not in \(directory.isEmpty ? "." : directory)",
                                      hint: Suggestions.hint(for: named, in: models.keys)
                                          ?? "models there: \(models.keys.sorted().joined(separator: ", "))"))
            }
        }
        // The overrides, as the simulator reads them (once every device's model is known: the fleet
        // would refuse a missing one again).
        if out.isEmpty {
            let specs = inventory.devices.map {
                SimulatedDeviceSpec(id: $0.id, name: $0.name, address: $0.address, variables: $0.vars, overrides: $0.simulator)
            }
            do {
                _ = try SimulatedCentral(models: models, devices: specs, defaultModel: defaultModel.name, inventoryFile: inventory.path,
                                         options: SimulatorOptions(latencyScale: 0))
            } catch {
                out.append(diagnostic(error))
            }
        }
        if let workflow = result.workflow ?? result.partialWorkflow {
            var checked = Set<String>()
            for device in result.selectedDevices {
                guard let name = modelOf[device.id], checked.insert(name).inserted, let model = models[name] else { continue }
                out += targets(of: workflow, against: model)
            }
        }
        return out
    }

    /// Every characteristic a step uses must be in the model and allow what the step does.
    static func targets(of workflow: Workflow, against model: DeviceModel) -> [Diagnostic] {
        var out: [Diagnostic] = []
        let source = "the simulator model `\(model.name)` (\(model.file))"
        for step in workflow.steps {
            for (target, needs, what) in uses(step) {
                guard let service = model.services.first(where: { $0.uuid == target.service }) else {
                    out.append(Diagnostic(path: workflow.path, mark: step.mark,
                                          message: "step `\(step.name)`: \(source) has no service \(target.service)",
                                          hint: suggestion(target.service.description, model.services.map(\.uuid.description), "its services")))
                    continue
                }
                guard let c = service.characteristics.first(where: { $0.uuid == target.characteristic }) else {
                    out.append(Diagnostic(path: workflow.path, mark: step.mark,
                                          message: "step `\(step.name)`: \(source) has no characteristic \(target.characteristic) in service \(target.service)",
                                          hint: suggestion(target.characteristic.description, service.characteristics.map(\.uuid.description),
                                                     "its characteristics in \(target.service)")))
                    continue
                }
                if !needs.isEmpty, c.properties.isDisjoint(with: needs) {
                    let declared = c.properties.names.isEmpty ? "no properties" : c.properties.names.joined(separator: ", ")
                    out.append(Diagnostic(path: workflow.path, mark: step.mark,
                                          message: "step `\(step.name)` \(what) \(target.characteristic), but in \(source) it allows only \(declared)",
                                          hint: "the device would refuse it; check the characteristic or the model"))
                }
            }
        }
        return out
    }

    /// The characteristics a step uses, what it needs of each (any one of the properties), and the verb.
    private static func uses(_ step: Step) -> [(CharacteristicRef, GATTProperties, String)] {
        func written(_ w: Step.Write) -> (CharacteristicRef, GATTProperties, String) {
            (w.target, w.withResponse ? [.write] : [.writeWithoutResponse], "writes")
        }
        switch step.kind {
        case .read(let r): return [(r.target, [.read], "reads")]
        case .write(let w): return [written(w)]
        case .writeBlob(let w): return [(w.target, [.writeWithoutResponse, .write], "writes")]
        case .subscribe(let s): return [(s.target, s.allowUndeclared ? [] : [.notify, .indicate], "subscribes to")]
        case .await(let a):
            return (a.trigger.map { [written($0)] } ?? []) + (a.confirm.map { [($0.target, [.read], "reads")] } ?? [])
        default: return []
        }
    }

    private static func suggestion(_ wanted: String, _ candidates: [String], _ what: String) -> String {
        Suggestions.closest(to: wanted, in: candidates).map { "did you mean \($0)?" } ?? "\(what): \(candidates.joined(separator: ", "))"
    }

    /// A simulator error where it happened (the start of its file when it has no position).
    static func diagnostic(_ e: SimulatorError) -> Diagnostic {
        Diagnostic(path: e.file, mark: e.mark ?? SourceMark(line: 1, column: 1), message: e.message, hint: e.hint)
    }
}
