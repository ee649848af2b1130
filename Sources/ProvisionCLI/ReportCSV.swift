import Engine
import Foundation
import Workflow

/// `provision report --csv`: RFC 4180 CSV, one row per device, for a spreadsheet or an MES import.
///
/// Columns: `id, address, name, outcome, error_kind, error_step, error_message, adapter, rssi,
/// duration_ms, attempts, run_id, started` (the device's start, ISO 8601 UTC), `station`, then
/// `security_level, security_method, security_bond` when a device has security, then one column per
/// captured value (typed values as their JSON shows them: `87`, `2.4.1`, hex for bytes).
///
/// A cell a spreadsheet would take for a formula (it begins with `=`, `+`, `-`, `@`, a tab or a
/// carriage return, OWASP's list, or their full-width forms) is written with a leading `'`, so it is
/// shown as text instead of run; plain numbers (`-73`) are left as they are.
enum ReportCSV {
    /// The rows, handed to `emit` a few hundred at a time (a large report is never one string).
    static func devices(_ devices: [DeviceRecord], run: RunInfo, emit: (String) -> Void) {
        let keys = Set(devices.flatMap { $0.captured.keys }).sorted()
        let secured = devices.contains { $0.security != nil }
        var text = row(["id", "address", "name", "outcome", "error_kind", "error_step", "error_message", "adapter", "rssi", "duration_ms",
                        "attempts", "run_id", "started", "station"]
                       + (secured ? ["security_level", "security_method", "security_bond"] : []) + keys) + "\r\n"
        for (i, d) in devices.enumerated() {
            var cells = [d.id, d.address ?? "", d.name ?? "", d.outcome.rawValue, d.error?.kind.rawValue ?? "", d.error?.step ?? "",
                         d.error?.message ?? d.skipReason ?? "", d.adapter ?? "", d.rssi.map(String.init) ?? "",
                         d.durationMs.map { String(format: "%.1f", $0) } ?? "", String(d.attempts), run.id, d.started?.iso ?? "", d.station ?? ""]
            if secured { cells += [d.security?.level.name ?? "", d.security?.method?.rawValue ?? "", d.security?.bond.rawValue ?? ""] }
            cells += keys.map { key in d.captured[key].map { run.shown(captured: key, $0) } ?? "" }
            text += row(cells) + "\r\n"
            if i % 512 == 511 {
                emit(text)
                text = ""
            }
        }
        emit(text)
    }

    /// One row: each cell neutralised, quoted when it needs it (its quotes doubled).
    static func row(_ cells: [String]) -> String {
        cells.map { raw in
            let s = neutralised(raw)
            return s.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" })
                ? "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : s
        }.joined(separator: ",")
    }

    /// `'` before a cell that begins like a formula.
    static func neutralised(_ cell: String) -> String {
        guard let first = cell.unicodeScalars.first else { return cell }
        // OWASP's characters, and their full-width forms, which some spreadsheets also accept.
        let triggers: Set<Unicode.Scalar> = ["=", "+", "-", "@", "\t", "\r", "\u{FF1D}", "\u{FF0B}", "\u{FF0D}", "\u{FF20}"]
        guard triggers.contains(first) else { return cell }
        if cell.wholeMatch(of: /[+-]?[0-9]+(\.[0-9]+)?/) != nil { return cell }
        return "'" + cell
    }
}
