import BLE
import YAML

/// The devices a run goes through, with their per-device variables, read from YAML or CSV.
public struct Inventory: Sendable, Equatable {
    /// The file as given.
    public var path: String
    /// SHA-256 of the file's bytes, lower-case hex.
    public var sha256: String
    /// The file root: the directory file variables (`file:`, `length_of:`) resolve inside — the
    /// inventory's directory, or what its `files: { root: DIR }` names (see `FileRoot`).
    public var baseDirectory: String
    public var devices: [InventoryDevice]
    /// `defaults.vars`: already merged into every device's `vars`; kept for reports.
    public var defaultVars: [String: String]
    /// Variable names whose values never reach a report, a log or the journal.
    public var secrets: Set<String>
    /// `simulator.model`, resolved against the inventory's directory (nil when there is no simulator section).
    public var simulatorModel: String?
    /// The run's metadata the inventory carries (`meta: { operator: ana, lot: L-42 }`), shown in every report.
    public var meta: [String: String] = [:]

    public init(
        path: String, sha256: String, baseDirectory: String, devices: [InventoryDevice], defaultVars: [String: String] = [:],
        secrets: Set<String> = [], simulatorModel: String? = nil
    ) {
        self.path = path
        self.sha256 = sha256
        self.baseDirectory = baseDirectory
        self.devices = devices
        self.defaultVars = defaultVars
        self.secrets = secrets
        self.simulatorModel = simulatorModel
    }

    /// The inventory with the workflow's secret `vars:` added to its secrets, so that they are hidden
    /// everywhere an inventory secret is.
    public func withSecrets(of workflow: Workflow) -> Inventory {
        var out = self
        out.secrets.formUnion(workflow.secretVariables)
        return out
    }

    /// Whether the variable `name` is secret.
    public func isSecret(_ name: String) -> Bool { secrets.contains(name) }

    /// The value to show for a variable in a report or log: `***` for a secret.
    public func displayValue(of name: String, _ value: String) -> String {
        isSecret(name) ? Self.redacted : value
    }

    /// Hides every rendering of a secret value of `device` in `text` (see `Redactor`).
    public func redact(_ text: String, for device: InventoryDevice) -> String {
        redactor(for: device).redact(text)
    }

    /// The redactor for one device's secret values; the engine keeps one per device and adds to it the
    /// bytes it writes from values that use a secret.
    public func redactor(for device: InventoryDevice) -> Redactor {
        Redactor(secrets: secrets.sorted().compactMap { device.vars[$0] })
    }

    /// What a secret is shown as.
    public static let redacted = Redactor.mask

    /// All variable names any device defines.
    public var variableNames: Set<String> {
        var names = Set(defaultVars.keys)
        for d in devices { names.formUnion(d.vars.keys) }
        return names
    }
}

/// One device of an inventory.
public struct InventoryDevice: Sendable, Equatable {
    /// Unique id (the serial number, e.g. `SN-0001`).
    public var id: String
    public var address: BluetoothAddress?
    /// Advertised name (e.g. `SNS-0001`).
    public var name: String?
    /// Variables, with `defaults.vars` already merged in (the device's own values win).
    public var vars: [String: String]
    /// The per-device `simulator:` mapping, as written (interpreted by the simulator). YAML inventories only.
    public var simulator: YAMLNode?
    /// Where the device is written in the inventory file.
    public var mark: SourceMark

    public init(id: String, address: BluetoothAddress? = nil, name: String? = nil, vars: [String: String] = [:], simulator: YAMLNode? = nil, mark: SourceMark) {
        self.id = id
        self.address = address
        self.name = name
        self.vars = vars
        self.simulator = simulator
        self.mark = mark
    }

    /// A lookup for templates during a run: values captured by earlier steps first, then built-ins and
    /// variables. Pass it to `Template.render`, `ValueSpec.bytes` and `MatcherSpec.resolve`.
    public func variables(captured: [String: String]) -> @Sendable (String) -> String? {
        let device = self
        return { name in captured[name] ?? device.value(of: name) }
    }

    /// Resolves a template name for this device: built-ins (`id`, `name`, `address`), then variables.
    public func value(of name: String) -> String? {
        switch name {
        case "id": return id
        case "name": return self.name
        case "address": return address?.description
        default: return vars[name]
        }
    }
}
