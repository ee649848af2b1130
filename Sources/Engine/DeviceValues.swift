import Workflow

/// What is known of one device as its workflow runs: the values its steps captured, the workflow's
/// declared variables read from its inventory text, its inventory variables, the measurements its
/// `verify` steps made, and the secrets every message about it must hide. A value: the machine keeps it,
/// step executors read it through their `StepContext` and report what they learn.
struct DeviceValues: Sendable {
    let device: InventoryDevice
    /// Values captured by earlier steps, with their types.
    private(set) var captured: [String: TypedValue] = [:]
    /// The workflow's declared variables (`vars:`), read from the device's inventory text as their type.
    private let declared: [String: TypedValue]
    /// The device's secrets (`SecretScope`, the one home of what is hidden): the names that are secret
    /// (the inventory's, the workflow's, and captures derived from them) and their values in every
    /// rendering; it learns the bytes the device is sent from values that use a secret.
    private(set) var secrets: SecretScope
    /// Every name whose value is secret.
    var secretNames: Set<String> { secrets.names }
    /// Hides this device's secrets in every record, event and message it makes.
    var redactor: Redactor { secrets.redactor }
    /// Every `verify` run so far, in the order they ran (a step run again replaces its record).
    private(set) var measurements: [MeasurementRecord] = []

    init(device: InventoryDevice, variables: [String: VariableDeclaration], redactor: Redactor, secretNames: Set<String>) {
        self.device = device
        secrets = SecretScope(names: secretNames, redactor: redactor)
        var declared: [String: TypedValue] = [:]
        for (name, declaration) in variables {
            // Validation checked every selected device's values; a value that does not read is absent.
            if let text = device.value(of: name), let v = try? declaration.value(fromText: text, name: name) { declared[name] = v }
        }
        self.declared = declared
    }

    /// A name's typed value: a capture, a declared variable, else the inventory's text.
    func typed(_ name: String) -> TypedValue? {
        if let v = captured[name] ?? declared[name] { return v }
        return device.value(of: name).map { .text($0) }
    }

    /// A template reference's text: a captured value or declared variable as it is shown
    /// (`TypedValue.description`: numbers in decimal, bytes in hex), else the device's variable.
    func text(_ name: String) -> String? { typed(name)?.description }

    /// Keeps a captured value; a value derived from a secret is a secret too, in every message.
    mutating func capture(_ id: String, _ value: TypedValue) {
        captured[id] = value
        secrets.captured(id, value)
    }

    /// The bytes sent from a value made with a secret: secret too, in whatever form a message shows them.
    mutating func learnSecret(bytes: [UInt8]) {
        secrets.learn(bytes: bytes)
    }

    /// A `verify`'s measurement (replacing an earlier attempt's of the same step).
    mutating func record(_ m: MeasurementRecord) {
        measurements.removeAll { $0.step == m.step }
        measurements.append(m)
    }

    /// The failure with this device's secrets hidden.
    func redacted(_ f: DeviceFailure) -> DeviceFailure {
        guard !redactor.isEmpty else { return f }
        return DeviceFailure(f.kind, redactor.redact(f.message), causes: f.causes.map { redactor.redact($0) })
    }

    /// The captured values as the report keeps them: the JSON of each type, and `***` for a value
    /// that is secret or shows a secret.
    func capturedForReport() -> [String: JSONScalar] {
        var out: [String: JSONScalar] = [:]
        for (k, v) in captured { out[k] = secrets.shown(v, name: k) }
        return out
    }

    /// Nil when a step's `when:` holds; else why the step is skipped, or why the condition cannot be
    /// evaluated (a failure of the step).
    func skipReason(_ condition: Step.Condition) -> Result<String, DeviceFailure>? {
        let expression = condition.expression
        let result: Bool?
        do {
            result = try expression.evaluate { typed($0) }
        } catch {
            return .failure(DeviceFailure(.invalidInput, "`when: \(expression.source)`: column \(error.column): \(error.message)"))
        }
        if result == true { return nil }
        let names = expression.names.sorted()
        let missing = names.filter { typed($0) == nil }
        var reason = "`when: \(expression.source)` is \(result == false ? "false" : "unknown")"
        if result == nil, !missing.isEmpty {
            reason += ": " + missing.map { "`\($0)` has no value" }.joined(separator: ", ")
        } else {
            let shown = names.filter { !secretNames.contains($0) }.compactMap { n in typed(n).map { "\(n) \($0.quotedForMessage)" } }
            if !shown.isEmpty { reason += " (" + shown.joined(separator: ", ") + ")" }
        }
        return .success(redactor.redact(reason))
    }
}
