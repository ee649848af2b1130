import BLE
import Digests
import Support
import YAML

/// Turns a workflow file into a `Workflow`, collecting every problem as a `Diagnostic`.
///
/// Checks here need only the workflow itself: structure, types, keys, UUIDs, durations, value
/// encodings, that captures and subscriptions are defined before use, and that steps needing a
/// connection come after `connect`. References to inventory variables are checked by `Validator`.
public struct WorkflowParser: Sendable {
    public init() {}

    /// Parses workflow text. `path` is used in diagnostics and stored in the model.
    public func parse(bytes: [UInt8], path: String) -> (workflow: Workflow?, diagnostics: [Diagnostic]) {
        let result = parsePartial(bytes: bytes, path: path)
        return (result.diagnostics.contains { $0.severity == .error } ? nil : result.partial, result.diagnostics)
    }

    /// Like `parse`, but also returns what could be read of an invalid workflow (the steps that parsed),
    /// so that the inventory cross-checks still run and report their problems in the same pass.
    public func parsePartial(bytes: [UInt8], path: String) -> (partial: Workflow?, diagnostics: [Diagnostic]) {
        let r = parseWithCaptures(bytes: bytes, path: path)
        return (r.partial, r.diagnostics)
    }

    /// `parsePartial`, plus every capture id declared (also by steps that failed to parse), so that
    /// cross-checks do not repeat an error as "unknown variable".
    func parseWithCaptures(bytes: [UInt8], path: String) -> (partial: Workflow?, diagnostics: [Diagnostic], captures: Set<String>) {
        var reader = NodeReader(path: path)
        guard case .parsed(let root) = reader.document(bytes) else { return (nil, reader.sink.diagnostics, []) }
        guard let root else {
            reader.error("the workflow is empty", at: SourceMark(line: 1, column: 1),
                         hint: "a workflow needs at least `name:` and `steps:`")
            return (nil, reader.sink.diagnostics, [])
        }
        var state = ParserState(reader: reader)
        let workflow = state.workflow(root, path: path, sha256: SHA256.hexDigest(bytes))
        let diagnostics = state.reader.sink.diagnostics.sorted { $0.mark < $1.mark }
        return (workflow, diagnostics, state.allCaptureIDs.union(state.captures.keys))
    }

    static let topKeys = ["name", "description", "defaults", "vars", "steps"]
    /// The security options `connect` and `pair` share (`connect` adds `upgrade`).
    static let securityKeys = ["security", "passkey", "oob", "legacy", "bond", "on_bond_lost"]
    /// The keys of `connect` that say what the link should get from the radio.
    static let linkKeys = ["interval", "latency", "supervision_timeout", "phy", "data_length"]
    static let commonKeys = ["name", "timeout", "retry", "retry_from", "when", "optional", "continue_on_error"]
    static let optionKeys: [String: [String]] = [
        "scan": ["address", "name", "services", "manufacturer", "min_rssi"],
        "connect": ["mtu", "reconnect"] + securityKeys + ["upgrade"] + linkKeys,
        "pair": securityKeys,
        "discover": ["all", "services"],
        "read": ["service", "characteristic", "id", "as"],
        "verify": ["value", "min", "max", "equals", "in", "one_of", "matches", "version_at_least", "version_below", "unit"],
        "write": ["service", "characteristic", "value", "with_response", "irreversible", "idempotent"],
        "write_blob": ["service", "characteristic", "value", "file", "allow_empty", "chunk_size"],
        "subscribe": ["id", "service", "characteristic", "mode", "allow_undeclared"],
        "unsubscribe": ["id"],
        "await": ["subscription", "notification", "indication", "equals", "matches", "busy", "fails_on", "trigger", "resend", "confirm",
                  "capture"],
        "sleep": ["duration"],
        "disconnect": [],
        "set": ["id", "crc", "of", "slice", "start", "length", "concat"],
        // The MCUmgr family (WorkflowParser+McuMgr.swift).
        "dfu": ["image", "confirm", "upgrade_only", "reboot_timeout", "version", "image_number", "window"],
        "file_upload": ["file", "value", "to", "allow_empty", "verify"],
        "settings": ["write", "save"],
        "mcumgr": ["command", "capture", "image", "text", "slot"],
    ].merging(ParserState.espOptionKeys) { a, _ in a }
}

/// Parsing state for one workflow: the reader and what earlier steps defined.
struct ParserState {
    var reader: NodeReader
    /// Capture name → step number for captures (`read`, `await … capture:`, `set:`) seen so far.
    var captures: [String: Int] = [:]
    /// Capture name → type, for captures seen so far.
    var captureTypes: [String: ValueType] = [:]
    /// Capture name → the format it was read as (`read … as:`, `capture … as:`, a CRC's width), for hints.
    var captureFormats: [String: ValueFormat] = [:]
    /// Captures of steps that failed to parse: known names of unknown type (see `NameType.unknown`).
    var failedCaptures: Set<String> = []
    /// Every capture id the workflow's steps declare, also by steps that failed to parse.
    var allCaptureIDs: Set<String> = []
    /// `vars:`: declared variables and where each is written.
    var declared: [String: VariableDeclaration] = [:]
    var declaredMarks: [String: SourceMark] = [:]
    /// Declared secret variables and captures derived from them.
    var secretNames: Set<String> = []
    /// Subscription id → step number for `subscribe` seen so far.
    var subscriptions: [String: Int] = [:]
    var connected = false
    /// `retry_from` names by step number, resolved once every step is known.
    var pendingRetryFrom: [Int: (name: String, mark: SourceMark)] = [:]

    init(reader: NodeReader) {
        self.reader = reader
    }

    mutating func workflow(_ root: YAMLNode, path: String, sha256: String) -> Workflow? {
        guard let pairs = reader.mapping(root, "a workflow") else { return nil }
        reader.checkKeys(pairs, allowed: WorkflowParser.topKeys, in: "the workflow")
        var name = ""
        if let n = root["name"] {
            name = reader.string(n, "`name`") ?? ""
            if name.trimmingSpaces.isEmpty, n.scalar != nil, !n.isNull {
                reader.error("`name` is empty", at: n.mark, hint: "reports identify the workflow by its name")
            }
            reader.refuseControlCharacters(name, "the workflow's `name`", at: n.mark)
        } else if !reader.hasTypo(of: "name", in: root) {
            reader.error("the workflow needs a `name`", at: root.mark, hint: "add `name: my-workflow` at the top")
        }
        let description = root["description"].flatMap { reader.string($0, "`description`") }
        if let v = root["vars"] { variables(v) }
        var defaults = Workflow.Defaults()
        if let d = root["defaults"], let dp = reader.mapping(d, "`defaults`") {
            reader.checkKeys(dp, allowed: ["timeout", "retry", "reconnect"], in: "`defaults`")
            if let t = d["timeout"], let v = reader.duration(t, "`timeout`") { defaults.timeout = v }
            if let r = d["retry"], let v = reader.retry(r) { defaults.retry = v }
            if let r = d["reconnect"], let v = reader.reconnect(r) { defaults.reconnect = v }
        }
        // First pass: collect every capture id, so a reference to a later capture gets a precise message.
        var laterCaptures: [String: Int] = [:]
        var steps: [Step] = []
        if let s = root["steps"] {
            if let items = reader.sequence(s, "`steps`") {
                if items.isEmpty { reader.error("`steps` is empty", at: s.mark, hint: "a workflow needs at least one step") }
                for (i, item) in items.enumerated() {
                    if let id = Self.captureID(of: item), laterCaptures[id] == nil { laterCaptures[id] = i + 1 }
                }
                allCaptureIDs = Set(laterCaptures.keys)
                var numbers: [Int] = []
                for (i, item) in items.enumerated() {
                    if let step = step(item, number: i + 1, defaults: defaults, laterCaptures: laterCaptures) {
                        steps.append(step)
                        numbers.append(i + 1)
                    }
                    // A step that should have captured and did not: later uses of its id are not errors
                    // of their own (no "captured by a later step", no "unknown variable").
                    if let id = Self.captureID(of: item), laterCaptures[id] == i + 1, captures[id] == nil { failedCaptures.insert(id) }
                }
                // `retry_from` names an earlier step: a retry of this step restarts there.
                for (index, number) in numbers.enumerated() {
                    guard let (name, mark) = pendingRetryFrom[number] else { continue }
                    if let target = steps[..<index].lastIndex(where: { $0.name == name }) {
                        if let sent = steps[target...index].first(where: { $0.irreversible }) {
                            // A restart there would run the irreversible write (and what prepares it) again.
                            reader.error("`retry_from: \(name)` would repeat the irreversible step `\(sent.name)`", at: mark,
                                         hint: "restart at a step after `\(sent.name)`")
                        } else {
                            steps[index].retryFromIndex = target
                        }
                    } else {
                        let earlier = steps[..<index].map(\.name)
                        let later = steps[index...].contains { $0.name == name }
                        reader.error(later ? "`retry_from` must name an earlier step; `\(name)` is this step or a later one"
                                           : "`retry_from` names no step called `\(name)`", at: mark,
                                     hint: Suggestions.hint(for: name, in: earlier) ?? "name the step to restart from with `name:`")
                    }
                }
            }
        } else if !reader.hasTypo(of: "steps", in: root) {
            reader.error("the workflow needs `steps`", at: root.mark, hint: "add `steps:` with a list of steps")
        }
        resolveESPSessions(&steps)
        var workflow = Workflow(name: name, description: description, path: path, sha256: sha256, defaults: defaults, steps: steps)
        workflow.variables = declared
        workflow.variableMarks = declaredMarks
        workflow.secretNames = secretNames
        return workflow
    }

    // MARK: - Steps

    mutating func step(_ node: YAMLNode, number: Int, defaults: Workflow.Defaults, laterCaptures: [String: Int]) -> Step? {
        // `- disconnect` / `- discover` / `- connect` / `- scan` as a bare word.
        if let word = node.scalar, !node.isNull {
            guard Step.Kind.keywords.contains(word) else {
                reader.error("unknown step `\(word)`", at: node.mark,
                             hint: Suggestions.hint(for: word, in: Step.Kind.keywords) ?? "steps: \(Step.Kind.keywords.joined(separator: ", "))")
                return nil
            }
            let empty = YAMLNode(.mapping([]), mark: node.mark)
            return buildStep(kind: word, options: empty, outer: nil, number: number, mark: node.mark, defaults: defaults, laterCaptures: laterCaptures)
        }
        guard let pairs = reader.mapping(node, "a step") else { return nil }
        let kinds = pairs.filter { Step.Kind.keywords.contains($0.key.scalar ?? "") }
        var ok = true
        for pair in pairs {
            guard let key = pair.key.scalar, !Step.Kind.keywords.contains(key), !WorkflowParser.commonKeys.contains(key) else { continue }
            ok = false
            if kinds.isEmpty, let guess = Suggestions.closest(to: key, in: Step.Kind.keywords) {
                reader.error("unknown step `\(key)`", at: pair.key.mark, hint: "did you mean `\(guess)`?")
            } else if kinds.isEmpty {
                reader.error("unknown step `\(key)`", at: pair.key.mark,
                             hint: Suggestions.hint(for: key, in: WorkflowParser.commonKeys) ?? "steps: \(Step.Kind.keywords.joined(separator: ", "))")
            } else {
                let kind = kinds[0].key.scalar ?? ""
                let allowed = WorkflowParser.commonKeys + (WorkflowParser.optionKeys[kind] ?? [])
                let hint = Suggestions.hint(for: key, in: allowed).map { "\($0) (options of `\(kind)` go inside its mapping)" }
                reader.error("unknown key `\(key)` in a `\(kind)` step", at: pair.key.mark,
                             hint: hint ?? "a step is one kind (like `\(kind):`) plus optional `name`, `timeout`, `retry`")
            }
        }
        guard let first = kinds.first, let kindName = first.key.scalar else {
            if ok { reader.error("a step needs a kind (\(Step.Kind.keywords.joined(separator: ", ")))", at: node.mark) }
            return nil
        }
        if kinds.count > 1 {
            reader.error("a step does one thing: found both `\(kindName)` and `\(kinds[1].key.scalar ?? "")`", at: kinds[1].key.mark,
                         hint: "split them into two steps (each starting with `- `)")
            return nil
        }
        guard ok else { return nil }
        return buildStep(kind: kindName, options: first.value, outer: node, number: number, mark: node.mark, defaults: defaults, laterCaptures: laterCaptures)
    }

    mutating func buildStep(
        kind kindName: String, options rawOptions: YAMLNode, outer: YAMLNode?, number: Int, mark: SourceMark,
        defaults: Workflow.Defaults, laterCaptures: [String: Int]
    ) -> Step? {
        var options = rawOptions
        // `sleep: 500ms` and `disconnect:` / `disconnect: {}` shorthands.
        if kindName == "sleep", rawOptions.scalar != nil, !rawOptions.isNull {
            options = YAMLNode(.mapping([YAMLNode.Pair(key: YAMLNode(.scalar("duration", .plain), mark: rawOptions.mark), value: rawOptions)]), mark: rawOptions.mark)
        } else if rawOptions.isNull {
            options = YAMLNode(.mapping([]), mark: rawOptions.mark)
        }
        guard let pairs = reader.mapping(options, "the options of `\(kindName)`") else { return nil }
        let specific = WorkflowParser.optionKeys[kindName] ?? []
        var allowed = specific + ["timeout", "retry", "retry_from", "when", "optional", "continue_on_error"]
        if kindName != "scan" { allowed.append("name") }
        reader.checkKeys(pairs, allowed: allowed, in: "`\(kindName)`")

        // Common options, outside (beside the kind) or inside its mapping; not both.
        func common(_ key: String) -> YAMLNode? {
            let inner = key == "name" && kindName == "scan" ? nil : options[key]
            let outerValue = outer?[key]
            if let inner, outerValue != nil {
                reader.error("`\(key)` is given twice for this step", at: inner.mark, hint: "keep one of them")
            }
            return outerValue ?? inner
        }
        var explicitName: String?
        if let n = common("name") {
            explicitName = reader.string(n, "the step `name`")
            if let name = explicitName { reader.refuseControlCharacters(name, "the step `name`", at: n.mark) }
        }
        var timeout: Duration?
        if let t = common("timeout") { timeout = reader.duration(t, "`timeout`") }
        var retry: RetryPolicy?
        if let r = common("retry") { retry = reader.retry(r) }
        var retryFrom: (name: String, mark: SourceMark)?
        if let r = common("retry_from"), let name = reader.string(r, "`retry_from`") { retryFrom = (name, r.mark) }
        // `when:` sees only what earlier steps captured: read it before this step adds its own capture.
        var stepCondition: Step.Condition?
        if let w = common("when") { stepCondition = condition(w, laterCaptures: laterCaptures) }
        let optionalNode = common("optional")
        let continueNode = common("continue_on_error")

        let kind: Step.Kind?
        var derivedName = kindName
        switch kindName {
        case "scan":
            kind = scan(options, laterCaptures: laterCaptures)
        case "connect":
            kind = connect(options, defaults: defaults)
            connected = true
        case "pair":
            needsConnection(kindName, mark)
            kind = security(options, step: "pair").map { s in
                derivedName = "pair \(s.level.rawValue)"
                return .pair(Step.Pair(security: s))
            }
        case "discover":
            needsConnection(kindName, mark)
            var d = Step.Discover()
            if let a = options["all"], let v = reader.bool(a, "`all`") { d.all = v }
            if let s = options["services"], let v = reader.uuidList(s, "`services`") { d.services = v }
            kind = .discover(d)
        case "read":
            needsConnection(kindName, mark)
            let target = characteristic(options, kindName)
            var id: String?
            if let n = options["id"], let v = reader.identifier(n, "capture id") {
                if Template.builtins.contains(v) {
                    reader.error("`\(v)` is a built-in name and cannot be a capture id", at: n.mark, hint: "choose another id, like `\(v)_read`")
                } else if let earlier = captures[v] {
                    reader.error("`\(v)` is already captured by step \(earlier)", at: n.mark, hint: "give each `read` its own id")
                } else if declared[v] != nil {
                    reader.error("`\(v)` is declared in `vars:`; a capture needs a name of its own", at: n.mark,
                                 hint: "choose another id, like `\(v)_read`")
                } else {
                    id = v
                }
            }
            var format = ValueFormat.hex
            if let a = options["as"], let f = valueFormat(a) { format = f }
            if let id {
                captures[id] = number
                captureTypes[id] = format.valueType
                captureFormats[id] = format
            }
            if let target {
                derivedName = "read \(id ?? target.characteristic.description)"
                kind = .read(Step.Read(target: target, id: id, format: format))
            } else {
                kind = nil
            }
        case "verify":
            let v = verify(options, explicitName: explicitName, laterCaptures: laterCaptures)
            if let v { derivedName = "verify \(v.value.source)" }
            kind = v.map { .verify($0) }
        case "write":
            needsConnection(kindName, mark)
            let w = write(options, context: "`write`", laterCaptures: laterCaptures)
            if let w { derivedName = "write \(w.target.characteristic)" }
            kind = w.map { .write($0) }
        case "write_blob":
            needsConnection(kindName, mark)
            let target = characteristic(options, kindName)
            let value = fileOrValue(options, step: kindName, laterCaptures: laterCaptures)
            var chunk: Int?
            if let c = options["chunk_size"] { chunk = reader.integer(c, "`chunk_size`", in: 1...512) }
            if let target, let value {
                derivedName = "write_blob \(target.characteristic)"
                kind = .writeBlob(Step.WriteBlob(target: target, value: value, chunkSize: chunk))
            } else {
                kind = nil
            }
        case "subscribe":
            needsConnection(kindName, mark)
            let target = characteristic(options, kindName)
            var id: String?
            if let n = options["id"] {
                if let v = reader.identifier(n, "subscription id") {
                    if let earlier = subscriptions[v] {
                        reader.error("subscription `\(v)` is already defined by step \(earlier)", at: n.mark, hint: "give each subscription its own id")
                    } else {
                        id = v
                    }
                }
            } else {
                reader.error("`subscribe` needs `id`", at: options.mark, hint: "name it, for example `id: acks`, so `await` can refer to it")
            }
            var mode = Step.SubscriptionMode.notify
            if let m = options["mode"], let text = reader.string(m, "`mode`") {
                if let v = Step.SubscriptionMode(rawValue: text) { mode = v } else {
                    reader.error("`mode` must be `notify` or `indicate`, not `\(text)`", at: m.mark,
                                 hint: Suggestions.hint(for: text, in: ["notify", "indicate"]))
                }
            }
            var allow = false
            if let a = options["allow_undeclared"], let v = reader.bool(a, "`allow_undeclared`") { allow = v }
            if let id { subscriptions[id] = number }
            if let id, let target {
                derivedName = "subscribe \(id)"
                kind = .subscribe(Step.Subscribe(id: id, target: target, mode: mode, allowUndeclared: allow))
            } else {
                kind = nil
            }
        case "unsubscribe":
            needsConnection(kindName, mark)
            if let n = options["id"] {
                if let id = reader.identifier(n, "subscription id"), checkSubscription(id, at: n.mark) {
                    derivedName = "unsubscribe \(id)"
                    kind = .unsubscribe(Step.Unsubscribe(id: id))
                } else {
                    kind = nil
                }
            } else {
                reader.error("`unsubscribe` needs `id`", at: options.mark)
                kind = nil
            }
        case "await":
            needsConnection(kindName, mark)
            kind = awaitStep(options, number: number, laterCaptures: laterCaptures).map {
                derivedName = "await \($0.subscription)"
                return Step.Kind.await($0)
            }
        case "sleep":
            if let d = options["duration"] {
                if let v = reader.duration(d, "`sleep`") {
                    derivedName = "sleep \(DurationText.format(v))"
                    kind = .sleep(Step.Sleep(duration: v))
                } else {
                    kind = nil
                }
            } else {
                reader.error("`sleep` needs a duration", at: options.mark, hint: "write `sleep: 500ms`")
                kind = nil
            }
        case "disconnect":
            connected = false
            kind = .disconnect(Step.Disconnect())
        case "set":
            let d = derive(options, number: number, laterCaptures: laterCaptures)
            if let d { derivedName = "set \(d.id)" }
            kind = d.map { .derive($0) }
        case "dfu", "file_upload", "settings", "mcumgr":
            needsConnection(kindName, mark)
            kind = mcumgrStep(kindName, options, number: number, laterCaptures: laterCaptures, derivedName: &derivedName)
        case "wifi_provision", "wifi_scan", "esp_custom":
            needsConnection(kindName, mark)
            kind = espStep(kindName, options, number: number, laterCaptures: laterCaptures, derivedName: &derivedName)
        default:
            kind = nil
        }
        guard let kind else { return nil }
        let effectiveTimeout = timeout ?? ParserState.espDefaultTimeout(kindName, defaults) ?? ParserState.mcumgrDefaultTimeout(kindName, defaults)
        var step = Step(
            name: explicitName ?? derivedName, hasExplicitName: explicitName != nil, kind: kind, timeout: timeout, retry: retry,
            mark: mark, effectiveTimeout: effectiveTimeout, effectiveRetry: retry ?? defaults.retry)
        if let retryFrom { pendingRetryFrom[number] = retryFrom }
        step.retryFrom = retryFrom?.name
        step.condition = stepCondition
        step.onFailure = onFailure(optional: optionalNode, continueOnError: continueNode, irreversible: step.irreversible)
        return step
    }

    /// The bytes a step sends: `file: "${blob}"` (with `allow_empty`) or any `value:` spec, checked
    /// (`write_blob`, `file_upload`).
    mutating func fileOrValue(_ options: YAMLNode, step: String, laterCaptures: [String: Int]) -> ValueSpec? {
        var value: ValueSpec?
        switch (options["value"], options["file"]) {
        case (let v?, nil):
            let advice = adviser
            value = reader.valueSpec(v, "`value`", advice: advice)
        case (nil, let f?):
            let allowEmpty = options["allow_empty"].flatMap { reader.bool($0, "`allow_empty`") } ?? false
            value = reader.template(f, "`file`").map { .file($0, allowEmpty: allowEmpty) }
        case (_?, let f?): reader.error("`\(step)` takes `value` or `file`, not both", at: f.mark)
        case (nil, nil): reader.error("`\(step)` needs `file` or `value`", at: options.mark, hint: "for example `file: \"${blob}\"`")
        }
        if let a = options["allow_empty"], options["file"] == nil {
            reader.error("`allow_empty` goes with `file`", at: a.mark, hint: "inside a value, write `{ file: \"${blob}\", allow_empty: true }`")
        }
        if let value {
            for t in value.templates { checkReferences(t, laterCaptures: laterCaptures) }
            checkTypes(value)
        }
        return value
    }

    /// An `as:` format name (`uint8`, `version`, …).
    mutating func valueFormat(_ node: YAMLNode) -> ValueFormat? {
        guard let text = reader.string(node, "`as`") else { return nil }
        let (format, hint) = ValueFormat.named(text)
        if format == nil {
            reader.error("unknown decoder `\(text)`", at: node.mark,
                         hint: hint ?? "use one of \(ValueFormat.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return format
    }

    mutating func needsConnection(_ kind: String, _ mark: SourceMark) {
        if !connected {
            reader.error("`\(kind)` needs a connection, but no `connect` step comes before it", at: mark,
                         hint: "add `- connect: {}` before this step")
        }
    }

    mutating func checkSubscription(_ id: String, at mark: SourceMark) -> Bool {
        if subscriptions[id] != nil { return true }
        reader.error("no subscription `\(id)` before this step", at: mark,
                     hint: Suggestions.hint(for: id, in: subscriptions.keys) ?? "add a `subscribe` step with `id: \(id)` before it")
        return false
    }

    /// A step's `capture:` id (`mcumgr`, `wifi_scan`, `esp_custom`): a valid name that is not a built-in,
    /// not captured by an earlier step and not declared in `vars:`; recorded with its type.
    mutating func newCapture(_ node: YAMLNode, number: Int, type: ValueType) -> String? {
        guard let v = reader.identifier(node, "capture id") else { return nil }
        if Template.builtins.contains(v) {
            reader.error("`\(v)` is a built-in name and cannot be a capture id", at: node.mark)
        } else if let earlier = captures[v] {
            reader.error("`\(v)` is already captured by step \(earlier)", at: node.mark)
        } else if declared[v] != nil {
            reader.error("`\(v)` is declared in `vars:`; a capture needs a name of its own", at: node.mark)
        } else {
            captures[v] = number
            captureTypes[v] = type
            return v
        }
        return nil
    }

    /// A reference to a capture must come after the step that captures it.
    mutating func checkReferences(_ template: Template, laterCaptures: [String: Int], except: String? = nil) {
        for (name, mark) in template.references
        where captures[name] == nil && !Template.builtins.contains(name) && !failedCaptures.contains(name) && name != except {
            if let later = laterCaptures[name] {
                reader.error("`${\(name)}` is captured by step \(later), which runs after this one", at: mark,
                             hint: "move this step after step \(later)")
            }
        }
    }

    mutating func characteristic(_ options: YAMLNode, _ kind: String) -> CharacteristicRef? {
        var service: BluetoothUUID?
        var characteristic: BluetoothUUID?
        if let s = options["service"] { service = reader.uuid(s, "`service`") } else if !reader.hasTypo(of: "service", in: options) {
            reader.error("`\(kind)` needs `service`", at: options.mark, hint: "for example `service: 180A`")
        }
        if let c = options["characteristic"] { characteristic = reader.uuid(c, "`characteristic`") } else if !reader.hasTypo(of: "characteristic", in: options) {
            reader.error("`\(kind)` needs `characteristic`", at: options.mark, hint: "for example `characteristic: 2A26`")
        }
        guard let service, let characteristic else { return nil }
        return CharacteristicRef(service: service, characteristic: characteristic)
    }

    mutating func scan(_ options: YAMLNode, laterCaptures: [String: Int]) -> Step.Kind? {
        var s = Step.Scan()
        var ok = true
        if let a = options["address"] {
            if let t = reader.template(a, "`address`") {
                if t.isLiteral, BluetoothAddress(t.source) == nil {
                    reader.error("`\(t.source)` is not a Bluetooth address", at: a.mark, hint: "write six hex pairs: `C0:5E:00:00:00:01`")
                    ok = false
                }
                s.address = t
            } else { ok = false }
        }
        if let n = options["name"] { if let t = reader.template(n, "`name`") { s.name = t } else { ok = false } }
        if let v = options["services"] { if let u = reader.uuidList(v, "`services`") { s.services = u } else { ok = false } }
        if let r = options["min_rssi"] { if let v = reader.integer(r, "`min_rssi`", in: -127...20) { s.minRSSI = v } else { ok = false } }
        if let m = options["manufacturer"] {
            if let pairs = reader.mapping(m, "`manufacturer`") {
                reader.checkKeys(pairs, allowed: ["company", "data"], in: "`manufacturer`")
                let company = m["company"].flatMap { reader.integer($0, "`company`", in: 0...0xFFFF) }
                if m["company"] == nil { reader.error("`manufacturer` needs `company`", at: m.mark, hint: "the company identifier, like `0x004C`") }
                var prefix: [UInt8] = []
                if let d = m["data"], let text = reader.string(d, "`data`") {
                    if let b = [UInt8](hex: text) { prefix = b } else {
                        reader.error("`\(text)` is not valid hex", at: d.mark)
                        ok = false
                    }
                }
                if let company { s.manufacturer = Step.ManufacturerFilter(company: UInt16(company), prefix: prefix) } else { ok = false }
            } else { ok = false }
        }
        for t in [s.address, s.name].compactMap({ $0 }) { checkReferences(t, laterCaptures: laterCaptures) }
        return ok ? .scan(s) : nil
    }

    mutating func connect(_ options: YAMLNode, defaults: Workflow.Defaults) -> Step.Kind? {
        var c = Step.Connect(reconnect: defaults.reconnect)
        var ok = true
        if let m = options["mtu"] { if let v = reader.integer(m, "`mtu`", in: 23...517) { c.mtu = v } else { ok = false } }
        if let r = options["reconnect"] { if let v = reader.reconnect(r) { c.reconnect = v } else { ok = false } }
        if let s = security(options, step: "connect") { c.security = s } else { ok = false }
        if let l = linkPreferences(options) { c.link = l.isEmpty ? nil : l } else { ok = false }
        return ok ? .connect(c) : nil
    }

    /// `connect: { interval: 7.5ms..15ms, latency: 0, supervision_timeout: 4s, phy: 2M, data_length: 251 }`
    /// (Core v5.4 Vol 6 Part B 4.5.1, 4.5.10): nil after an error (reported), empty when none is given.
    mutating func linkPreferences(_ options: YAMLNode) -> LinkPreferences? {
        var l = LinkPreferences()
        var ok = true
        if let n = options["interval"], let text = reader.string(n, "`interval`") {
            let bounds = text.split(separator: "..", omittingEmptySubsequences: false).map { String($0).trimmingSpaces }
            var parsed: [Duration] = []
            if bounds.count <= 2 {
                for b in bounds {
                    guard case .success(let d) = DurationText.parse(b) else { break }
                    parsed.append(d)
                }
            }
            if parsed.count != bounds.count || parsed.isEmpty {
                reader.error("`interval` is `MIN..MAX` or one duration, like `7.5ms..15ms`, not `\(text)`", at: n.mark,
                             hint: "durations with units; the connection interval runs from 7.5ms to 4s in steps of 1.25ms")
                ok = false
            } else if let lo = parsed.first, let hi = parsed.last {
                if lo > hi {
                    reader.error("`interval` \(text): the minimum is above the maximum", at: n.mark)
                    ok = false
                } else if !LinkPreferences.intervalRange.contains(lo) || !LinkPreferences.intervalRange.contains(hi) {
                    reader.error("`interval` \(text) is outside 7.5ms..4s", at: n.mark,
                                 hint: "the connection interval runs from 7.5ms to 4s (Core Vol 6 Part B 4.5.1)")
                    ok = false
                } else {
                    l.interval = lo...hi
                }
            }
        }
        if let n = options["latency"] {
            if let v = reader.integer(n, "`latency`", in: LinkPreferences.latencyRange) { l.latency = v } else { ok = false }
        }
        if let n = options["supervision_timeout"] {
            if let d = reader.duration(n, "`supervision_timeout`", max: .seconds(32)) {
                if d < .milliseconds(100) {
                    reader.error("`supervision_timeout` must be at least 100ms", at: n.mark)
                    ok = false
                } else {
                    l.supervisionTimeout = d
                }
            } else { ok = false }
        }
        if let n = options["phy"], let text = reader.string(n, "`phy`") {
            let names = LinkPHY.allCases.map(\.rawValue)
            if let phy = LinkPHY.allCases.first(where: { $0.rawValue.lowercased() == text.lowercased() }) {
                l.phy = phy
            } else {
                reader.error("`phy` is \(names.map { "`\($0)`" }.joined(separator: ", ")), not `\(text)`", at: n.mark,
                             hint: Suggestions.hint(for: text, in: names))
                ok = false
            }
        }
        if let n = options["data_length"] {
            if let v = reader.integer(n, "`data_length`", in: LinkPreferences.dataLengthRange) { l.dataLength = v } else { ok = false }
        }
        return ok ? l : nil
    }

    /// The security options of `connect` or `pair` (docs/workflow.md, "Security"). Passkeys and OOB data
    /// come from the inventory as secrets: written out in the workflow they are refused (Validator checks
    /// that the variables are declared secret and hold six digits / 16 bytes for every device).
    mutating func security(_ options: YAMLNode, step: String) -> Step.Security? {
        var s = Step.Security(level: step == "pair" ? .encrypted : .none)
        var ok = true
        var levelMark = options.mark
        if let n = options["security"], let text = reader.string(n, "`security`") {
            levelMark = n.mark
            let allowed = step == "pair" ? ["encrypted", "authenticated"] : Step.Security.Level.allCases.map(\.rawValue)
            if let level = Step.Security.Level(rawValue: text), allowed.contains(text) {
                s.level = level
            } else {
                reader.error("`security` is \(allowed.map { "`\($0)`" }.joined(separator: ", ")) on `\(step)`, not `\(text)`", at: n.mark,
                             hint: Suggestions.hint(for: text, in: allowed)
                                ?? (step == "pair" ? "a `pair` step secures the link; to secure only when the device asks, use `security: auto` on `connect`" : nil))
                ok = false
            }
        }
        func secret(_ node: YAMLNode, _ what: String) -> Template? {
            guard let t = reader.template(node, what) else { ok = false; return nil }
            if t.isLiteral {
                reader.error("\(what) is written out in the workflow, where it is no secret", at: node.mark,
                             hint: "give each device its value in the inventory, list the variable in `secrets:`, and write `\"${name}\"` here")
                ok = false
                return nil
            }
            return t
        }
        if let p = options["passkey"] {
            s.passkey = secret(p, "the passkey")
            s.passkeyMark = p.mark
        }
        if let o = options["oob"] {
            if let pairs = reader.mapping(o, "`oob`") {
                reader.checkKeys(pairs, allowed: ["confirm", "random"], in: "`oob`")
                let confirm = o["confirm"].flatMap { secret($0, "the OOB `confirm` value") }
                let random = o["random"].flatMap { secret($0, "the OOB `random` value") }
                if o["confirm"] == nil || o["random"] == nil {
                    reader.error("`oob` needs both `confirm` and `random` (the device's C and r, 16 bytes each)", at: o.mark)
                    ok = false
                }
                if let confirm, let random { s.oob = Step.Security.OOB(confirm: confirm, random: random, mark: o.mark) }
            } else { ok = false }
        }
        if let l = options["legacy"] { if let v = reader.bool(l, "`legacy`") { s.legacy = v } else { ok = false } }
        if let b = options["bond"] { if let v = reader.bool(b, "`bond`") { s.bond = v } else { ok = false } }
        if let b = options["on_bond_lost"], let text = reader.string(b, "`on_bond_lost`") {
            if let v = Step.Security.BondLostPolicy(rawValue: text) { s.onBondLost = v } else {
                reader.error("`on_bond_lost` is `fail` or `pair`, not `\(text)`", at: b.mark,
                             hint: Suggestions.hint(for: text, in: Step.Security.BondLostPolicy.allCases.map(\.rawValue))
                                ?? "`fail`: the device fails with `bond_lost`; `pair`: it is paired again")
                ok = false
            }
        }
        var upgradeGiven: YAMLNode?
        if let u = options["upgrade"] {
            upgradeGiven = u
            if let v = reader.bool(u, "`upgrade`") { s.upgrade = v } else { ok = false }
        }
        // What the level allows.
        switch s.level {
        case .none:
            // Never paired: options that only a pairing uses are a mistake, not a no-op.
            for key in Self.pairingKeys where options[key] != nil {
                reader.error("`\(key)` has no use with `security: none`: this step never pairs or encrypts", at: options[key]?.mark ?? options.mark,
                             hint: "secure the link with `security: encrypted` or `authenticated`, or only when the device asks with `security: auto`")
                ok = false
            }
        case .auto:
            s.upgrade = true
            if let u = upgradeGiven, u.scalar == "false" {
                reader.error("`security: auto` secures the link only when the device refuses a request; `upgrade: false` turns that off", at: u.mark,
                             hint: "use `security: none` for a link that is never secured")
                ok = false
            }
        case .authenticated where s.passkey == nil && s.oob == nil && options["passkey"] == nil && options["oob"] == nil:
            reader.error("`security: authenticated` needs the device's `passkey` or its `oob` data", at: levelMark,
                         hint: "without either only Just Works is possible, which is not authenticated: add `passkey: \"${passkey}\"` (an inventory secret)")
            ok = false
        default:
            break
        }
        return ok ? s : nil
    }

    /// The options that only mean something when the step may pair.
    static let pairingKeys = ["passkey", "oob", "legacy", "bond", "on_bond_lost", "upgrade"]

    mutating func write(_ options: YAMLNode, context: String, laterCaptures: [String: Int]) -> Step.Write? {
        let target = characteristic(options, context.replacingBackticks)
        var value: ValueSpec?
        if let v = options["value"] {
            let advice = adviser
            value = reader.valueSpec(v, "`value`", advice: advice)
        } else if !reader.hasTypo(of: "value", in: options) {
            reader.error("\(context) needs `value`", at: options.mark, hint: "for example `value: { hex: \"01\" }`")
        }
        if let value {
            for t in value.templates { checkReferences(t, laterCaptures: laterCaptures) }
            checkTypes(value)
        }
        var withResponse = true
        if let w = options["with_response"], let v = reader.bool(w, "`with_response`") { withResponse = v }
        var irreversible = false
        if let i = options["irreversible"], let v = reader.bool(i, "`irreversible`") { irreversible = v }
        var idempotent = false
        if let i = options["idempotent"], let v = reader.bool(i, "`idempotent`") { idempotent = v }
        guard let target, let value else { return nil }
        return Step.Write(target: target, value: value, withResponse: withResponse, irreversible: irreversible, idempotent: idempotent)
    }

    mutating func awaitStep(_ options: YAMLNode, number: Int, laterCaptures: [String: Int]) -> Step.Await? {
        let refs = ["subscription", "notification", "indication"].filter { options[$0] != nil }
        var subscription: String?
        if refs.count > 1, let second = options[refs[1]] {
            reader.error("`await` names its subscription once; found `\(refs[0])` and `\(refs[1])`", at: second.mark)
        } else if let key = refs.first, let n = options[key] {
            if let id = reader.identifier(n, "subscription id"), checkSubscription(id, at: n.mark) { subscription = id }
        } else {
            reader.error("`await` needs `subscription` (the `id` of a `subscribe` step)", at: options.mark,
                         hint: "for example `subscription: acks`")
        }
        var matcher: MatcherSpec?
        switch (options["equals"], options["matches"]) {
        case (let e?, nil):
            let advice = adviser
            matcher = reader.valueSpec(e, "`equals`", advice: advice).map { .equalsValue($0) }
            if let matcher { for t in matcher.templates { checkReferences(t, laterCaptures: laterCaptures) } }
            if case .equalsValue(let spec)? = matcher { checkTypes(spec) }
        case (nil, let m?):
            matcher = awaitPattern(m, "matches")
        case (_?, let m?):
            reader.error("`await` takes `equals` or `matches`, not both", at: m.mark)
        case (nil, nil):
            reader.error("`await` needs `equals` or `matches`", at: options.mark, hint: "for example `equals: { hex: \"0100\" }`")
        }
        var trigger: Step.Write?
        var ok = true
        if let t = options["trigger"] {
            if let pairs = reader.mapping(t, "`trigger`") {
                reader.checkKeys(pairs, allowed: ["service", "characteristic", "value", "with_response", "irreversible", "idempotent"], in: "`trigger`")
                trigger = write(t, context: "`trigger`", laterCaptures: laterCaptures)
                if trigger == nil { ok = false }
            } else { ok = false }
        }
        var resend: [Duration] = []
        if let r = options["resend"] {
            if trigger == nil && options["trigger"] == nil {
                reader.error("`resend` needs a `trigger` to re-send", at: r.mark, hint: "add `trigger:` with the write that causes the notification")
                ok = false
            }
            if let items = reader.sequence(r, "`resend`") {
                if items.count > 10 { reader.error("`resend` allows at most 10 re-sends, found \(items.count)", at: r.mark); ok = false }
                for item in items {
                    if let d = reader.duration(item, "a resend wait", max: .seconds(600)) { resend.append(d) } else { ok = false }
                }
            } else { ok = false }
            // A lost answer does not say whether the device executed the command: re-sending an
            // irreversible one is safe only when sending it twice is harmless.
            if let trigger, trigger.irreversible, !trigger.idempotent, !resend.isEmpty {
                reader.error("`resend` would send the irreversible trigger again after a lost answer, and it is not declared `idempotent`",
                             at: r.mark,
                             hint: "if the device treats a repeated command like one (the reference device's commit), add `idempotent: true` to the trigger; otherwise remove `resend` and add `confirm:` to read whether it took effect")
                ok = false
            }
        }
        var busy: MatcherSpec?
        if let b = options["busy"] {
            busy = awaitPattern(b, "busy")
            if busy == nil { ok = false }
        }
        var failsOn: MatcherSpec?
        if let f = options["fails_on"] {
            failsOn = awaitPattern(f, "fails_on")
            if failsOn == nil { ok = false }
        }
        var confirm: Step.Confirm?
        if let c = options["confirm"] {
            if trigger == nil && options["trigger"] == nil {
                reader.error("`confirm` checks whether a `trigger` took effect, but this `await` has none", at: c.mark,
                             hint: "add `trigger:`, or remove `confirm`")
                ok = false
            } else if let pairs = reader.mapping(c, "`confirm`") {
                reader.checkKeys(pairs, allowed: ["service", "characteristic", "equals", "matches"], in: "`confirm`")
                let target = characteristic(c, "confirm")
                var confirmMatcher: MatcherSpec?
                switch (c["equals"], c["matches"]) {
                case (let e?, nil):
                    let advice = adviser
                    confirmMatcher = reader.valueSpec(e, "`equals`", advice: advice).map { .equalsValue($0) }
                    if let confirmMatcher { for t in confirmMatcher.templates { checkReferences(t, laterCaptures: laterCaptures) } }
                    if case .equalsValue(let spec)? = confirmMatcher { checkTypes(spec) }
                case (nil, let m?):
                    confirmMatcher = awaitPattern(m, "matches")
                case (_?, let m?):
                    reader.error("`confirm` takes `equals` or `matches`, not both", at: m.mark)
                case (nil, nil):
                    reader.error("`confirm` needs `equals` or `matches`: what the characteristic holds once the trigger took effect",
                                 at: c.mark, hint: "for example `equals: { hex: \"02\" }`")
                }
                if let target, let confirmMatcher { confirm = Step.Confirm(target: target, matcher: confirmMatcher) } else { ok = false }
            } else { ok = false }
        }
        var capture: Step.Capture?
        if let c = options["capture"] {
            capture = awaitCapture(c, number: number)
            if capture == nil { ok = false }
        }
        guard ok, let subscription, let matcher else { return nil }
        return Step.Await(subscription: subscription, matcher: matcher, trigger: trigger, resend: resend, busy: busy, failsOn: failsOn,
                          confirm: confirm, capture: capture)
    }

    /// `{ hex: REGEX }` or `{ utf8: REGEX }`: a pattern on a notification (`matches`, `busy`).
    mutating func awaitPattern(_ m: YAMLNode, _ key: String) -> MatcherSpec? {
        guard let pairs = reader.mapping(m, "`\(key)` (on an await)") else { return nil }
        guard pairs.count == 1, let form = pairs[0].key.scalar, form == "hex" || form == "utf8" else {
            reader.error("`\(key)` on an await is `{ hex: REGEX }` or `{ utf8: REGEX }`", at: m.mark,
                         hint: pairs.first?.key.scalar.flatMap { Suggestions.hint(for: $0, in: ["hex", "utf8"]) })
            return nil
        }
        guard let text = reader.string(pairs[0].value, "`\(form)`") else { return nil }
        if let problem = Matcher.regexError(text) {
            reader.error("`\(text)` is not a valid regular expression: \(problem)", at: pairs[0].value.mark)
            return nil
        }
        return .matches(pattern: text, hex: form == "hex")
    }
}

extension String {
    var replacingBackticks: String { filter { $0 != "`" } }
}
