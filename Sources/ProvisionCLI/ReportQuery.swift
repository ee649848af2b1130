import Engine
import Foundation
import Support
import Workflow

/// `--where EXPR`: the devices of a report for which a condition over `ReportFields` is true.
///
/// The expression language is the workflow's `when:` (docs/workflow.md): comparisons, `in`, `and`,
/// `or`, `not`, typed values (versions as versions: `firmware < 2.0.0`). A device where the condition
/// is unknown (a field it has no value for) is not selected.
struct DeviceFilter {
    /// An expression that cannot be used, with its column (1-based, in characters of the expression).
    struct Problem: Error {
        var expression: String
        var errors: [ExpressionError]

        /// The lines to print: each error with its column, the expression and a caret under the column.
        var lines: [String] {
            var out: [String] = []
            for e in errors {
                out.append("error: --where: column \(e.column): \(e.message)")
                out.append("    \(expression)")
                out.append("    " + String(repeating: " ", count: max(0, e.column - 1)) + "^")
                if let hint = e.hint { out.append("    hint: \(hint)") }
            }
            return out
        }
    }

    let expression: CheckedExpression

    init(_ text: String, fields: ReportFields) throws(Problem) {
        do {
            expression = try Expression(parsing: text).check(fields: fields.types)
        } catch let e as ExpressionError {
            throw Problem(expression: text, errors: [e])
        } catch let e as ExpressionErrors {
            throw Problem(expression: text, errors: e.errors)
        } catch {
            throw Problem(expression: text, errors: [ExpressionError("\(error)", column: 1)])
        }
    }

    /// The devices for which the condition is true.
    func select(_ devices: [DeviceRecord], fields: ReportFields) throws(Problem) -> [DeviceRecord] {
        var out: [DeviceRecord] = []
        for d in devices {
            let values = fields.values(d)
            do {
                if try expression.evaluate({ values[$0] }) == true { out.append(d) }
            } catch {
                throw Problem(expression: expression.source, errors: [ExpressionError("device \(d.id): \(error.message)", column: error.column)])
            }
        }
        return out
    }
}

/// `--group-by FIELD`: how many devices have each value of a field; for numbers, min/p50/max and a
/// histogram too. Versions are ordered as versions, numbers as numbers, text by count (most first).
struct Grouping: Sendable {
    struct Group: Sendable {
        var value: TypedValue
        var count: Int
    }

    /// A histogram bin. Integers: both bounds inclusive, exact (`Int64`, no rounding anywhere). Reals:
    /// `from` inclusive, `to` exclusive except in the last bin.
    struct Bin: Sendable, Equatable {
        var from: TypedValue
        var to: TypedValue
        var count: Int
    }

    struct Statistics: Sendable {
        var min: TypedValue
        var p50: TypedValue
        var max: TypedValue
    }

    var field: String
    var type: FieldType
    /// Devices grouped (after `--where`).
    var devices: Int
    /// Devices without a value for the field.
    var missing: Int
    var groups: [Group]
    var statistics: Statistics?
    var histogram: [Bin]

    /// A field that cannot be grouped by: unknown (with a did-you-mean hint).
    struct Problem: Error {
        var message: String
        var hint: String?
    }

    init(_ devices: [DeviceRecord], by field: String, fields: ReportFields, bins: Int = 10) throws(Problem) {
        guard let type = fields.type(of: field) else {
            throw Problem(message: "unknown field `\(field)`",
                          hint: Suggestions.hint(for: field, in: fields.names)
                              ?? "fields: \(fields.names.prefix(24).joined(separator: ", "))\(fields.names.count > 24 ? ", …" : "")")
        }
        self.field = field
        self.type = type
        self.devices = devices.count
        var values: [TypedValue] = []
        var missing = 0
        for d in devices {
            if let v = fields.values(d)[field] { values.append(v) } else { missing += 1 }
        }
        self.missing = missing

        var counts: [TypedValue: Int] = [:]
        for v in values { counts[v, default: 0] += 1 }
        var groups = counts.map { Group(value: $0.key, count: $0.value) }
        if type.type.isNumeric || type.type == .version {
            groups.sort { (try? TypedValue.compare($0.value, .less, $1.value)) ?? ($0.value.description < $1.value.description) }
        } else {
            groups.sort { ($0.count, $1.value.description) > ($1.count, $0.value.description) }
        }
        if !type.symbols.isEmpty {
            // An enumeration (outcome, error kind) in its declared order.
            let order = Dictionary(type.symbols.enumerated().map { ($0.element, $0.offset) }, uniquingKeysWith: { a, _ in a })
            groups.sort { (order[$0.value.description] ?? .max) < (order[$1.value.description] ?? .max) }
        }
        self.groups = groups

        if type.type.isNumeric, values.contains(where: { Self.number($0) != nil }) {
            let sorted = values.sorted { (try? TypedValue.compare($0, .less, $1)) ?? false }
            // Nearest rank, the one percentile definition (`Percentile`, docs/report.md).
            statistics = Percentile.of(sorted, percent: 50).map { Statistics(min: sorted[0], p50: $0, max: sorted[sorted.count - 1]) }
            histogram = Self.histogram(values, bins: bins)
        } else {
            statistics = nil
            histogram = []
        }
    }

    /// A value that goes into a histogram: an integer, or a finite real (±infinity is counted in the
    /// groups and the statistics, never in a bin).
    static func number(_ v: TypedValue) -> TypedValue? {
        switch v {
        case .integer: return v
        case .real(let d) where d.isFinite: return v
        default: return nil
        }
    }

    /// At most `bins` bins of equal width from the least to the greatest value, every value in exactly
    /// one bin. Integers are binned in integer arithmetic (exact over the whole `Int64` range, and at
    /// least one integer wide); reals in `Double` without overflow at the ends of its range.
    static func histogram(_ values: [TypedValue], bins: Int) -> [Bin] {
        var integers: [Int64] = [], reals: [Double] = []
        for v in values {
            switch v {
            case .integer(let n, _): integers.append(n)
            case .real(let d) where d.isFinite: reals.append(d)
            default: break
            }
        }
        let bins = max(1, bins)
        if reals.isEmpty {
            let signed = values.contains { if case .integer(_, true) = $0 { true } else { false } }
            return histogram(integers: integers, signed: signed, bins: bins)
        }
        // A real field whose values came as JSON integers reads them as reals.
        return histogram(reals: reals + integers.map { Double($0) }, bins: bins)
    }

    static func histogram(integers values: [Int64], signed: Bool, bins: Int) -> [Bin] {
        guard let lo = values.min(), let hi = values.max() else { return [] }
        func value(_ n: Int64) -> TypedValue { .integer(n, signed: signed) }
        // The span hi - lo always fits in a UInt64; the width ⌈(span + 1) / bins⌉ is span / bins + 1,
        // so neither overflows, even from Int64.min to Int64.max.
        let span = UInt64(bitPattern: hi &- lo)
        let width = span / UInt64(bins) + 1
        let count = Int(span / width) + 1
        var out: [Bin] = []
        out.reserveCapacity(count)
        for i in 0..<count {
            let first = UInt64(i) * width
            let (end, overflow) = first.addingReportingOverflow(width - 1)
            let last = overflow ? span : min(span, end)
            out.append(Bin(from: value(lo &+ Int64(bitPattern: first)), to: value(lo &+ Int64(bitPattern: last)), count: 0))
        }
        for v in values { out[Int(UInt64(bitPattern: v &- lo) / width)].count += 1 }
        return out
    }

    static func histogram(reals values: [Double], bins: Int) -> [Bin] {
        guard let lo = values.min(), let hi = values.max() else { return [] }
        if lo == hi { return [Bin(from: .real(lo), to: .real(hi), count: values.count)] }
        // Bounds as a weighted mean of lo and hi: never beyond either, never overflowing (hi - lo may
        // be above Double.greatestFiniteMagnitude); rounding cannot make them go backwards.
        var bounds: [Double] = [lo]
        for i in 1..<bins {
            let t = Double(i) / Double(bins)
            let b = min(hi, max(bounds[bounds.count - 1], lo * (1 - t) + hi * t))
            if b > bounds[bounds.count - 1], b < hi { bounds.append(b) }
        }
        bounds.append(hi)
        var out = (0..<(bounds.count - 1)).map { Bin(from: .real(bounds[$0]), to: .real(bounds[$0 + 1]), count: 0) }
        for v in values {
            // The last bin whose lower bound is at or below v.
            var low = 0, high = out.count - 1
            while low < high {
                let mid = (low + high + 1) / 2
                if bounds[mid] <= v { low = mid } else { high = mid - 1 }
            }
            out[low].count += 1
        }
        return out
    }

    /// The grouping as text: a header, counts per value (numbers: when there are few distinct values)
    /// with bars, then for numbers min/p50/max and the histogram.
    var text: [String] {
        let withValue = devices - missing
        let kind = type.symbols.isEmpty ? " (\(type.type.phrase))" : ""
        var lines = ["\(field)\(kind): \(devices) device(s), \(withValue) with a value"]
        let most = max(1, groups.map(\.count).max() ?? 1, histogram.map(\.count).max() ?? 1, missing)
        func bar(_ n: Int) -> String { String(repeating: "█", count: n == 0 ? 0 : max(1, n * 40 / most)) }
        let showValues = statistics == nil || groups.count <= 20
        if showValues {
            let width = min(40, max(missing > 0 ? 10 : 8, groups.map { $0.value.description.count }.max() ?? 8))
            for g in groups {
                lines.append("  " + Self.pad(g.value.description, width) + "  " + Self.pad(String(g.count), 6, right: true) + "  " + bar(g.count))
            }
            if missing > 0 {
                lines.append("  " + Self.pad("(no value)", width) + "  " + Self.pad(String(missing), 6, right: true) + "  " + bar(missing))
            }
        }
        if let s = statistics {
            lines.append("  min \(s.min)  p50 \(s.p50)  max \(s.max)")
            let labels = histogram.map(Self.label)
            let width = max(8, labels.map(\.count).max() ?? 8)
            lines.append("  histogram:")
            for (b, label) in zip(histogram, labels) {
                lines.append("    " + Self.pad(label, width) + "  " + Self.pad(String(b.count), 6, right: true) + "  " + bar(b.count))
            }
            if !showValues, missing > 0 { lines.append("  (no value): \(missing)") }
        }
        return lines
    }

    /// A bin bound as text: integers exactly, reals with at most 3 decimals (whole ones without a
    /// fraction).
    static func bound(_ v: TypedValue) -> String {
        guard case .real(let d) = v else { return v.description }
        if d == d.rounded(), abs(d) < 1e15 { return String(Int64(d)) }
        let shown = (d * 1000).rounded() / 1000
        return TypedValue.numberText(shown.isFinite ? shown : d)
    }

    /// A bin as text: `7`, `10–19` for integers, `0.5–1.25` for reals.
    static func label(_ b: Bin) -> String {
        if case .integer = b.from, b.from == b.to { return bound(b.from) }
        return "\(bound(b.from))–\(bound(b.to))"
    }

    static func pad(_ s: String, _ width: Int, right: Bool = false) -> String {
        let n = s.count
        guard n < width else { return s }
        let fill = String(repeating: " ", count: width - n)
        return right ? fill + s : s + fill
    }

    /// The grouping as JSON (keys sorted).
    var json: String {
        var fields: [String: String] = [
            "field": JSONString.quoted(field), "type": JSONString.quoted(type.type.name),
            "devices": String(devices), "missing": String(missing),
            "groups": "[" + groups.map { "{\"count\":\($0.count),\"value\":\($0.value.json)}" }.joined(separator: ",") + "]",
        ]
        if let s = statistics {
            fields["statistics"] = "{\"max\":\(s.max.json),\"min\":\(s.min.json),\"p50\":\(s.p50.json)}"
            fields["histogram"] = "[" + histogram.map {
                "{\"count\":\($0.count),\"from\":\($0.from.json),\"to\":\($0.to.json)}"
            }.joined(separator: ",") + "]"
        }
        return "{" + fields.keys.sorted().map { "\"\($0)\":\(fields[$0] ?? "null")" }.joined(separator: ",") + "}"
    }
}
