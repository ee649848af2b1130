import BLE
import Support
import YAML

/// Typed reads of YAML nodes for model and override files: every failure is a `SimulatorError` at the
/// node's position, with a suggestion for a misspelt key.
struct ModelReader {
    let file: String

    func fail(_ message: String, _ node: YAMLNode, hint: String? = nil) -> SimulatorError {
        SimulatorError(message, file: file, at: node.mark, hint: hint)
    }

    /// The pairs of a mapping whose keys are all in `allowed`.
    func mapping(_ node: YAMLNode, _ what: String, allowed: [String]) throws(SimulatorError) -> [(String, YAMLNode)] {
        guard let pairs = node.mapping else {
            throw fail("\(what) must be a mapping, not \(node.kindDescription)", node)
        }
        var out: [(String, YAMLNode)] = []
        for p in pairs {
            let key = p.key.scalar ?? ""
            guard allowed.contains(key) else {
                let hint = Suggestions.hint(for: key, in: allowed)
                    ?? "expected one of: \(allowed.joined(separator: ", "))"
                throw fail("unknown key `\(key)` in \(what)", p.key, hint: hint)
            }
            out.append((key, p.value))
        }
        return out
    }

    func string(_ node: YAMLNode, _ what: String) throws(SimulatorError) -> String {
        guard let s = node.scalar, !node.isNull else { throw fail("\(what) must be a value, not \(node.kindDescription)", node) }
        return s
    }

    func bool(_ node: YAMLNode, _ what: String) throws(SimulatorError) -> Bool {
        switch node.scalar {
        case "true"?: return true
        case "false"?: return false
        default: throw fail("\(what) must be true or false", node)
        }
    }

    func int(_ node: YAMLNode, _ what: String, in range: ClosedRange<Int>) throws(SimulatorError) -> Int {
        guard let s = node.scalar, let v = Int(s) else { throw fail("\(what) must be an integer", node) }
        guard range.contains(v) else {
            throw fail("\(what) must be between \(range.lowerBound) and \(range.upperBound), not \(v)", node)
        }
        return v
    }

    func probability(_ node: YAMLNode, _ what: String) throws(SimulatorError) -> Double {
        guard let s = node.scalar, let v = Double(s), v.isFinite else {
            throw fail("\(what) must be a probability between 0 and 1", node, hint: "e.g. `0.05`")
        }
        guard v >= 0 && v <= 1 else { throw fail("\(what) must be between 0 and 1, not \(s)", node) }
        return v
    }

    func positive(_ node: YAMLNode, _ what: String) throws(SimulatorError) -> Double {
        guard let s = node.scalar, let v = Double(s), v.isFinite, v > 0, v <= 1000 else {
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

    func list(_ node: YAMLNode, _ what: String) throws(SimulatorError) -> [YAMLNode] {
        if let items = node.sequence { return items }
        throw fail("\(what) must be a list, not \(node.kindDescription)", node)
    }

    /// `250ms`, `1.5s`, `2m`, `100us`, `0ms`.
    func duration(_ node: YAMLNode, _ what: String) throws(SimulatorError) -> Duration {
        guard let s = node.scalar, let d = Self.parseDuration(s) else {
            throw fail("\(what) must be a duration with a unit, e.g. 20ms or 1s", node)
        }
        return d
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

    static func parseDuration(_ text: String) -> Duration? {
        let units: [(String, Double)] = [("us", 1e-6), ("ms", 1e-3), ("s", 1), ("m", 60)]
        for (suffix, seconds) in units where text.hasSuffix(suffix) {
            let number = text.dropLast(suffix.count)
            guard let v = Double(number), v.isFinite, v >= 0, v <= 86_400 / seconds else { return nil }
            return .nanoseconds(Int64((v * seconds * 1e9).rounded()))
        }
        return nil
    }
}
