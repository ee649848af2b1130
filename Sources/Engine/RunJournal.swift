import Synchronization

/// The one writer of a run's record: every line the engine records — the header, the new
/// `needs_review` outcomes of a resume, each device's start, intents before irreversible writes,
/// outcomes, the end — goes through it to the run's store, stamped with its time. It keeps the
/// store's first failure: from then on the run starts no device (`onFailure` stops it) and its end is
/// not recorded (the record stays resumable).
final class RunJournal: Sendable {
    let store: any RunStore
    private let failure = Mutex<String?>(nil)
    private let onFailure: @Sendable (String) -> Void

    init(store: any RunStore, onFailure: @escaping @Sendable (String) -> Void) {
        self.store = store
        self.onFailure = onFailure
    }

    /// The first failure to record a device's start or outcome, if any.
    var failed: String? { failure.withLock { $0 } }

    func header(_ header: JournalHeader) async throws {
        try await store.record(.header(header, at: .now()))
    }

    /// A new `needs_review` outcome found by the plan (before any device starts).
    func review(_ record: DeviceRecord) async throws {
        try await store.record(.outcome(record, at: .now()))
    }

    /// A device starts. Throws (and the device must not start) when the start cannot be recorded.
    func started(device: String, attempt: Int) async throws {
        do {
            try await store.record(.started(device: device, attempt: attempt, at: .now()))
        } catch {
            failed("a device's start could not be journaled")
            throw error
        }
    }

    /// Returns when the intent is durable: only then may the irreversible write go out. A refused intent
    /// (a store that cannot record it, a line whose lease on the device is lost) is the device's: its
    /// write is not sent.
    func intent(device: String, step: String, stepIndex: Int) async throws {
        try await store.record(.intent(device: device, step: step, stepIndex: stepIndex, at: .now()))
    }

    /// The intent of one irreversible action of a step that checks its actions on the device (a `dfu`'s
    /// `test`, `reset`, `confirm`): the intent line's `step` is the step's name and the action joined by
    /// U+001F (which a step name cannot hold), so a resume knows which of them went out
    /// (`JournalState.journaledActions`) and hands them to the step instead of leaving the device for review.
    func intent(device: String, step: String, stepIndex: Int, action: String) async throws {
        try await intent(device: device, step: step + JournalState.actionSeparator + action, stepIndex: stepIndex)
    }

    /// A device's outcome, durable before it counts as done (concurrent devices share one fsync). A
    /// failure is the run's: no device starts after it. Returns the record's compact JSON (encoded once,
    /// here, for the journal line and the report).
    func outcome(_ record: DeviceRecord) async -> ArraySlice<UInt8>? {
        let line = JournalLine.outcome(record, at: .now())
        var bytes = RecordEncoder.compact(line)
        let json = JournalLine.record(inOutcome: bytes)
        bytes.append(0x0A)
        do {
            try await store.record(line, encoded: bytes)
        } catch {
            failed("\(error)")
        }
        return json
    }

    /// The run's end, unless the journal failed (its record ends where the failure left it).
    func end(stopped: StopInfo?) async {
        guard failed == nil else { return }
        try? await store.record(.end(stopped: stopped, at: .now()))
    }

    private func failed(_ error: String) {
        let first = failure.withLock { f -> Bool in
            guard f == nil else { return false }
            f = error
            return true
        }
        if first { onFailure(error) }
    }
}
