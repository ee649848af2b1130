import Engine
import Foundation
import LineDatabase

extension LineOutcome {
    /// A device record as the line stores it: the typed columns an auditor queries, and the record as
    /// the report holds it (its secrets were redacted by the engine before it got here).
    ///
    /// `firmware` is the captured value named `firmware`, else `fw` (the reference workflow's name).
    init(_ record: DeviceRecord, attempt: Int, finished: WallTime) {
        let kind = LineOutcome.Kind(rawValue: record.outcome.rawValue) ?? .failed
        self.init(device: record.id, attempt: attempt, outcome: kind, errorKind: record.error?.kind.rawValue,
                  errorStep: record.error?.step, errorMessage: record.error?.message,
                  firmware: (record.captured["firmware"] ?? record.captured["fw"])?.text, adapter: record.adapter, rssi: record.rssi,
                  started: record.started?.date, finished: finished.date,
                  durationMs: record.durationMs, record: record.jsonText())
    }

    /// A spooled outcome, as the line stores it.
    public init(spooled entry: LineSpool.Entry) {
        self.init(entry.record, attempt: entry.attempt, finished: entry.at)
    }
}
