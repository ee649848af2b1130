import Engine
import Foundation
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

    struct Bin: Sendable {
        /// Inclusive lower bound; upper bound inclusive for integers and for the last bin of reals.
        var from: Double
        var to: Double
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
                          hint: ArgumentParser.closest(field, fields.names).map { "did you mean `\($0)`?" }
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

        let numbers = values.compactMap(Self.number)
        if type.type.isNumeric, !numbers.isEmpty {
            let sorted = values.sorted { (try? TypedValue.compare($0, .less, $1)) ?? false }
            let rank = Int((0.5 * Double(sorted.count - 1)).rounded())
            statistics = Statistics(min: sorted[0], p50: sorted[min(sorted.count - 1, max(0, rank))], max: sorted[sorted.count - 1])
            histogram = Self.histogram(numbers, integers: type.type != .real, bins: bins)
        } else {
            statistics = nil
            histogram = []
        }
    }

    static func number(_ v: TypedValue) -> Double? {
        switch v {
        case .integer(let n, _): return Double(n)
        case .real(let d) where d.isFinite: return d
        default: return nil
        }
    }

    /// At most `bins` bins of equal width from the least to the greatest value (integer-wide bins for
    /// integers).
    static func histogram(_ values: [Double], integers: Bool, bins: Int) -> [Bin] {
        guard let lo = values.min(), let hi = values.max() else { return [] }
        if lo == hi { return [Bin(from: lo, to: hi, count: values.count)] }
        var out: [Bin] = []
        if integers {
            let span = hi - lo + 1
            let width = max(1, (span / Double(bins)).rounded(.up))
            var from = lo
            while from <= hi {
                out.append(Bin(from: from, to: min(hi, from + width - 1), count: 0))
                from += width
            }
            for v in values {
                let i = min(out.count - 1, Int((v - lo) / width))
                out[i].count += 1
            }
        } else {
            let width = (hi - lo) / Double(bins)
            for i in 0..<bins { out.append(Bin(from: lo + Double(i) * width, to: i == bins - 1 ? hi : lo + Double(i + 1) * width, count: 0)) }
            for v in values {
                let i = min(bins - 1, max(0, Int((v - lo) / width)))
                out[i].count += 1
            }
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
            let integers = type.type != .real
            let labels = histogram.map { b in integers ? (b.from == b.to ? Self.number(b.from) : "\(Self.number(b.from))–\(Self.number(b.to))")
                                                      : "\(Self.number(b.from))–\(Self.number(b.to))" }
            let width = max(8, labels.map(\.count).max() ?? 8)
            lines.append("  histogram:")
            for (b, label) in zip(histogram, labels) {
                lines.append("    " + Self.pad(label, width) + "  " + Self.pad(String(b.count), 6, right: true) + "  " + bar(b.count))
            }
            if !showValues, missing > 0 { lines.append("  (no value): \(missing)") }
        }
        return lines
    }

    /// A bin bound as text: integers without a fraction, reals with at most 3 decimals.
    static func number(_ d: Double) -> String {
        if d == d.rounded(), abs(d) < 1e15 { return String(Int64(d)) }
        return TypedValue.numberText((d * 1000).rounded() / 1000)
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
            "field": Diagnostic.jsonString(field), "type": Diagnostic.jsonString(type.type.name),
            "devices": String(devices), "missing": String(missing),
            "groups": "[" + groups.map { "{\"count\":\($0.count),\"value\":\($0.value.json)}" }.joined(separator: ",") + "]",
        ]
        if let s = statistics {
            fields["statistics"] = "{\"max\":\(s.max.json),\"min\":\(s.min.json),\"p50\":\(s.p50.json)}"
            fields["histogram"] = "[" + histogram.map {
                "{\"count\":\($0.count),\"from\":\(TypedValue.numberText($0.from)),\"to\":\(TypedValue.numberText($0.to))}"
            }.joined(separator: ",") + "]"
        }
        return "{" + fields.keys.sorted().map { "\"\($0)\":\(fields[$0] ?? "null")" }.joined(separator: ",") + "}"
    }
}
