import BLE
import Support
import YAML

/// Typed reads of YAML nodes for model and override files: the reads are `YAMLReader`'s (the one reader
/// of every YAML file), plus the simulator's own kinds of value; every failure is a `SimulatorError` at
/// the node's position, with a hint where one helps (a misspelt key gets "did you mean").
struct ModelReader {
    let file: String
    private let reader = YAMLReader()

    init(file: String) {
        self.file = file
    }

    func fail(_ message: String, _ node: YAMLNode, hint: String? = nil) -> SimulatorError {
        SimulatorError(message, file: file, at: node.mark, hint: hint)
    }

    /// The value `read` gives; its `YAMLError` as this file's `SimulatorError`.
    private func read<T>(_ read: (YAMLReader) throws(YAMLError) -> T) throws(SimulatorError) -> T {
        do {
            return try read(reader)
        } catch {
            throw SimulatorError(error.message, file: file, at: error.mark, hint: error.hint)
        }
    }

    /// The pairs of a mapping whose keys are all in `allowed`.
    func mapping(_ node: YAMLNode, _ what: String, allowed: [String]) throws(SimulatorError) -> [(String, YAMLNode)] {
        try read { (r) throws(YAMLError) in try r.mapping(node, what, allowed: allowed) }.map { ($0.key, $0.value) }
    }

    /// A mapping whose keys are free (e.g. `defaults:`) when `anyKey`, else `mapping(_:_:allowed:)`.
    func mapping(_ node: YAMLNode, _ what: String, allowed: [String], anyKey: Bool) throws(SimulatorError) -> [(String, YAMLNode)] {
        guard anyKey else { return try mapping(node, what, allowed: allowed) }
        var out: [(String, YAMLNode)] = []
        for p in try read({ (r) throws(YAMLError) in try r.mapping(node, what) }) {
            out.append((try string(p.key, "a key"), p.value))
        }
        return out
    }

    func string(_ node: YAMLNode, _ what: String) throws(SimulatorError) -> String {
        try read { (r) throws(YAMLError) in try r.string(node, what) }
    }

    func bool(_ node: YAMLNode, _ what: String) throws(SimulatorError) -> Bool {
        try read { (r) throws(YAMLError) in try r.bool(node, what) }
    }

    func int(_ node: YAMLNode, _ what: String, in range: ClosedRange<Int>) throws(SimulatorError) -> Int {
        try read { (r) throws(YAMLError) in try r.integer(node, what, in: range) }
    }

    func list(_ node: YAMLNode, _ what: String) throws(SimulatorError) -> [YAMLNode] {
        try read { (r) throws(YAMLError) in try r.sequence(node, what) }
    }

    /// A `${name}` template (the model's defaults and the device's variables fill it in).
    func template(_ node: YAMLNode, _ what: String) throws(SimulatorError) -> Template {
        try read { (r) throws(YAMLError) in try r.template(node, what) }
    }

    func probability(_ node: YAMLNode, _ what: String) throws(SimulatorError) -> Double {
        guard let v = try? read({ (r) throws(YAMLError) in try r.number(node, what) }) else {
            throw fail("\(what) must be a probability between 0 and 1", node, hint: "e.g. `0.05`")
        }
        guard v >= 0 && v <= 1 else { throw fail("\(what) must be between 0 and 1, not \(node.scalar ?? "")", node) }
        return v
    }

    func positive(_ node: YAMLNode, _ what: String) throws(SimulatorError) -> Double {
        guard let v = try? read({ (r) throws(YAMLError) in try r.number(node, what) }), v > 0, v <= 1000 else {
            throw fail("\(what) must be a number greater than 0 (at most 1000)", node, hint: "e.g. `3` for three times slower")
        }
        return v
    }

    func byte(_ node: YAMLNode, _ what: String) throws(SimulatorError) -> UInt8 {
        guard let s = node.scalar, s.utf8.count == 2, let v = UInt8(s, radix: 16) else {
            throw fail("\(what) must be one byte in hex, e.g. \"01\"", node, hint: "quote it: \"01\"")
        }
        return v
    }

    func uuid(_ node: YAMLNode, _ what: String) throws(SimulatorError) -> BluetoothUUID {
        guard let s = node.scalar, let u = BluetoothUUID(s) else {
            throw fail("\(what) must be a Bluetooth UUID (e.g. FFF0 or a 128-bit UUID)", node)
        }
        return u
    }

    /// `250ms`, `1.5s`, `2m`, `100us`, `0ms` (at most a day).
    func duration(_ node: YAMLNode, _ what: String) throws(SimulatorError) -> Duration {
        try read { (r) throws(YAMLError) in try r.duration(node, what, max: .seconds(86_400)) }
    }

    /// A range `[5ms, 50ms]` or a single duration `10ms`.
    func latency(_ node: YAMLNode, _ what: String) throws(SimulatorError) -> LatencyRange {
        if let items = node.sequence {
            guard items.count == 2 else { throw fail("\(what) must be [low, high] or a single duration", node) }
            let lo = try duration(items[0], what)
            let hi = try duration(items[1], what)
            guard lo <= hi else { throw fail("\(what): the low end is above the high end", items[1]) }
            return LatencyRange(lo, hi)
        }
        let d = try duration(node, what)
        return LatencyRange(d, d)
    }
}
