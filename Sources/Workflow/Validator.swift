import Foundation
import Support
import YAML

/// Everything `provision validate` (and the engine, before a run) learns from a workflow, an inventory and a
/// device selection.
public struct ValidationResult: Sendable {
    public var workflow: Workflow?
    public var inventory: Inventory?
    /// What could be read of an invalid workflow or inventory (nil when nothing could): the checks that
    /// need both (the simulator model's too) run on these, so every problem is reported in one pass.
    public var partialWorkflow: Workflow?
    public var partialInventory: Inventory?
    /// The devices `--limit` selected (all devices without a limit), in inventory order.
    public var selectedDevices: [InventoryDevice]
    /// Every problem found, in file order (workflow first, then inventory, then cross-checks).
    public var diagnostics: [Diagnostic]
    /// Every file the run would read: workflow, inventory, device model, `--limit @file`, and the files
    /// the workflow's values name for the selected devices (real paths). Output paths must not be these.
    public var inputFiles: [InputFile] = []

    public init(workflow: Workflow?, inventory: Inventory?, selectedDevices: [InventoryDevice], diagnostics: [Diagnostic]) {
        self.workflow = workflow
        self.inventory = inventory
        self.selectedDevices = selectedDevices
        self.diagnostics = diagnostics
    }

    /// True when there is no error (warnings allowed) and the workflow parsed.
    public var isValid: Bool { workflow != nil && !diagnostics.contains { $0.severity == .error } }

    public var errors: [Diagnostic] { diagnostics.filter { $0.severity == .error } }
}

/// A file a command reads, and what it is to the run (for messages: "the inventory").
public struct InputFile: Sendable, Equatable {
    public var role: String
    public var path: String
    public init(role: String, path: String) {
        self.role = role
        self.path = path
    }
}

/// Checks a workflow against an inventory before anything touches a radio.
public enum Validator {
    /// The largest workflow (or other file) read; larger files are refused before reading.
    public static let maxFileBytes = 10 * 1024 * 1024
    /// The largest inventory read: a line of 100,000 devices is 13 MB of YAML (7 MB of CSV), and the
    /// scale-out target; 64 MiB holds about half a million in YAML. Larger is refused before reading.
    public static let maxInventoryBytes = InventoryParser.limits.maxBytes

    /// Reads, parses and cross-checks. `currentDirectory` resolves an `@file` in `limit`.
    public static func validate(workflowPath: String, inventoryPath: String?, limit: String? = nil, currentDirectory: String = "",
                                secretsPath: String? = nil) -> ValidationResult {
        var diagnostics: [Diagnostic] = []
        var workflow: Workflow?
        var partial: Workflow?
        var declared = Set<String>()
        switch readFile(ValueSpec.resolve(path: workflowPath, baseDirectory: currentDirectory), shownAs: workflowPath) {
        case .success(let bytes):
            let parsed = WorkflowParser().parseWithCaptures(bytes: bytes, path: workflowPath)
            partial = parsed.partial
            declared = parsed.captures
            diagnostics += parsed.diagnostics
            if !parsed.diagnostics.contains(where: { $0.severity == .error }) { workflow = parsed.partial }
        case .failure(let d):
            diagnostics.append(d)
        }
        var inventory: Inventory?
        var partialInventory: Inventory?
        if let inventoryPath {
            let loaded = loadInventoryPartial(inventoryPath, currentDirectory: currentDirectory)
            partialInventory = loaded.partial
            if !loaded.diagnostics.contains(where: { $0.severity == .error }) { inventory = loaded.partial }
            diagnostics += loaded.diagnostics
        } else if limit != nil {
            diagnostics.append(Diagnostic(path: "--limit", mark: SourceMark(line: 1, column: 1), message: "`--limit` needs `--inventory`"))
        }
        // `--secrets FILE`: the line's shared secret values, given to every device.
        if let secretsPath {
            let loaded = SecretsFile.load(ValueSpec.resolve(path: secretsPath, baseDirectory: currentDirectory), shownAs: secretsPath)
            diagnostics += loaded.diagnostics
            if let i = partialInventory, loaded.diagnostics.isEmpty {
                let (merged, clashes) = i.addingLineSecrets(loaded.values, from: secretsPath)
                partialInventory = merged
                diagnostics += clashes
            }
        }
        // Secrets the workflow declares are hidden like the inventory's, by everything that uses it.
        if let partial, let i = partialInventory { partialInventory = i.withSecrets(of: partial) }
        if inventory != nil { inventory = partialInventory }
        var selected = partialInventory?.devices ?? []
        if let partialInventory, let limit {
            let s = DeviceSelection.select(limit, from: partialInventory.devices, currentDirectory: currentDirectory)
            selected = s.devices
            diagnostics += s.diagnostics
        }
        var files: [String: FileFacts] = [:]
        if let partial, let partialInventory {
            let cross = check(partial, against: partialInventory, devices: selected, alsoCaptured: declared, files: &files)
            if !cross.isEmpty {
                // Keep each file's diagnostics in position order, the workflow's first.
                let mine = (diagnostics + cross).filter { $0.path == workflowPath }.sorted { $0.mark < $1.mark }
                let others = diagnostics.filter { $0.path != workflowPath }
                let theirs = cross.filter { $0.path != workflowPath }
                diagnostics = mine + others + theirs
            }
        }
        var inputs = [InputFile(role: "the workflow", path: ValueSpec.resolve(path: workflowPath, baseDirectory: currentDirectory))]
        if let inventoryPath {
            inputs.append(InputFile(role: "the inventory", path: ValueSpec.resolve(path: inventoryPath, baseDirectory: currentDirectory)))
        }
        if let secretsPath {
            inputs.append(InputFile(role: "the secrets file", path: ValueSpec.resolve(path: secretsPath, baseDirectory: currentDirectory)))
        }
        if let model = inventory?.simulatorModel {
            // The simulator loads every model beside the default one (devices may name them).
            let dir = InventoryParser.directory(of: model)
            let others = (try? FileManager.default.contentsOfDirectory(atPath: dir.isEmpty ? "." : dir)) ?? []
            inputs.append(InputFile(role: "the device model", path: model))
            for name in others.sorted() where name.hasSuffix(".yaml") && ValueSpec.resolve(path: name, baseDirectory: dir) != model {
                inputs.append(InputFile(role: "a device model", path: ValueSpec.resolve(path: name, baseDirectory: dir)))
            }
        }
        for item in (limit ?? "").split(separator: ",") where item.trimmingSpaces.hasPrefix("@") {
            inputs.append(InputFile(role: "the --limit list", path: ValueSpec.resolve(path: String(item.trimmingSpaces.dropFirst()), baseDirectory: currentDirectory)))
        }
        for (_, f) in files.sorted(by: { $0.key < $1.key }) {
            if case .success(let file) = f { inputs.append(InputFile(role: "a file the workflow sends", path: file.real)) }
        }
        var result = ValidationResult(workflow: workflow, inventory: inventory, selectedDevices: selected, diagnostics: diagnostics)
        result.partialWorkflow = partial
        result.partialInventory = partialInventory
        result.inputFiles = inputs
        return result
    }

    /// Reads and checks an inventory on its own (for commands that need no workflow, e.g. `scan --adapter sim`).
    public static func loadInventory(_ path: String, currentDirectory: String = "") -> (inventory: Inventory?, diagnostics: [Diagnostic]) {
        let r = loadInventoryPartial(path, currentDirectory: currentDirectory)
        return (r.diagnostics.contains { $0.severity == .error } ? nil : r.partial, r.diagnostics)
    }

    /// `loadInventory`, with what could be read of an invalid inventory (`InventoryParser.parsePartial`).
    static func loadInventoryPartial(_ path: String, currentDirectory: String) -> (partial: Inventory?, diagnostics: [Diagnostic]) {
        let resolved = ValueSpec.resolve(path: path, baseDirectory: currentDirectory)
        switch readFile(resolved, shownAs: path, limit: maxInventoryBytes) {
        case .success(let bytes):
            return InventoryParser().parsePartial(bytes: bytes, path: path, baseDirectory: InventoryParser.directory(of: resolved))
        case .failure(let d):
            return (nil, [d])
        }
    }

    /// Reads a file, refusing directories, missing files and files over `limit` bytes. Diagnostics name
    /// the file as `shownAs` (the path the user gave).
    public static func readFile(_ path: String, shownAs: String? = nil, limit: Int = maxFileBytes) -> Result<[UInt8], Diagnostic> {
        let start = SourceMark(line: 1, column: 1)
        let shown = shownAs ?? path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            return .failure(Diagnostic(path: shown, mark: start, message: "no such file", hint: "check the path (relative paths start from the current directory)"))
        }
        if isDirectory.boolValue {
            return .failure(Diagnostic(path: shown, mark: start, message: "is a directory, not a file"))
        }
        if let attributes = try? FileManager.default.attributesOfItem(atPath: path),
           let size = (attributes[.size] as? NSNumber)?.intValue, size > limit {
            return .failure(Diagnostic(
                path: shown, mark: start, message: "file is \(size) bytes; the limit is \(limit) bytes",
                hint: limit == maxInventoryBytes ? "split the line into several inventories (each station runs its own), or use CSV (about half the size)"
                                                 : "a workflow this large is almost certainly not what you meant"))
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            return .failure(Diagnostic(path: shown, mark: start, message: "cannot read the file (permissions?)"))
        }
        return .success([UInt8](data))
    }

    /// Cross-checks: every template reference resolves for every selected device, and every value the
    /// workflow writes can be produced for every device (hex variables are hex, files exist and fit).
    public static func check(_ workflow: Workflow, against inventory: Inventory, devices: [InventoryDevice]) -> [Diagnostic] {
        var files: [String: FileFacts] = [:]
        return check(workflow, against: inventory, devices: devices, alsoCaptured: [], files: &files)
    }

    /// `files` collects every file the workflow's values name for these devices (see `FileFacts`).
    static func check(_ workflow: Workflow, against inventory: Inventory, devices: [InventoryDevice], alsoCaptured: Set<String>,
                      files: inout [String: FileFacts]) -> [Diagnostic] {
        var out: [Diagnostic] = []
        let path = workflow.path
        var captured = Set<String>()
        let capturedAnywhere = Set(workflow.capturedNames).union(alsoCaptured)
        let known = inventory.variableNames
        var reported = Set<String>()
        var images: [String: ImageFacts] = [:]
        for step in workflow.steps {
            // 1. References.
            for template in step.templates {
                // Declared variables are checked once for every device below (4).
                for (name, mark) in template.references where !captured.contains(name) && !capturedAnywhere.contains(name)
                    && workflow.variables[name] == nil {
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
                            hint: (Template.builtins.contains(name)
                                ? "give those devices a `\(name)` in the inventory"
                                : "add `\(name)` to those devices' `vars`, or to `defaults: { vars: }`")
                                + "; \(missing[0].id) is at \(inventory.path):\(missing[0].mark)"))
                    }
                }
            }
            // 2. Values that do not depend on captures: render them for every device.
            for spec in step.valueSpecs where spec.templates.allSatisfy({ $0.referencedNames.allSatisfy { !captured.contains($0) } }) {
                guard let mark = spec.templates.first?.references.first?.mark ?? spec.templates.first.map({ _ in step.mark }) else { continue }
                guard spec.templates.contains(where: { !$0.isLiteral }) else { continue }
                var failures: [(InventoryDevice, String)] = []
                // A declared variable a device gets wrong is reported once, at the device (4), not here too.
                let declaredHere = Set(spec.templates.flatMap(\.referencedNames)).compactMap { name in workflow.variables[name].map { (name, $0) } }
                for device in devices {
                    if declaredHere.contains(where: { name, declaration in
                        guard let text = device.value(of: name) else { return true }
                        return (try? declaration.value(fromText: text, name: name)) == nil
                    }) { continue }
                    if let problem = spec.problem(for: device, inventory: inventory, files: &files) {
                        failures.append((device, problem))
                    }
                }
                if let first = failures.first {
                    let ids = idList(failures.map(\.0))
                    out.append(Diagnostic(
                        path: path, mark: mark,
                        message: "step `\(step.name)`: the value cannot be made for \(failures.count) device\(failures.count == 1 ? "" : "s") (\(ids)): \(inventory.redact(first.1, for: first.0))",
                        hint: (spec.fileTemplates.isEmpty
                            ? "fix the variable in the inventory"
                            : "fix the variable in the inventory (file paths are relative to the inventory's file root, \(inventory.baseDirectory.isEmpty ? "." : inventory.baseDirectory))")
                            + "; \(first.0.id) is at \(inventory.path):\(first.0.mark)"))
                }
            }
            // 2b. Limits written with inventory variables: read them for every device.
            if case .verify(let v) = step.kind {
                for (key, kind, limit) in v.limits.all {
                    guard case .template(let t) = limit, t.referencedNames.allSatisfy({ !capturedAnywhere.contains($0) && workflow.variables[$0] == nil }),
                          let mark = t.references.first?.mark else { continue }
                    var failures: [(InventoryDevice, String)] = []
                    for device in devices {
                        guard let text = try? t.render({ device.value(of: $0) }) else { continue }
                        do { _ = try LimitSpecs.read(text, kind, valueType: v.valueType) } catch { failures.append((device, error.message)) }
                    }
                    if let first = failures.first {
                        out.append(Diagnostic(
                            path: path, mark: mark,
                            message: "step `\(step.name)`: `\(key)` cannot be read for \(failures.count) device\(failures.count == 1 ? "" : "s") (\(idList(failures.map(\.0)))): \(inventory.redact(first.1, for: first.0))",
                            hint: "fix the variable in the inventory, or declare it in `vars:` with its type; \(first.0.id) is at \(inventory.path):\(first.0.mark)"))
                    }
                }
            }
            // 2c. Passkeys and OOB data: inventory secrets, six digits / 16 bytes for every device.
            if let security = step.security {
                out += checkSecrets(security, step: step, path: path, workflow: workflow, inventory: inventory, devices: devices,
                                    captured: capturedAnywhere, reported: &reported)
            }
            // 2d. MCUboot images: read and checked for every device.
            out += checkImages(step, path: path, inventory: inventory, devices: devices, captured: captured, images: &images)
            // 2d. ESP provisioning: the SSID, passphrase and proof of possession of every device.
            out += checkESP(step, path: path, workflow: workflow, inventory: inventory, devices: devices, captured: capturedAnywhere)
            if let id = step.capturedName { captured.insert(id) }
        }
        // 4. Declared variables (`vars:`): every device gives each a value of its type and length.
        out += checkDeclared(workflow, inventory: inventory, devices: devices)
        // 3. Scanning needs something to find the device by.
        if workflow.steps.contains(where: { if case .scan(let s) = $0.kind { return s.address == nil && s.name == nil } else { return false } }) {
            let lost = devices.filter { $0.address == nil && $0.name == nil }
            if !lost.isEmpty, let scan = workflow.steps.first(where: { if case .scan = $0.kind { return true } else { return false } }) {
                out.append(Diagnostic(path: path, mark: scan.mark, message: "`scan` finds devices by address or name, but \(lost.count) devices have neither: \(idList(lost))"))
            }
        }
        return out
    }

    /// The secrets a `connect` or `pair` uses: each variable declared secret — in the inventory's
    /// `secrets:`, or in the workflow's `vars:` with `secret: true` — (not a built-in, not a value read
    /// from the device or derived with `set:`), and its value a six-digit passkey or 16 bytes of OOB data
    /// for every selected device, as the device's steps will render it (a declared variable through its
    /// type). Messages never show a value.
    static func checkSecrets(_ security: Step.Security, step: Step, path: String, workflow: Workflow, inventory: Inventory,
                             devices: [InventoryDevice], captured: Set<String>, reported: inout Set<String>) -> [Diagnostic] {
        func isSecret(_ name: String) -> Bool {
            inventory.isSecret(name) || (workflow.variables[name]?.secret ?? false)
        }
        /// A name's text for `device` as the engine renders it: a declared variable through its type.
        func text(_ name: String, _ device: InventoryDevice) -> String? {
            guard let raw = device.value(of: name) else { return nil }
            guard let declaration = workflow.variables[name] else { return raw }
            return (try? declaration.value(fromText: raw, name: name))?.description
        }
        var out: [Diagnostic] = []
        var fields: [(template: Template, what: String, valid: (String) -> Bool, shape: String)] = []
        if let p = security.passkey {
            fields.append((p, "the passkey", { Step.Security.passkey($0) != nil }, "six digits"))
        }
        if let oob = security.oob {
            fields.append((oob.confirm, "the OOB `confirm` value", { Step.Security.oobValue($0) != nil }, "16 bytes (32 hex digits)"))
            fields.append((oob.random, "the OOB `random` value", { Step.Security.oobValue($0) != nil }, "16 bytes (32 hex digits)"))
        }
        for field in fields {
            var usable = true
            for (name, mark) in field.template.references {
                if captured.contains(name) {
                    out.append(Diagnostic(path: path, mark: mark, message: "\(field.what) comes from `${\(name)}`, a value read from the device",
                                          hint: "a passkey or OOB data comes from the inventory, as a secret"))
                    usable = false
                } else if !isSecret(name), workflow.variables[name] != nil {
                    out.append(Diagnostic(path: path, mark: mark, message: "\(field.what) comes from `${\(name)}`, which `vars:` does not declare secret",
                                          hint: "add `secret: true` to its declaration (at \(workflow.path):\(workflow.variableMarks[name] ?? step.mark)), so its value never reaches a report, a journal or a log"))
                    usable = false
                } else if !isSecret(name) && (inventory.variableNames.contains(name) || Template.builtins.contains(name)) {
                    out.append(Diagnostic(path: path, mark: mark, message: "\(field.what) comes from `${\(name)}`, which the inventory does not declare secret",
                                          hint: "add `\(name)` to `secrets:` in \(inventory.path), so its value never reaches a report, a journal or a log"))
                    usable = false
                } else if !isSecret(name) {
                    usable = false   // unknown: reported as such above
                }
            }
            guard usable else { continue }
            let bad = devices.filter { device in
                guard let value = try? field.template.render({ text($0, device) }) else { return false }
                return !field.valid(value)
            }
            let key = "\(field.what)@\(field.template.references.first?.1 ?? step.mark)"
            if let first = bad.first, reported.insert(key).inserted {
                out.append(Diagnostic(
                    path: path, mark: field.template.references.first?.1 ?? step.mark,
                    message: "step `\(step.name)`: \(field.what) is not \(field.shape) for \(bad.count) device\(bad.count == 1 ? "" : "s"): \(idList(bad))",
                    hint: "fix it in the inventory; \(first.id) is at \(inventory.path):\(first.mark)"))
            }
        }
        return out
    }

    /// Every selected device has a value for every declared variable, of its type and length. A wrong
    /// value is reported at the device in the inventory (at most ten devices a variable, then a count).
    static func checkDeclared(_ workflow: Workflow, inventory: Inventory, devices: [InventoryDevice]) -> [Diagnostic] {
        var out: [Diagnostic] = []
        for (name, declaration) in workflow.variables.sorted(by: { $0.key < $1.key }) {
            let declaredAt = workflow.variableMarks[name] ?? SourceMark(line: 1, column: 1)
            var missing: [InventoryDevice] = []
            var wrong: [InventoryDevice] = []
            for device in devices {
                guard let text = device.value(of: name) else {
                    missing.append(device)
                    continue
                }
                do {
                    _ = try declaration.value(fromText: text, name: name)
                } catch {
                    wrong.append(device)
                    if wrong.count <= 10 {
                        out.append(Diagnostic(path: inventory.path, mark: device.mark, message: "device \(device.id): \(error.message)",
                                              hint: "`\(name)` is declared `\(describe(declaration))` at \(workflow.path):\(declaredAt)"))
                    }
                }
            }
            if wrong.count > 10 {
                out.append(Diagnostic(path: inventory.path, mark: wrong[10].mark,
                                      message: "`\(name)` is not a valid `\(describe(declaration))` for \(wrong.count - 10) more devices: \(idList(Array(wrong.dropFirst(10))))"))
            }
            if let first = missing.first {
                out.append(Diagnostic(
                    path: workflow.path, mark: declaredAt,
                    message: "`\(name)` is declared in `vars:` but not defined for \(missing.count) device\(missing.count == 1 ? "" : "s"): \(idList(missing))",
                    hint: "add `\(name)` to those devices' `vars`, or to `defaults: { vars: }`; \(first.id) is at \(inventory.path):\(first.mark)"))
            }
        }
        return out
    }

    /// A declaration as written: `{ hex: 16, secret: true }`, `uint8`.
    static func describe(_ d: VariableDeclaration) -> String {
        guard d.length != nil || d.secret else { return d.format.rawValue }
        var parts: [String] = []
        if let l = d.length { parts.append("\(d.format.rawValue): \(l.lowerBound == l.upperBound ? "\(l.lowerBound)" : "[\(l.lowerBound), \(l.upperBound)]")") } else {
            parts.append("\(d.format.rawValue): ~")
        }
        if d.secret { parts.append("secret: true") }
        return "{ \(parts.joined(separator: ", ")) }"
    }

    /// Up to ten ids, then "and N more".
    static func idList(_ devices: [InventoryDevice]) -> String {
        let shown = devices.prefix(10).map(\.id).joined(separator: ", ")
        return devices.count > 10 ? "\(shown) and \(devices.count - 10) more" : shown
    }
}

/// What validation learned about the file a rendered path names (cached: many devices share a blob).
typealias FileFacts = Result<(real: String, size: Int64), ValueError>

extension ValueSpec {
    /// Why this value cannot be produced for `device`, without reading whole files (sizes are cached in
    /// `files`, by the path as rendered, through the inventory's `FileRoot`).
    func problem(for device: InventoryDevice, inventory: Inventory, files: inout [String: FileFacts]) -> String? {
        let lookup = { (name: String) in device.value(of: name) }
        func facts(_ t: Template) -> (String, FileFacts)? {
            guard let rendered = try? t.render(lookup) else { return nil }
            if let cached = files[rendered] { return (rendered, cached) }
            let root = FileRoot(inventory.baseDirectory)
            let f: FileFacts
            do {
                let real = try root.resolve(rendered)
                f = .success((real, try root.size(of: rendered)))
            } catch {
                f = .failure(error)
            }
            files[rendered] = f
            return (rendered, f)
        }
        switch self {
        case .file(let t, let allowEmpty):
            guard let (path, f) = facts(t) else { return nil }
            switch f {
            case .failure(let e): return e.message
            case .success(let file): return file.size == 0 && !allowEmpty ? ValueSpec.emptyFile(path).message : nil
            }
        case .integer(let format, .lengthOf(let t)):
            guard let (path, f) = facts(t) else { return nil }
            switch f {
            case .failure(let e): return e.message
            case .success(let file): return format.encode(file.size) == nil ? "file \(path) is \(file.size) bytes, too large for \(format.rawValue)" : nil
            }
        case .concat(let parts):
            for p in parts {
                if let problem = p.problem(for: device, inventory: inventory, files: &files) { return problem }
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
