import Engine
import Foundation
import Support
import Workflow

/// `provision report NEWER --compare OLDER`: what changed per device from an older run to a newer one —
/// outcome, error kind, every captured value, every measurement's outcome — and the devices only in
/// one of them; with the counts by outcome before and after. Rendered as text, CSV or JSON.
struct ReportComparison: Sendable {
    /// One field of one device that differs.
    struct Change: Sendable, Equatable {
        /// `outcome`, `error.kind`, `captured.NAME`, `measurement.NAME`.
        var field: String
        var before: JSONScalar
        var after: JSONScalar
    }

    /// A device that differs (or is in one run only).
    struct Entry: Sendable {
        var id: String
        /// `older` or `newer` when the device is in that run only.
        var onlyIn: String?
        /// Its outcome in the run it is in, for a device in one run only.
        var outcome: String?
        var changes: [Change]
    }

    var older: RunInfo
    var newer: RunInfo
    var workflowChanged: Bool
    var entries: [Entry]

    /// What a reader must know before reading the changes (printed as a warning, whatever the format):
    /// the runs come from different workflows, or from two versions of one.
    var warning: String? {
        if let before = older.workflow.name, let after = newer.workflow.name, before != after {
            return "the reports come from different workflows: \(older.id) ran `\(before)` (\(older.workflow.path)), \(newer.id) ran `\(after)` (\(newer.workflow.path)); a field of one may not mean the same in the other"
        }
        guard workflowChanged else { return nil }
        return "the workflow changed between the runs: \(older.workflow.path) \(older.workflow.sha256.prefix(12))… → \(newer.workflow.path) \(newer.workflow.sha256.prefix(12))…"
    }
    /// Devices in either run.
    var total: Int
    /// Counts by outcome, before and after.
    var outcomesBefore: [String: Int]
    var outcomesAfter: [String: Int]

    init(older: RunReport, newer: RunReport, olderDevices: [DeviceRecord]? = nil, newerDevices: [DeviceRecord]? = nil) {
        let oldDevices = olderDevices ?? older.devices
        let newDevices = newerDevices ?? newer.devices
        self.older = older.run
        self.newer = newer.run
        workflowChanged = older.run.workflow.sha256 != newer.run.workflow.sha256
        let before = Dictionary(oldDevices.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let after = Dictionary(newDevices.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        var entries: [Entry] = []
        for d in newDevices {
            guard let old = before[d.id] else {
                entries.append(Entry(id: d.id, onlyIn: "newer", outcome: d.outcome.rawValue, changes: []))
                continue
            }
            let changes = Self.changes(old, d)
            if !changes.isEmpty { entries.append(Entry(id: d.id, changes: changes)) }
        }
        for d in oldDevices where after[d.id] == nil {
            entries.append(Entry(id: d.id, onlyIn: "older", outcome: d.outcome.rawValue, changes: []))
        }
        self.entries = entries
        total = Set(before.keys).union(after.keys).count
        func counts(_ ds: [DeviceRecord]) -> [String: Int] {
            var c: [String: Int] = [:]
            for o in DeviceOutcome.allCases { c[o.rawValue] = 0 }
            for d in ds { c[d.outcome.rawValue, default: 0] += 1 }
            return c
        }
        outcomesBefore = counts(oldDevices)
        outcomesAfter = counts(newDevices)
    }

    /// Every field of `new` that differs from `old`.
    static func changes(_ old: DeviceRecord, _ new: DeviceRecord) -> [Change] {
        var out: [Change] = []
        func scalar(_ s: String?) -> JSONScalar { s.map { .string($0) } ?? .null }
        if old.outcome != new.outcome {
            out.append(Change(field: "outcome", before: .string(old.outcome.rawValue), after: .string(new.outcome.rawValue)))
        }
        // An error that went away with a device now succeeding says nothing the outcome does not.
        if old.error?.kind != new.error?.kind, new.error != nil || old.outcome == new.outcome {
            out.append(Change(field: "error.kind", before: scalar(old.error?.kind.rawValue), after: scalar(new.error?.kind.rawValue)))
        }
        for key in Set(old.captured.keys).union(new.captured.keys).sorted() where old.captured[key] != new.captured[key] {
            out.append(Change(field: "captured.\(key)", before: old.captured[key] ?? .null, after: new.captured[key] ?? .null))
        }
        let oldM = Dictionary((old.measurements ?? []).map { ($0.result.name, $0.result.outcome.rawValue) }, uniquingKeysWith: { _, b in b })
        let newM = Dictionary((new.measurements ?? []).map { ($0.result.name, $0.result.outcome.rawValue) }, uniquingKeysWith: { _, b in b })
        for name in Set(oldM.keys).union(newM.keys).sorted() where oldM[name] != newM[name] {
            out.append(Change(field: "measurement.\(name)", before: scalar(oldM[name]), after: scalar(newM[name])))
        }
        return out
    }

    /// A field as the text output names it: `captured.firmware` is `firmware`.
    private static func shortName(_ field: String) -> String {
        field.hasPrefix("captured.") ? String(field.dropFirst("captured.".count)) : field
    }

    private static func shown(_ v: JSONScalar) -> String { v == .null ? "-" : v.text }

    /// A changed value as a person reads it: a captured checksum in hex.
    private func shown(_ field: String, _ v: JSONScalar) -> String {
        guard v != .null, field.hasPrefix("captured.") else { return Self.shown(v) }
        return newer.shown(captured: String(field.dropFirst("captured.".count)), v)
    }

    /// One line per device that differs, then the counts by outcome and a count of the differences
    /// (printed escaped by the caller).
    var text: [String] {
        var lines: [String] = []
        if workflowChanged {
            lines.append("workflow changed: \(older.workflow.path) \(older.workflow.sha256.prefix(12))… → \(newer.workflow.path) \(newer.workflow.sha256.prefix(12))…")
        }
        for e in entries {
            if let only = e.onlyIn {
                lines.append("\(e.id): only in \(only == "newer" ? newer.id : older.id) (\(e.outcome ?? "-"))")
            } else {
                lines.append("\(e.id): " + e.changes.map { "\(Self.shortName($0.field)) \(shown($0.field, $0.before)) → \(shown($0.field, $0.after))" }.joined(separator: "; "))
            }
        }
        var byField: [String: Int] = [:]
        for e in entries { for c in e.changes { byField[Self.shortName(c.field), default: 0] += 1 } }
        if !byField.isEmpty {
            lines.append("changes by field: " + byField.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        let outcomes = DeviceOutcome.allCases.map(\.rawValue).filter { (outcomesBefore[$0] ?? 0) + (outcomesAfter[$0] ?? 0) > 0 }
        lines.append("outcomes: " + outcomes.map { "\($0) \(outcomesBefore[$0] ?? 0) → \(outcomesAfter[$0] ?? 0)" }.joined(separator: ", "))
        lines.append("\(entries.count) of \(total) device(s) differ between \(older.id) and \(newer.id)")
        return lines
    }

    /// RFC 4180 CSV, one row per changed field: `id, change, field, before, after, older_run, newer_run`
    /// (`change` is `changed`, `only_in_older` or `only_in_newer`); cells neutralised as the device CSV.
    var csv: String {
        var rows = [ReportCSV.row(["id", "change", "field", "before", "after", "older_run", "newer_run"])]
        for e in entries {
            if let only = e.onlyIn {
                rows.append(ReportCSV.row([e.id, "only_in_\(only)", "outcome", only == "older" ? e.outcome ?? "" : "",
                                           only == "newer" ? e.outcome ?? "" : "", older.id, newer.id]))
            } else {
                for c in e.changes {
                    rows.append(ReportCSV.row([e.id, "changed", c.field, c.before.text, c.after.text, older.id, newer.id]))
                }
            }
        }
        return rows.joined(separator: "\r\n") + "\r\n"
    }

    /// One JSON document (keys sorted).
    var json: String {
        func run(_ r: RunInfo) -> String {
            "{\"finished\":\(r.finished.map { JSONString.quoted($0.iso) } ?? "null"),\"id\":\(JSONString.quoted(r.id)),"
                + "\"started\":\(JSONString.quoted(r.started.iso)),\"workflow_sha256\":\(JSONString.quoted(r.workflow.sha256))}"
        }
        func counts(_ c: [String: Int]) -> String {
            "{" + c.keys.sorted().map { "\(JSONString.quoted($0)):\(c[$0] ?? 0)" }.joined(separator: ",") + "}"
        }
        let devices = entries.map { e -> String in
            var f: [String: String] = ["id": JSONString.quoted(e.id)]
            if let only = e.onlyIn {
                f["only_in"] = JSONString.quoted(only)
                f["outcome"] = e.outcome.map(JSONString.quoted) ?? "null"
            }
            f["changes"] = "[" + e.changes.map {
                "{\"after\":\($0.after.json),\"before\":\($0.before.json),\"field\":\(JSONString.quoted($0.field))}"
            }.joined(separator: ",") + "]"
            return "{" + f.keys.sorted().map { "\"\($0)\":\(f[$0] ?? "null")" }.joined(separator: ",") + "}"
        }
        return "{\"devices\":[" + devices.joined(separator: ",") + "],\"differ\":\(entries.count),\"newer\":\(run(newer)),"
            + "\"older\":\(run(older)),\"outcomes_after\":\(counts(outcomesAfter)),\"outcomes_before\":\(counts(outcomesBefore)),"
            + "\"total\":\(total),\"workflow_changed\":\(workflowChanged)}"
    }
}
