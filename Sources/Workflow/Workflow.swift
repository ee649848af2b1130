import BLE
import YAML

/// A parsed and checked workflow: what every device goes through, in order.
public struct Workflow: Sendable, Equatable {
    /// Settings every step inherits unless it sets its own.
    public struct Defaults: Sendable, Equatable {
        public var timeout: Duration
        public var retry: RetryPolicy
        public var reconnect: ReconnectPolicy
        public init(timeout: Duration = .seconds(10), retry: RetryPolicy = .none, reconnect: ReconnectPolicy = .standard) {
            self.timeout = timeout
            self.retry = retry
            self.reconnect = reconnect
        }
    }

    public var name: String
    public var description: String?
    /// The file as given (relative or absolute).
    public var path: String
    /// SHA-256 of the file's bytes, lower-case hex.
    public var sha256: String
    public var defaults: Defaults
    public var steps: [Step]
    /// `vars:`: the inventory variables the workflow declares, with their type, length and secrecy;
    /// every selected device must give each a valid value.
    public var variables: [String: VariableDeclaration] = [:]
    /// Where each declared variable is written.
    public var variableMarks: [String: SourceMark] = [:]
    /// Declared secret variables and captures derived from a secret (`set:` over one): never shown.
    public var secretNames: Set<String> = []

    public init(name: String, description: String?, path: String, sha256: String, defaults: Defaults, steps: [Step]) {
        self.name = name
        self.description = description
        self.path = path
        self.sha256 = sha256
        self.defaults = defaults
        self.steps = steps
    }

    /// Every service a step reads, writes or subscribes to, in first-use order (what a targeted
    /// `discover` looks for).
    public var usedServices: [BluetoothUUID] {
        var seen = Set<BluetoothUUID>()
        var out: [BluetoothUUID] = []
        for step in steps {
            for target in step.targets where seen.insert(target.service).inserted { out.append(target.service) }
        }
        return out
    }

    /// The irreversible steps that declare a `confirm` read (an `await` with a trigger), by index: the
    /// steps a device in doubt can be asked about again (`--recheck`).
    public var confirmableSteps: [Int] {
        steps.indices.filter { i in
            guard steps[i].irreversible, case .await(let a) = steps[i].kind else { return false }
            return a.confirm != nil && a.trigger != nil
        }
    }

    /// The confirmable step named `name` (the first, as a journal names steps by name).
    public func confirmableStep(named name: String) -> Int? {
        confirmableSteps.first { steps[$0].name == name }
    }

    /// Names captured by steps (`read`, `await … capture:`, `set:`), in order.
    public var capturedNames: [String] { steps.compactMap(\.capturedName) }

    /// The captured values that are checksums (`set: { crc: … }`), by name, with their width in bits:
    /// reports show them in hex (what the report's `run.checksums` says).
    public var checksumWidths: [String: Int] {
        var out: [String: Int] = [:]
        for step in steps {
            if case .derive(let d) = step.kind, case .crc(let algorithm) = d.derivation { out[d.id] = algorithm.width }
        }
        return out
    }

    /// The type of every captured value, by name (what the report's `run.capture_types` shows).
    public var captureTypes: [String: ValueType] {
        var out: [String: ValueType] = [:]
        for step in steps {
            switch step.kind {
            case .read(let r): if let id = r.id { out[id] = r.format.valueType }
            case .await(let a): if let c = a.capture { out[c.id] = c.format.valueType }
            case .derive(let d): out[d.id] = d.resultType
            case .mcumgr(let m): if let id = m.capture { out[id] = m.captureType }
            case .dfu(let d): for (name, type) in Step.DFU.figures(imageNumber: d.imageNumber) { out[name] = type }
            case .wifiProvision: for (name, type) in Step.WiFiProvision.figures { out[name] = type }
            case .wifiScan(let w): if let c = w.capture { out[c] = .text }
            case .espCustom(let c): if let id = c.capture { out[id] = c.format.valueType }
            default: break
            }
        }
        return out
    }

    /// The declared secret variables, and the variables a step takes as a secret wherever they come
    /// from (a `wifi_provision`'s passphrase and proof of possession).
    public var secretVariables: Set<String> {
        var out = Set(variables.filter { $0.value.secret }.keys)
        for step in steps {
            if case .wifiProvision(let w) = step.kind { for t in w.secretTemplates { out.formUnion(t.referencedNames) } }
            for p in [step.protocommSession?.pop].compactMap({ $0 }) { out.formUnion(p.referencedNames) }
        }
        return out.subtracting(Template.builtins)
    }

    /// Names the workflow needs from the inventory (every reference that is not a built-in or a capture).
    public var inventoryVariables: Set<String> {
        let captured = Set(capturedNames)
        var names = Set<String>()
        for step in steps {
            for t in step.templates {
                for name in t.referencedNames where !captured.contains(name) && !Template.builtins.contains(name) {
                    names.insert(name)
                }
            }
            for name in step.conditionNames where !captured.contains(name) && !Template.builtins.contains(name) {
                names.insert(name)
            }
        }
        return names.union(variables.keys)
    }
}
