import Engine
import Foundation
import LineDatabase

extension LineOutcome {
    /// A device record as the line stores it: the typed columns an auditor queries, and the record as
    /// the report holds it (its secrets were redacted by the engine before it got here).
    ///
    /// `firmware` is the captured value named `firmware`, else `fw` (the reference workflow's name).
    init(_ record: DeviceRecord, attempt: Int, finished: String) {
        let kind = LineOutcome.Kind(rawValue: record.outcome.rawValue) ?? .failed
        self.init(device: record.id, attempt: attempt, outcome: kind, errorKind: record.error?.kind.rawValue,
                  errorStep: record.error?.step, errorMessage: record.error?.message,
                  firmware: (record.captured["firmware"] ?? record.captured["fw"])?.text, adapter: record.adapter, rssi: record.rssi,
                  started: record.started.flatMap(Self.date), finished: Self.date(finished) ?? Date(),
                  durationMs: record.durationMs, record: record.jsonText())
    }

    /// A spooled outcome, as the line stores it.
    public init(spooled entry: LineSpool.Entry) {
        self.init(entry.record, attempt: entry.attempt, finished: entry.at)
    }

    /// An ISO 8601 time as the engine writes it (with or without fractional seconds).
    static func date(_ text: String) -> Date? {
        (try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
            ?? (try? Date(text, strategy: Date.ISO8601FormatStyle()))
    }
}
