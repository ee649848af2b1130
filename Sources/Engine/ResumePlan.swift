import Workflow

/// What a run does with each selected device, decided before anything touches a radio: a pure value
/// computed from the journal of earlier runs (none for a new run), the selection, and what the
/// workflow says is irreversible.
///
/// The rules, per device (first that applies):
/// 1. An irreversible write was announced (`intent`) and no final outcome followed: the write may have
///    reached the device; it is never sent again blindly. If the step declares `confirm`: `confirm` —
///    run, asking the device (the confirm read) before anything is sent; else `needsReview`.
/// 2. A recorded `needs_review` outcome stays so (carried over), whatever the options — unless the
///    device is to be asked again (`recheck`, `provision review --reread`) and the step in doubt declares
///    `confirm`: then `confirm`, as in rule 1.
/// 3. A recorded `succeeded`, or `failed` without `retryFailed`: carried over, not touched.
/// 4. `failed` with `retryFailed`: run again, unless the record shows an irreversible step was
///    attempted (then carried over as `needs_review`) and no operator marked it failed on review.
/// 5. Otherwise (never started, started without an outcome, `interrupted`): run; `attempt` counts
///    earlier starts, `resumed` when there were any.
public struct ResumePlan: Sendable, Equatable {
    /// What happens to one device.
    public enum Decision: Sendable, Equatable {
        /// Run the workflow.
        case run(attempt: Int, resumed: Bool)
        /// Run the workflow, reading step `step`'s `confirm` before anything is sent: an earlier run
        /// announced that irreversible step and never learned its outcome (`StepSupervisor`, reconciling).
        case confirm(attempt: Int, step: Int)
        /// Report the journal's outcome; do not touch the device. (Boxed, as the other record: an entry
        /// of a device to run stays small.)
        indirect case carryOver(DeviceRecord)
        /// The device may have received an irreversible write whose outcome is unknown: record this
        /// outcome in the journal and do not touch the device.
        indirect case needsReview(DeviceRecord)
    }

    public struct Entry: Sendable, Equatable {
        public var device: InventoryDevice
        public var decision: Decision
    }

    /// The run id to continue (nil: a new run).
    public var runID: String?
    public var resumed: Bool
    /// The selection to record in the header: nil when every inventory device is selected.
    public var selected: [String]?
    /// One entry per selected device, in inventory order.
    public var entries: [Entry]
    /// Actions of checked steps the journal holds per device (`JournalState.journaledActions`).
    public var journaledActions: [String: [Int: Set<String>]] = [:]

    /// The devices to run, in order, with their attempt number and whether they are resumed.
    public var toRun: [(device: InventoryDevice, attempt: Int, resumed: Bool)] {
        entries.compactMap { e in
            switch e.decision {
            case .run(let attempt, let resumed): return (e.device, attempt, resumed)
            case .confirm(let attempt, _): return (e.device, attempt, true)
            case .carryOver, .needsReview: return nil
            }
        }
    }

    /// Why a run cannot resume this journal.
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        public var description: String
    }

    /// What the plan needs to know about the run.
    public struct Inputs: Sendable {
        public var workflow: FileRef
        public var inventory: FileRef
        /// Every device of the inventory, in order.
        public var inventoryDevices: [InventoryDevice]
        /// The devices this run selected (`--limit`), in inventory order.
        public var selection: [InventoryDevice]
        /// The workflow's irreversible steps: index → name.
        public var irreversibleSteps: [Int: String]
        /// The irreversible steps that declare a `confirm` read (indices).
        public var confirmable: Set<Int>
        public var retryFailed: Bool
        /// Devices recorded `needs_review` to ask again (their step in doubt's `confirm` read).
        public var recheck: Set<String> = []

        public init(workflow: FileRef, inventory: FileRef, inventoryDevices: [InventoryDevice], selection: [InventoryDevice],
                    irreversibleSteps: [Int: String], confirmable: Set<Int> = [], retryFailed: Bool) {
            self.confirmable = confirmable
            self.workflow = workflow
            self.inventory = inventory
            self.inventoryDevices = inventoryDevices
            self.selection = selection
            self.irreversibleSteps = irreversibleSteps
            self.retryFailed = retryFailed
        }
    }

    /// The plan for a run: `journal` is what the store holds (nil for a new run).
    public static func make(_ inputs: Inputs, journal: JournalState?) throws(Refusal) -> ResumePlan {
        let whole = inputs.selection.count == inputs.inventoryDevices.count
        guard let journal else {
            return ResumePlan(runID: nil, resumed: false, selected: whole ? nil : inputs.selection.map(\.id),
                              entries: inputs.selection.map { Entry(device: $0, decision: .run(attempt: 1, resumed: false)) })
        }
        guard let first = journal.headers.first else { throw Refusal(description: "the journal has no header") }
        if first.workflow.sha256 != inputs.workflow.sha256 {
            throw Refusal(description: "the journal was written for workflow \(first.workflow.path) with sha256 \(first.workflow.sha256.prefix(12))…, but \(inputs.workflow.path) now has sha256 \(inputs.workflow.sha256.prefix(12))… (the workflow changed; start a new run with a new journal)")
        }
        if first.inventory.sha256 != inputs.inventory.sha256 {
            throw Refusal(description: "the journal was written for inventory \(first.inventory.path) with sha256 \(first.inventory.sha256.prefix(12))…, but \(inputs.inventory.path) now has sha256 \(inputs.inventory.sha256.prefix(12))… (the inventory changed; start a new run with a new journal)")
        }
        let devices = try selection(inputs, journal: first, whole: whole)
        let entries = devices.map { Entry(device: $0, decision: decide($0, journal, inputs)) }
        return ResumePlan(runID: first.runId, resumed: true, selected: first.selected, entries: entries,
                          journaledActions: journal.journaledActions)
    }

    /// The journal's selection is the run's: a resume without `--limit` uses it; a different one is refused.
    private static func selection(_ inputs: Inputs, journal header: JournalHeader, whole: Bool) throws(Refusal) -> [InventoryDevice] {
        let limit = header.options["limit"].map { " (--limit \($0))" } ?? ""
        guard let recorded = header.selected else {
            if whole { return inputs.selection }
            throw Refusal(description: "the journal's run selected every device of the inventory (\(inputs.inventoryDevices.count)); this resume selects \(inputs.selection.count). Resume without --limit (a resume continues the run it resumes)")
        }
        if inputs.selection.map(\.id) == recorded { return inputs.selection }
        if whole {
            let wanted = Set(recorded)
            return inputs.inventoryDevices.filter { wanted.contains($0.id) }
        }
        throw Refusal(description: "the journal's run selected \(recorded.count) device(s)\(limit); this resume selects \(inputs.selection.count) others. Resume with the same --limit, or without --limit to use the journal's selection")
    }

    private static func decide(_ d: InventoryDevice, _ journal: JournalState, _ inputs: Inputs) -> Decision {
        let starts = journal.starts[d.id] ?? 0
        if let step = journal.pendingIntents[d.id] {
            if let index = inputs.confirmable.sorted().first(where: { inputs.irreversibleSteps[$0] == step }) {
                return .confirm(attempt: starts + 1, step: index)
            }
            var r = DeviceRecord(id: d.id, address: d.address?.description, name: d.name, outcome: .failed, attempts: max(1, starts),
                                 error: FailureRecord(kind: .needsReview, step: step,
                                                      message: "an earlier run stopped after sending the irreversible step `\(step)` to this device and before its outcome was known; settle it with `provision review`: ask it again by its confirm read, or mark what you find on it"),
                                 resumed: true)
            r.carriedOver = nil
            return .needsReview(r)
        }
        if var r = journal.outcomes[d.id] {
            if inputs.recheck.contains(d.id), r.error?.kind == .needsReview, let step = r.error?.step,
               let index = inputs.confirmable.sorted().first(where: { inputs.irreversibleSteps[$0] == step }) {
                return .confirm(attempt: starts + 1, step: index)
            }
            if r.error?.kind == .needsReview || r.outcome == .succeeded || (r.outcome == .failed && !inputs.retryFailed) {
                r.carriedOver = true
                return .carryOver(r)
            }
            if r.outcome == .failed, r.review == nil,
               let sent = inputs.irreversibleSteps.keys.sorted().first(where: { $0 < r.steps.count && r.steps[$0].attempts > 0 }) {
                // It failed after an irreversible step went out: running it again could repeat that step.
                let name = inputs.irreversibleSteps[sent] ?? "step \(sent + 1)"
                r.carriedOver = true
                r.error = FailureRecord(kind: .needsReview, step: name,
                                        message: "failed after the irreversible step `\(name)` was sent; not run again automatically (\(r.error?.message ?? "see the earlier report"))")
                return .carryOver(r)
            }
        }
        return .run(attempt: starts + 1, resumed: starts > 0)
    }
}
