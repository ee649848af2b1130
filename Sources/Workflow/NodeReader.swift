import BLE
import Support
import YAML

/// Typed access to YAML nodes for workflows and inventories: the reads are `YAMLReader`'s (the one
/// reader of every YAML file); a failed read is recorded as a diagnostic (with position and hint)
/// instead of thrown, so a whole file is checked in one pass and every problem is reported.
struct NodeReader {
    var sink: DiagnosticSink
    let reader = YAMLReader()

    init(path: String) {
        sink = DiagnosticSink(path: path)
    }

    mutating func error(_ message: String, at mark: SourceMark, hint: String? = nil) {
        sink.error(message, at: mark, hint: hint)
    }

    /// A file's YAML document: `.parsed(nil)` for an empty one; `.failed` when the YAML itself is
    /// broken (the error is recorded with its position).
    enum Document {
        case parsed(YAMLNode?)
        case failed
    }

    mutating func document(_ bytes: [UInt8], limits: YAMLParser.Limits = YAMLParser.Limits()) -> Document {
        do {
            return .parsed(try YAMLParser(limits: limits).parse(bytes))
        } catch {
            self.error(error.message, at: error.mark, hint: error.hint)
            return .failed
        }
    }

    /// The value `read` gives, or nil after recording its error.
    private mutating func attempt<T>(_ read: (YAMLReader) throws(YAMLError) -> T) -> T? {
        do {
            return try read(reader)
        } catch {
            self.error(error.message, at: error.mark, hint: error.hint)
            return nil
        }
    }

    /// The pairs of a mapping; reports an error (naming `what`) when the node is something else.
    mutating func mapping(_ node: YAMLNode, _ what: String) -> [YAMLNode.Pair]? {
        attempt { (reader) throws(YAMLError) in try reader.mapping(node, what) }
    }

    mutating func sequence(_ node: YAMLNode, _ what: String) -> [YAMLNode]? {
        attempt { (reader) throws(YAMLError) in try reader.sequence(node, what) }
    }

    /// Reports keys that are not in `allowed`, with a "did you mean" hint.
    mutating func checkKeys(_ pairs: [YAMLNode.Pair], allowed: [String], in context: String) {
        for e in reader.unknownKeys(pairs.filter { $0.key.scalar != nil }, allowed: allowed, in: context) {
            error(e.message, at: e.mark, hint: e.hint)
        }
    }

    /// True when `options` has an unknown key that looks like a misspelling of `key` (already reported,
    /// so "needs `key`" would only repeat it).
    func hasTypo(of key: String, in options: YAMLNode) -> Bool {
        guard let pairs = options.mapping else { return false }
        return pairs.contains { pair in
            guard let k = pair.key.scalar, k != key else { return false }
            return Suggestions.closest(to: k, in: [key]) != nil
        }
    }

    /// Reports required keys that are missing.
    mutating func require(_ keys: [String], in node: YAMLNode, context: String) -> Bool {
        var ok = true
        for key in keys where node[key] == nil {
            error("\(context) needs `\(key)`", at: node.mark)
            ok = false
        }
        return ok
    }

    func describe(_ node: YAMLNode) -> String { reader.describe(node) }

    /// A scalar's text (numbers and booleans are accepted as their text).
    mutating func string(_ node: YAMLNode, _ what: String) -> String? {
        attempt { (reader) throws(YAMLError) in try reader.string(node, what) }
    }

    /// A name (capture or subscription id): letters, digits, `_`, `-`, `.`.
    /// Names that are printed on progress lines and in reports may not hold control characters.
    mutating func refuseControlCharacters(_ text: String, _ what: String, at mark: SourceMark) {
        guard let (scalar, position) = ControlCharacters.first(in: text) else { return }
        error("\(what) `\(ControlCharacters.escaped(text))` contains the control character \(ControlCharacters.describe(scalar)) at character \(position)",
              at: mark, hint: "names are printed on terminals and in reports; remove it")
    }

    mutating func identifier(_ node: YAMLNode, _ what: String) -> String? {
        guard let text = string(node, what) else { return nil }
        guard Template.isValidName(text) else {
            error("`\(text)` is not a valid \(what)", at: node.mark,
                  hint: "use letters, digits, `_`, `-` or `.`, starting with a letter")
            return nil
        }
        return text
    }

    mutating func bool(_ node: YAMLNode, _ what: String) -> Bool? {
        attempt { (reader) throws(YAMLError) in try reader.bool(node, what) }
    }

    mutating func integer(_ node: YAMLNode, _ what: String, in range: ClosedRange<Int>) -> Int? {
        attempt { (reader) throws(YAMLError) in try reader.integer(node, what, in: range) }
    }

    mutating func number(_ node: YAMLNode, _ what: String) -> Double? {
        attempt { (reader) throws(YAMLError) in try reader.number(node, what) }
    }

    mutating func duration(_ node: YAMLNode, _ what: String, max: Duration = .seconds(3600)) -> Duration? {
        attempt { (reader) throws(YAMLError) in try reader.duration(node, what, max: max) }
    }

    mutating func uuid(_ node: YAMLNode, _ what: String) -> BluetoothUUID? {
        guard let text = string(node, what) else { return nil }
        if let uuid = BluetoothUUID(text) { return uuid }
        error("`\(text)` is not a Bluetooth UUID", at: node.mark,
              hint: "write 4 hex digits (`180A`, `0x180A`), 8 for 32-bit, or the 128-bit form `0000180a-0000-1000-8000-00805f9b34fb`")
        return nil
    }

    mutating func uuidList(_ node: YAMLNode, _ what: String) -> [BluetoothUUID]? {
        if node.scalar != nil, !node.isNull {
            return uuid(node, what).map { [$0] }
        }
        guard let items = sequence(node, what) else { return nil }
        var out: [BluetoothUUID] = []
        var ok = true
        for item in items {
            if let u = uuid(item, "a service UUID") { out.append(u) } else { ok = false }
        }
        return ok ? out : nil
    }

    /// Parses a template; reference marks point into the file.
    mutating func template(_ node: YAMLNode, _ what: String) -> Template? {
        attempt { (reader) throws(YAMLError) in try reader.template(node, what) }
    }

    // MARK: - Policies

    mutating func retry(_ node: YAMLNode) -> RetryPolicy? {
        if node.scalar != nil, !node.isNull {
            guard let n = integer(node, "retry attempts", in: 1...100) else { return nil }
            return RetryPolicy(attempts: n)
        }
        guard let pairs = mapping(node, "`retry`") else { return nil }
        checkKeys(pairs, allowed: ["attempts", "backoff", "on"], in: "`retry`")
        var policy = RetryPolicy(attempts: 3)
        var ok = true
        if let a = node["attempts"] {
            if let n = integer(a, "`attempts`", in: 1...100) { policy.attempts = n } else { ok = false }
        }
        if let b = node["backoff"] {
            if let items = b.sequence {
                var delays: [Duration] = []
                if items.isEmpty { error("`backoff` is an empty list", at: b.mark); ok = false }
                for item in items {
                    if let d = duration(item, "a backoff", max: .seconds(600)) { delays.append(d) } else { ok = false }
                }
                policy.backoff = .list(delays)
            } else if let pairs = b.mapping {
                checkKeys(pairs, allowed: ["initial", "factor", "max", "jitter"], in: "`backoff`")
                var initial: Duration = .seconds(1)
                var factor = 2.0
                var maximum: Duration = .seconds(30)
                var jitter = 0.0
                if let n = b["initial"] { if let d = duration(n, "`initial`", max: .seconds(600)) { initial = d } else { ok = false } }
                if let n = b["max"] { if let d = duration(n, "`max`", max: .seconds(600)) { maximum = d } else { ok = false } }
                if let n = b["factor"] {
                    if let f = number(n, "`factor`") {
                        if f < 1 || f > 10 { error("`factor` must be between 1 and 10, not \(TypedValue.numberText(f))", at: n.mark); ok = false } else { factor = f }
                    } else { ok = false }
                }
                if let n = b["jitter"] {
                    if let j = number(n, "`jitter`") {
                        if j < 0 || j > 1 { error("`jitter` is a fraction between 0 and 1, not \(TypedValue.numberText(j))", at: n.mark, hint: "0.2 spreads each wait by ±20%"); ok = false } else { jitter = j }
                    } else { ok = false }
                }
                if initial > maximum {
                    error("`initial` (\(DurationText.format(initial))) is longer than `max` (\(DurationText.format(maximum)))", at: b.mark)
                    ok = false
                }
                policy.backoff = .exponential(initial: initial, factor: factor, max: maximum, jitter: jitter)
            } else {
                if b.scalar != nil, !b.isNull, case .success = DurationText.parse(b.scalar ?? "") {
                    if let d = duration(b, "`backoff`", max: .seconds(600)) { policy.backoff = .list([d]) } else { ok = false }
                } else {
                    error("`backoff` must be a list of durations like `[1s, 2s, 5s]` or `{ initial: 1s, factor: 2, max: 30s, jitter: 0.2 }`", at: b.mark)
                    ok = false
                }
            }
        }
        if let o = node["on"] {
            let items = o.sequence ?? (o.scalar != nil && !o.isNull ? [o] : nil)
            if let items {
                var classes = Set<ErrorClass>()
                let names = ErrorClass.allCases.map(\.rawValue)
                for item in items {
                    guard let text = string(item, "an error class") else { ok = false; continue }
                    if let c = ErrorClass(rawValue: text) {
                        classes.insert(c)
                    } else if let why = ErrorClass.neverRetried[text] {
                        error("`\(text)` cannot be retried", at: item.mark, hint: why)
                        ok = false
                    } else {
                        error("unknown error class `\(text)`", at: item.mark,
                              hint: Suggestions.hint(for: text, in: names) ?? "error classes: \(names.joined(separator: ", "))")
                        ok = false
                    }
                }
                policy.on = classes
            } else {
                _ = sequence(o, "`on`")
                ok = false
            }
        }
        return ok ? policy : nil
    }

    mutating func reconnect(_ node: YAMLNode) -> ReconnectPolicy? {
        guard let pairs = mapping(node, "`reconnect`") else { return nil }
        checkKeys(pairs, allowed: ["attempts", "delay"], in: "`reconnect`")
        var attempts = 3
        var delay: Duration = .seconds(1)
        var ok = true
        if let a = node["attempts"] {
            if let text = a.scalar, ["unlimited", "infinite", "forever", "-1", ".inf"].contains(text) {
                error("reconnect attempts must be bounded", at: a.mark,
                      hint: "give a number from 0 to \(ReconnectPolicy.maxAttempts)")
                ok = false
            } else if let n = integer(a, "reconnect `attempts`", in: 0...ReconnectPolicy.maxAttempts) {
                attempts = n
            } else {
                ok = false
            }
        }
        if let d = node["delay"] {
            if let v = duration(d, "reconnect `delay`", max: ReconnectPolicy.maxDelay) { delay = v } else { ok = false }
        }
        return ok ? .workflow(attempts: attempts, delay: delay) : nil
    }
}
