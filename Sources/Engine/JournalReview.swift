/// The devices of a journal whose outcome is in doubt — an irreversible step announced (`intent`)
/// with no final outcome after it, or a recorded `needs_review` — with what the journal knows of each,
/// and the outcome line an operator's resolution appends (`provision review`). A pure fold over the
/// journal's lines.
public struct JournalReview: Sendable, Equatable {
    public struct Unit: Sendable, Equatable {
        public var device: String
        /// The irreversible step announced last without a final outcome after it, and when.
        public var intentStep: String?
        public var intentAt: WallTime?
        /// How many times the device was started, over every run of the journal.
        public var starts: Int
        /// Its last recorded outcome (`needs_review`, or `interrupted` after the intent), if any.
        public var record: DeviceRecord?

        public init(device: String, intentStep: String?, intentAt: WallTime?, starts: Int, record: DeviceRecord?) {
            self.device = device
            self.intentStep = intentStep
            self.intentAt = intentAt
            self.starts = starts
            self.record = record
        }

        /// The step in doubt.
        public var step: String? { intentStep ?? record?.error?.step }

        /// What the journal shows, in one sentence.
        public var evidence: String {
            var parts: [String] = []
            if let step = intentStep {
                parts.append("the intent to send `\(step)` (\(intentAt?.iso ?? "?")) has no final outcome")
            }
            if let r = record {
                if let e = r.error { parts.append("last outcome \(r.outcome.rawValue) (\(e.kind.rawValue)): \(e.message)") }
                let ran = r.steps.filter { $0.outcome == .succeeded }.map(\.name)
                if let last = ran.last { parts.append("last step that succeeded: `\(last)`") }
            }
            parts.append("started \(starts) time\(starts == 1 ? "" : "s")")
            return parts.joined(separator: "; ")
        }
    }

    /// In the order the devices first appear in the journal.
    public var units: [Unit]

    public init(lines: [JournalLine]) {
        var order: [String] = []
        var intents: [String: (step: String, at: WallTime)] = [:]
        var records: [String: DeviceRecord] = [:]
        var starts: [String: Int] = [:]
        for line in lines {
            if let d = line.device, starts[d] == nil, records[d] == nil, intents[d] == nil { order.append(d) }
            switch line {
            case .started(let d, _, _):
                starts[d, default: 0] += 1
            case .intent(let d, let step, _, let at):
                intents[d] = (step, at)
            case .outcome(let r, _):
                records[r.id] = r
                if r.outcome != .interrupted { intents[r.id] = nil }
            case .header, .end:
                break
            }
        }
        units = order.compactMap { d in
            let record = records[d]
            let intent = intents[d]
            guard intent != nil || record?.error?.kind == .needsReview else { return nil }
            return Unit(device: d, intentStep: intent?.step, intentAt: intent?.at, starts: starts[d] ?? 0, record: record)
        }
    }

    /// The outcome an operator's resolution records for `unit`: `succeeded` (the write took effect and
    /// the device is good) or `failed` (it did not, or the device was reset), with the review beside it.
    public static func resolution(of unit: Unit, as outcome: DeviceOutcome, note: String, by: String, at: WallTime) -> DeviceRecord {
        var r = unit.record ?? DeviceRecord(id: unit.device, address: nil, name: nil, outcome: outcome, attempts: unit.starts)
        let previous = unit.record?.error
            ?? FailureRecord(kind: .needsReview, step: unit.step, message: "the intent to send `\(unit.step ?? "?")` has no final outcome")
        r.outcome = outcome
        r.error = outcome == .failed
            ? FailureRecord(kind: .verifyFailed, step: unit.step, message: "marked failed on review by \(by): \(note)") : nil
        r.carriedOver = nil
        r.review = ReviewRecord(at: at, by: by, note: note, resolution: outcome, previous: previous)
        return r
    }
}
