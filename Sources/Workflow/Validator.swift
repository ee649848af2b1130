import Foundation
import YAML

/// Everything `provision validate` (and the engine, before a run) learns from a workflow, an inventory and a
/// device selection.
public struct ValidationResult: Sendable {
    public var workflow: Workflow?
    public var inventory: Inventory?
    /// The devices `--limit` selected (all devices without a limit), in inventory order.
    public var selectedDevices: [InventoryDevice]
    /// Every problem found, in file order (workflow first, then inventory, then cross-checks).
    public var diagnostics: [Diagnostic]

    /// True when there is no error (warnings allowed) and the workflow parsed.
    public var isValid: Bool { workflow != nil && !diagnostics.contains { $0.severity == .error } }

    public var errors: [Diagnostic] { diagnostics.filter { $0.severity == .error } }
}

/// Checks a workflow against an inventory before anything touches a radio.
public enum Validator {
    /// The largest file read (larger files are refused before reading).
    public static let maxFileBytes = 10 * 1024 * 1024

    /// Reads, parses and cross-checks. `currentDirectory` resolves an `@file` in `limit`.
    public static func validate(workflowPath: String, inventoryPath: String?, limit: String? = nil, currentDirectory: String = "") -> ValidationResult {
        var diagnostics: [Diagnostic] = []
        var workflow: Workflow?
        switch readFile(workflowPath) {
        case .success(let bytes):
            let parsed = WorkflowParser().parse(bytes: bytes, path: workflowPath)
            workflow = parsed.workflow
            diagnostics += parsed.diagnostics
        case .failure(let d):
            diagnostics.append(d)
        }
        var inventory: Inventory?
        if let inventoryPath {
            switch readFile(inventoryPath) {
            case .success(let bytes):
                let parsed = InventoryParser().parse(bytes: bytes, path: inventoryPath)
                inventory = parsed.inventory
                diagnostics += parsed.diagnostics
            case .failure(let d):
                diagnostics.append(d)
            }
        } else if limit != nil {
            diagnostics.append(Diagnostic(path: "--limit", mark: SourceMark(line: 1, column: 1), message: "`--limit` needs `--inventory`"))
        }
        var selected = inventory?.devices ?? []
        if let inventory, let limit {
            let s = DeviceSelection.select(limit, from: inventory.devices, currentDirectory: currentDirectory)
            selected = s.devices
            diagnostics += s.diagnostics
        }
        if let workflow, let inventory {
            diagnostics += check(workflow, against: inventory, devices: selected)
        }
        return ValidationResult(workflow: workflow, inventory: inventory, selectedDevices: selected, diagnostics: diagnostics)
    }

    /// Reads a file, refusing directories, missing files and files over `maxFileBytes`.
    public static func readFile(_ path: String) -> Result<[UInt8], Diagnostic> {
        let start = SourceMark(line: 1, column: 1)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            return .failure(Diagnostic(path: path, mark: start, message: "no such file", hint: "check the path (relative paths start from the current directory)"))
        }
        if isDirectory.boolValue {
            return .failure(Diagnostic(path: path, mark: start, message: "is a directory, not a file"))
        }
        if let attributes = try? FileManager.default.attributesOfItem(atPath: path),
           let size = (attributes[.size] as? NSNumber)?.intValue, size > maxFileBytes {
            return .failure(Diagnostic(
                path: path, mark: start, message: "file is \(size) bytes; the limit is \(maxFileBytes) bytes",
                hint: "a workflow or inventory this large is almost certainly not what you meant"))
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            return .failure(Diagnostic(path: path, mark: start, message: "cannot read the file (permissions?)"))
        }
        return .success([UInt8](data))
    }

    /// Cross-checks: every template reference resolves for every selected device, and every value the
    /// workflow writes can be produced for every device (hex variables are hex, files exist and fit).
    public static func check(_ workflow: Workflow, against inventory: Inventory, devices: [InventoryDevice]) -> [Diagnostic] {
        var out: [Diagnostic] = []
        let path = workflow.path
        var captured = Set<String>()
        let known = inventory.variableNames
        var reported = Set<String>()
        var fileSizes: [String: Int64?] = [:]
        for step in workflow.steps {
            // 1. References.
            for template in step.templates {
                for (name, mark) in template.references where !captured.contains(name) {
                    let missing = devices.filter { $0.value(of: name) == nil }
                    guard !missing.isEmpty else { continue }
                    let key = "\(name)@\(mark)"
                    guard reported.insert(key).inserted else { continue }
                    if !Template.builtins.contains(name) && !known.contains(name) {
                        let candidates = known.union(Template.builtins).union(workflow.capturedNames)
                        out.append(Diagnostic(
                            path: path, mark: mark, message: "unknown variable `${\(name)}`",
                            hint: Suggestions.hint(for: name, in: candidates)
                                ?? "define it in the inventory (`vars:` or `defaults: { vars: }`) or capture it with an earlier `read` step (`id: \(name)`)"))
                    } else {
                        out.append(Diagnostic(
                            path: path, mark: mark,
                            message: "`${\(name)}` is not defined for \(missing.count) device\(missing.count == 1 ? "" : "s"): \(idList(missing))",
                            hint: Template.builtins.contains(name)
                                ? "give those devices a `\(name)` in the inventory"
                                : "add `\(name)` to those devices' `vars`, or to `defaults: { vars: }`"))
                    }
                }
            }
            // 2. Values that do not depend on captures: render them for every device.
            for spec in step.valueSpecs where spec.templates.allSatisfy({ $0.referencedNames.allSatisfy { !captured.contains($0) } }) {
                guard let mark = spec.templates.first?.references.first?.mark ?? spec.templates.first.map({ _ in step.mark }) else { continue }
                guard spec.templates.contains(where: { !$0.isLiteral }) else { continue }
                var failures: [(InventoryDevice, String)] = []
                for device in devices {
                    if let problem = spec.problem(for: device, inventory: inventory, fileSizes: &fileSizes) {
                        failures.append((device, problem))
                    }
                }
                if let first = failures.first {
                    let ids = idList(failures.map(\.0))
                    out.append(Diagnostic(
                        path: path, mark: mark,
                        message: "step `\(step.name)`: the value cannot be made for \(failures.count) device\(failures.count == 1 ? "" : "s") (\(ids)): \(inventory.redact(first.1, for: first.0))",
                        hint: "fix the variable in the inventory (file paths are relative to \(inventory.path))"))
                }
            }
            if let id = step.capturedName { captured.insert(id) }
        }
        // 3. Scanning needs something to find the device by.
        if workflow.steps.contains(where: { if case .scan(let s) = $0.kind { return s.address == nil && s.name == nil } else { return false } }) {
            let lost = devices.filter { $0.address == nil && $0.name == nil }
            if !lost.isEmpty, let scan = workflow.steps.first(where: { if case .scan = $0.kind { return true } else { return false } }) {
                out.append(Diagnostic(path: path, mark: scan.mark, message: "`scan` finds devices by address or name, but \(lost.count) devices have neither: \(idList(lost))"))
            }
        }
        return out
    }

    /// Up to ten ids, then "and N more".
    static func idList(_ devices: [InventoryDevice]) -> String {
        let shown = devices.prefix(10).map(\.id).joined(separator: ", ")
        return devices.count > 10 ? "\(shown) and \(devices.count - 10) more" : shown
    }
}

extension ValueSpec {
    /// Why this value cannot be produced for `device`, without reading whole files (sizes are cached).
    func problem(for device: InventoryDevice, inventory: Inventory, fileSizes: inout [String: Int64?]) -> String? {
        let lookup = { (name: String) in device.value(of: name) }
        func size(_ t: Template) -> (String, Int64?)? {
            guard let rendered = try? t.render(lookup) else { return nil }
            let path = ValueSpec.resolve(path: rendered, baseDirectory: inventory.baseDirectory)
            if let cached = fileSizes[path] { return (path, cached) }
            let s = try? ValueSpec.fileSize(path)
            fileSizes[path] = s
            return (path, s)
        }
        switch self {
        case .file(let t):
            guard let (path, s) = size(t) else { return nil }
            return s == nil ? "cannot read file \(path)" : nil
        case .integer(let format, .lengthOf(let t)):
            guard let (path, s) = size(t) else { return nil }
            guard let s else { return "cannot read file \(path)" }
            return format.encode(s) == nil ? "file \(path) is \(s) bytes, too large for \(format.rawValue)" : nil
        case .concat(let parts):
            for p in parts {
                if let problem = p.problem(for: device, inventory: inventory, fileSizes: &fileSizes) { return problem }
            }
            return nil
        default:
            do {
                _ = try bytes(variables: lookup, baseDirectory: inventory.baseDirectory)
                return nil
            } catch {
                return error.message.contains("has no value") ? nil : error.message
            }
        }
    }
}
