import Engine
import Foundation
import Support
import Workflow

/// What a report read from outside must satisfy beyond its JSON schema, checked on every device before
/// a query sees it (docs/report.md, "Reading a report"): a report is hostile input, and a number that
/// decodes is not yet a number a query, a histogram or a page can use.
///
/// - times (`duration_ms`, a step's `start_ms` and `duration_ms`, `summary.wall_ms`, the percentiles)
///   from 0 to `longestMilliseconds` (10^12 ms, about 31 years);
/// - counts (`attempts`, `att_round_trips`, a step's `attempts`, a measurement's `step`) 0 or more;
///   `rssi` from -128 to 127 dBm;
/// - every captured value a value of its type in `run.capture_types` (a `uint` from 0 to 2^63-1, an
///   `int` in Int64, a `real` finite or `"Infinity"`/`"-Infinity"`, bytes as hex, a version as a
///   version), or the string `"***"` of a redacted secret;
/// - each device id once (`DeviceIDs`), in a file and in the rows a line database returns.
///
/// Each problem is a path inside the device record and a message; the reader turns the path into a
/// line and column.
struct ReportChecks {
    /// A problem: where in the record (as written in the JSON) and what.
    struct Problem: Error, Equatable {
        var path: [JSONTape.PathComponent]
        var message: String
    }

    /// The longest time a report may hold, in milliseconds (about 31 years).
    static let longestMilliseconds = 1e12

    /// The types of captured values (`run.capture_types`); nil for a report of version 1, whose
    /// captured values are text.
    var captureTypes: [String: ValueType]?

    /// The first problem with a device, or nil.
    func check(_ d: DeviceRecord) -> Problem? {
        if d.id.isEmpty { return Problem(path: [.key("id")], message: "a device id cannot be empty") }
        if d.attempts < 0 { return Problem(path: [.key("attempts")], message: "\(d.attempts) attempts: a count cannot be negative") }
        if let r = d.attRoundTrips, r < 0 { return Problem(path: [.key("att_round_trips")], message: "\(r): a count cannot be negative") }
        if let r = d.rssi, !(-128...127).contains(r) { return Problem(path: [.key("rssi")], message: "\(r) dBm is not an RSSI (-128 to 127)") }
        if let p = Self.time(d.durationMs, [.key("duration_ms")]) { return p }
        for (i, s) in d.steps.enumerated() {
            let at: [JSONTape.PathComponent] = [.key("steps"), .index(i)]
            if s.attempts < 0 { return Problem(path: at + [.key("attempts")], message: "\(s.attempts) attempts: a count cannot be negative") }
            if let p = Self.time(s.startMs, at + [.key("start_ms")]) ?? Self.time(s.durationMs, at + [.key("duration_ms")]) { return p }
        }
        for (i, m) in (d.measurements ?? []).enumerated() where m.step < 0 {
            return Problem(path: [.key("measurements"), .index(i), .key("step")], message: "step \(m.step): an index cannot be negative")
        }
        for key in d.captured.keys.sorted() {
            guard let scalar = d.captured[key], scalar != .null, scalar != .string(Redactor.mask) else { continue }
            // A capture without a type (every capture of a version 1 report) is text.
            let type = captureTypes?[key]
            do {
                _ = try TypedValue(json: scalar, as: type ?? .text)
            } catch {
                let says = type.map { "`run.capture_types` says \($0.name)" } ?? "it has no type in `run.capture_types`, so it must be text"
                return Problem(path: [.key("captured"), .key(key)], message: "\(error.message) (\(says))")
            }
        }
        return nil
    }

    /// The report's own figures: its summary's times and counts.
    static func check(_ s: Summary) -> Problem? {
        if s.total < 0 { return Problem(path: [.key("total")], message: "\(s.total): a count cannot be negative") }
        for o in DeviceOutcome.allCases.sorted(by: { $0.rawValue < $1.rawValue }) where s.outcomes[o] < 0 {
            return Problem(path: [.key("outcomes"), .key(o.rawValue)], message: "\(s.outcomes[o]): a count cannot be negative")
        }
        for (name, n) in s.errors.sorted(by: { $0.key < $1.key }) where n < 0 {
            return Problem(path: [.key("errors"), .key(name)], message: "\(n): a count cannot be negative")
        }
        if let p = time(s.wallMs, [.key("wall_ms")]) { return p }
        if !(s.devicesPerMinute.isFinite && s.devicesPerMinute >= 0) {
            return Problem(path: [.key("devices_per_minute")], message: "\(s.devicesPerMinute) is not a rate (0 or more)")
        }
        if let d = s.durationMs {
            for (name, v) in [("p50", d.p50), ("p95", d.p95), ("max", d.max)] {
                if let p = time(v, [.key("duration_ms"), .key(name)]) { return p }
            }
        }
        if let r = s.attRoundTripsPerDevice, !(r.isFinite && r >= 0) {
            return Problem(path: [.key("att_round_trips_per_device")], message: "\(r): a count cannot be negative")
        }
        return nil
    }

    /// The run's own figures.
    static func check(_ r: RunInfo) -> Problem? {
        for (i, a) in r.adapters.enumerated() {
            if a.slots < 0 { return Problem(path: [.key("adapters"), .index(i), .key("slots")], message: "\(a.slots): a count cannot be negative") }
            if let p = a.peakLinks, p < 0 { return Problem(path: [.key("adapters"), .index(i), .key("peak_links")], message: "\(p): a count cannot be negative") }
        }
        if let p = r.peakConcurrency, p < 0 { return Problem(path: [.key("peak_concurrency")], message: "\(p): a count cannot be negative") }
        if let h = r.onDevice {
            if h.run < 0 { return Problem(path: [.key("on_device"), .key("run")], message: "\(h.run): a count cannot be negative") }
            if let p = time(h.timeoutMs, [.key("on_device"), .key("timeout_ms")]) { return p }
        }
        return nil
    }

    private static func time(_ ms: Double?, _ path: [JSONTape.PathComponent]) -> Problem? {
        guard let ms else { return nil }
        guard ms >= 0, ms <= longestMilliseconds else {
            return Problem(path: path, message: "\(TypedValue.numberText(ms)) ms is not a time a run can take (0 to \(TypedValue.numberText(longestMilliseconds)) ms)")
        }
        return nil
    }

    /// Device ids seen so far: a second record with an id is refused (one device, one outcome).
    struct DeviceIDs {
        private var seen: [String: Int] = [:]

        /// Nil for a new id; a problem naming the earlier record for one seen before.
        mutating func insert(_ id: String, index: Int) -> Problem? {
            if let earlier = seen[id] {
                return Problem(path: [.key("id")], message: "device `\(id)` is listed twice (also `devices[\(earlier)]`): one device, one record")
            }
            seen[id] = index
            return nil
        }
    }
}
