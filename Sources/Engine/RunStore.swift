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
/// - `claims` is the store's `DeviceClaims` when several stations share it (a line), nil otherwise: the
///   scheduler claims devices through it instead of taking the plan's in order.
///
/// Who does what: the station (the command line's run scope) opens the store once and closes it once;
/// the engine receives it opened (`OpenedRunStore`) and writes to it through one writer, `RunJournal`.
public protocol RunStore: Sendable {
    /// Where the store is, as messages and the report (`run.journal`) name it.
    var location: String { get }
    /// The store's claims, when it is shared by several stations; nil for a store of one station.
    var claims: (any DeviceClaims)? { get }
    /// Prepares the store for a new run or a resume; see the type's contract.
    func open(_ mode: RunStoreMode) async throws -> JournalContents
    /// Appends a line; returns when it is durable if the line's kind requires it.
    func record(_ line: JournalLine) async throws
    /// The same, with the line already encoded as one line of compact JSON with its newline
    /// (`RecordEncoder.compact`): a store that writes JSON lines writes these bytes.
    func record(_ line: JournalLine, encoded: [UInt8]) async throws
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
    /// A store of one station offers no claims.
    public var claims: (any DeviceClaims)? { nil }

    /// A store that does not keep JSON lines records the line as it is.
    public func record(_ line: JournalLine, encoded: [UInt8]) async throws { try await record(line) }
}

/// A run store the station opened for a run, with what it held: the engine records into it and never
/// opens or closes it.
public struct OpenedRunStore: Sendable {
    public let store: any RunStore
    public let mode: RunStoreMode
    public let contents: JournalContents

    public init(store: any RunStore, mode: RunStoreMode, contents: JournalContents) {
        self.store = store
        self.mode = mode
        self.contents = contents
    }

    /// Opens `store` for a run: `.start` refuses a store that holds a run; `.resume` returns its lines,
    /// repaired. On failure the store is closed again and the error is the one the run reports.
    public static func open(_ store: any RunStore, _ mode: RunStoreMode) async throws(Runner.StartError) -> OpenedRunStore {
        do {
            return OpenedRunStore(store: store, mode: mode, contents: try await store.open(mode))
        } catch {
            await store.close()
            throw Runner.StartError(description: mode == .resume ? "cannot resume: \(error)" : "\(error)")
        }
    }

    /// Opens the run's file journal at `path`: created for a new run (it must not hold one), or the
    /// existing one for a resume (`resume`), repaired and read.
    public static func fileJournal(path: String, fsync: Bool, resume: Bool) async throws(Runner.StartError) -> OpenedRunStore {
        let journal: FileJournal
        do {
            journal = try FileJournal(path: path, fsync: fsync, create: !resume)
        } catch {
            throw Runner.StartError(description: resume ? "cannot resume: \(error)" : "cannot open journal: \(error)")
        }
        return try await open(journal, resume ? .resume : .start)
    }
}
