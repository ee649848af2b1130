/// Where a run keeps its durable record: the run header, devices started, intents before irreversible
/// writes, outcomes, the end. The engine writes through this contract only, so a run does not know
/// whether its record is a file (`FileJournal`, the default) or something else (a line database).
///
/// The contract:
/// - `open(.start)` refuses a store that already holds a run; `open(.resume)` returns everything it
///   holds, parsed, after repairing what a crash can leave (the file journal cuts a torn last line).
///   Nothing is appended before `open` returns.
/// - `record(_:)` returns only when the line is as durable as `JournalLine.isDurable` says: an
///   `intent` is durable before the irreversible write it announces may be sent; an `outcome` before
///   the device counts as done. Lines become durable in the order they were recorded.
/// - After a write fails, every later `record` and `flush` throws the same error (a store never holds
///   a gap: what was written before the failure stays a valid, resumable record).
/// - `close()` makes everything recorded durable if it can, and releases the store (its lock).
public protocol RunStore: Sendable {
    /// Where the store is, as messages and the report (`run.journal`) name it.
    var location: String { get }
    /// Prepares the store for a new run or a resume; see the type's contract.
    func open(_ mode: RunStoreMode) async throws -> JournalContents
    /// Appends a line; returns when it is durable if the line's kind requires it.
    func record(_ line: JournalLine) async throws
    /// Makes every line recorded so far durable.
    func flush() async throws
    /// Flushes what it can and releases the store.
    func close() async
}

/// Whether a run starts in a store or resumes the run it holds.
public enum RunStoreMode: Sendable, Equatable {
    case start
    case resume
}

/// What a store holds, read back for `--resume`.
public struct JournalContents: Sendable, Equatable {
    public var lines: [JournalLine]
    /// What was repaired before reading (a torn last line cut and kept aside), for the operator.
    public var repair: String?

    public init(lines: [JournalLine], repair: String? = nil) {
        self.lines = lines
        self.repair = repair
    }
}

/// Why a store cannot be used.
public struct RunStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

extension JournalLine {
    /// Whether `RunStore.record` must make the line durable before returning: everything but
    /// `started` (a start without an outcome is run again on resume, so losing it costs nothing).
    public var isDurable: Bool {
        if case .started = self { return false }
        return true
    }
}

extension RunStore {
    func header(_ header: JournalHeader) async throws {
        try await record(.header(header, at: WallClock.iso(WallClock.now())))
    }

    func started(device: String, attempt: Int) async throws {
        try await record(.started(device: device, attempt: attempt, at: WallClock.iso(WallClock.now())))
    }

    /// Returns when the intent is durable: only then may the irreversible write go out.
    func intent(device: String, step: String, stepIndex: Int) async throws {
        try await record(.intent(device: device, step: step, stepIndex: stepIndex, at: WallClock.iso(WallClock.now())))
    }

    /// The intent of one irreversible action of a step that checks its actions on the device (a `dfu`'s
    /// `test`, `reset`, `confirm`): written as the step's name and the action, joined by U+001F (which a
    /// step name cannot hold), so a resume knows which of them went out (`JournalState.journaledActions`).
    func intent(device: String, step: String, stepIndex: Int, action: String) async throws {
        try await intent(device: device, step: step + JournalState.actionSeparator + action, stepIndex: stepIndex)
    }

    func outcome(_ record: DeviceRecord) async throws {
        try await self.record(.outcome(record, at: WallClock.iso(WallClock.now())))
    }

    func end(stopped: StopInfo?) async throws {
        try await record(.end(stopped: stopped, at: WallClock.iso(WallClock.now())))
    }
}
