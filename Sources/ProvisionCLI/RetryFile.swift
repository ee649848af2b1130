import Engine
import Foundation
import SystemIO

/// The retry file `provision run` leaves beside its report when devices did not succeed (as Ansible
/// leaves `site.retry`): `reports/x.json` → `reports/x.retry`, one device id a line, for
/// `provision run … --limit @reports/x.retry`.
///
/// It lists the devices that failed, were interrupted or never started. A `needs_review` device is
/// not listed, only named in a `#` comment (`--limit @file` skips comments): an irreversible step may
/// have reached it, so it is checked by hand before it is run again. When every device succeeded, no
/// retry file is written, and one left at that path by the report this run replaces is removed.
enum RetryFile {
    /// The retry file of a report.
    static func path(forReport report: String) -> String {
        RunPaths.replacingExtension(report, with: "retry")
    }

    /// The file's text, or nil when every device succeeded.
    static func text(_ report: RunReport, reportPath: String) -> String? {
        text(run: report.run, notSucceeded: report.devices.filter { $0.outcome != .succeeded }.map(DeviceBrief.init), reportPath: reportPath)
    }

    /// The file's text for a run's devices that did not succeed, or nil when there are none.
    static func text(run: RunInfo, notSucceeded notOK: [DeviceBrief], reportPath: String) -> String? {
        guard !notOK.isEmpty else { return nil }
        var lines = ["# \(run.id) (\(run.workflow.name ?? run.workflow.path)): the devices that did not succeed.",
                     "# Run them again with: provision run … --limit @\(path(forReport: reportPath))"]
        for d in notOK {
            // An id is one line of the file: one with a line break cannot be listed.
            guard !d.id.contains(where: { $0.isNewline }) else { continue }
            if d.errorKind == .needsReview {
                lines.append("# \(d.id) needs_review: not listed; an irreversible step may have reached it, check it before running it again")
            } else {
                lines.append(d.id)
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Writes (or removes) the retry file of a run at `path` (absolute), by the output-path rule: a
    /// regular file (a link's target) is replaced atomically, or removed when no device is left to
    /// retry; a FIFO or a device is written as it is, and never removed.
    static func write(_ result: RunResult, reportPath: String, to path: String) throws {
        if let text = text(run: result.run, notSucceeded: result.notSucceeded, reportPath: reportPath) {
            try AtomicFile.write(Array(text.utf8), to: path)
        } else if case .regularFile(let target) = try OutputPath.resolve(path), FileManager.default.fileExists(atPath: target) {
            try FileManager.default.removeItem(atPath: target)
        }
    }
}
