import Engine
import Workflow

/// What of each device a query keeps while a report streams past (`provision report`): the parts its
/// condition, its grouping and its output read, and nothing else. The steps of 100,000 devices are
/// most of a report's size; a query that names no step never holds them.
///
/// The id, outcome and scalar fields (address, name, adapter, RSSI, times, counts) are always kept,
/// and the error without its causes; steps when a `step.…` field is named; measurements when a
/// `measurement…` field is named (or their outcomes for `--compare`, the failed ones for the summary);
/// captured values when named (all of them for CSV and `--compare`).
struct ReportProjection {
    /// Field names the query reads (`--where`, `--group-by`).
    var names: Set<String>
    /// Keep every captured value (CSV columns, comparisons).
    var allCaptured = false
    /// Keep each measurement's name and outcome (comparisons).
    var measurementOutcomes = false
    /// Keep the failed measurements (the summary counts them).
    var failedMeasurements = false
    /// Keep the whole record.
    var whole = false

    init(names: Set<String>) {
        self.names = names
    }

    /// Every record whole (the HTML page reads all of it).
    static var everything: ReportProjection {
        var p = ReportProjection(names: [])
        p.whole = true
        return p
    }

    /// Parts of a record not decoded at all (they are dropped anyway): the steps unless a step is
    /// named, the measurements unless something of them is kept.
    var omitted: [String: RecordDecoder.Omitted] {
        guard !whole else { return [:] }
        var out: [String: RecordDecoder.Omitted] = [:]
        if !names.contains(where: { $0.hasPrefix("step.") }) { out["steps"] = .emptyList }
        if !names.contains(where: { $0.hasPrefix("measurement") }), !measurementOutcomes, !failedMeasurements { out["measurements"] = .absent }
        return out
    }

    func apply(_ d: DeviceRecord) -> DeviceRecord {
        guard !whole else { return d }
        var s = d
        if names.contains(where: { $0.hasPrefix("step.") }) {
            // `step.STEP.outcome`, `.duration_ms` and `.attempts` are read by position: the rest goes.
            s.steps = d.steps.map { StepRecord(name: "", kind: "", outcome: $0.outcome, attempts: $0.attempts, startMs: 0, durationMs: $0.durationMs) }
        } else {
            s.steps = []
        }
        if names.contains(where: { $0.hasPrefix("measurement") }) {
            // kept whole: values, outcomes and counts are read
        } else if measurementOutcomes {
            s.measurements = d.measurements?.map { m in
                var slim = m
                slim.result = MeasurementResult(name: m.result.name, value: nil, limits: MeasurementLimits(), unit: nil,
                                                outcome: m.result.outcome, message: "")
                return slim
            }
        } else if failedMeasurements {
            s.measurements = d.measurements?.filter { !$0.result.passed }
        } else {
            s.measurements = nil
        }
        if !allCaptured {
            s.captured = d.captured.filter { names.contains($0.key) || names.contains("captured." + $0.key) }
        }
        s.error?.causes = []
        return s
    }
}
