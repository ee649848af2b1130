import Engine
import Foundation
import Synchronization
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// A station's outcomes on its own disk: each outcome is made durable here first (the station's record,
/// as a file journal is), then written to the line in the background — at once while the line answers,
/// or when it is back. The file is a journal (`FileJournal`: JSON lines, group-committed fsyncs, locked
/// while in use): a `header` naming the run, the station and the line, then one `outcome` line per
/// outcome, the record as the report holds it (secrets already redacted) with its claim's attempt.
///
/// Which outcomes reached the line is kept in memory only: writing an outcome again is harmless (the
/// line answers that this station already recorded it), so `provision line flush SPOOL` sends them all.
/// The file is removed when the station closes with every outcome on the line and none refused; an
/// outcome the line refused (another station claimed the device since) stays on record in it.
public final class LineSpool: Sendable {
    public let path: String
    public let header: Header

    private struct State {
        var opening: Task<FileJournal, any Error>?
        /// Outcomes not on the line yet, in the order they were spooled.
        var pending: [String: Entry] = [:]
        var order: [String] = []
        var refused: [(entry: Entry, why: String)] = []
    }

    private let state = Mutex(State())

    /// Whose spool it is.
    public struct Header: Sendable, Equatable {
        public var run: String
        public var station: String
        /// The line, as messages show it (secrets redacted).
        public var line: String
        public var workflow: FileRef
        public var inventory: FileRef

        public init(run: String, station: String, line: String, workflow: FileRef, inventory: FileRef) {
            self.run = run
            self.station = station
            self.line = line
            self.workflow = workflow
            self.inventory = inventory
        }

        var journalHeader: JournalHeader {
            JournalHeader(runId: run, workflow: workflow, inventory: inventory, adapters: [],
                          options: ["spool": "outcomes of a line station", "station": station, "line": line],
                          started: .now(), toolVersion: "", resumed: false)
        }

        init?(_ h: JournalHeader) {
            guard let station = h.options["station"], let line = h.options["line"] else { return nil }
            self.init(run: h.runId, station: station, line: line, workflow: h.workflow, inventory: h.inventory)
        }
    }

    /// One spooled outcome.
    public struct Entry: Sendable, Equatable {
        public var device: String
        public var attempt: Int
        public var record: DeviceRecord
        /// When the outcome was known.
        public var at: WallTime

        public init(device: String, attempt: Int, record: DeviceRecord, at: WallTime) {
            self.device = device
            self.attempt = attempt
            self.record = record
            self.at = at
        }

        var key: String { "\(attempt)/\(device)" }
    }

    /// A spool to be created at `path` when the first outcome needs it.
    public init(path: String, header: Header) {
        self.path = path
        self.header = header
    }

    private init(path: String, header: Header, journal: FileJournal, entries: [Entry]) {
        self.path = path
        self.header = header
        state.withLock { s in
            s.opening = Task { journal }
            for e in entries where s.pending.updateValue(e, forKey: e.key) == nil { s.order.append(e.key) }
        }
    }

    /// Why a spool file cannot be read.
    public struct ReadError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Opens a spool a station left (for `provision line flush`), locked so that no running station
    /// writes it meanwhile; every outcome in it is to be written (again). A torn last line (a crash
    /// mid-write) is cut as a journal's is; a damaged line anywhere else is an error.
    public static func open(existing path: String) async throws -> LineSpool {
        guard FileManager.default.fileExists(atPath: path) else { throw ReadError(description: "\(path): no such spool") }
        let journal: FileJournal
        let contents: JournalContents
        do {
            journal = try FileJournal(path: path, fsync: true, create: false)
            contents = try await journal.open(.resume)
        } catch {
            throw ReadError(description: "\(error)")
        }
        guard case .header(let h, _)? = contents.lines.first, let header = Header(h) else {
            await journal.close()
            throw ReadError(description: "\(path): not a provision spool (its header names no station)")
        }
        var entries: [Entry] = []
        for line in contents.lines {
            if case .outcome(let r, let at) = line { entries.append(Entry(device: r.id, attempt: r.attempts, record: r, at: at)) }
        }
        return LineSpool(path: path, header: header, journal: journal, entries: entries)
    }

    /// Outcomes not on the line yet, in the order they were spooled.
    public var unwritten: [Entry] { state.withLock { s in s.order.compactMap { s.pending[$0] } } }
    public var unwrittenCount: Int { state.withLock { $0.pending.count } }
    /// Outcomes the line refused (another station holds the device now), with why.
    public var refused: [(entry: Entry, why: String)] { state.withLock { $0.refused } }

    /// Keeps an outcome durably: returns once it is fsynced (outcomes appended at once share an fsync).
    public func append(_ entry: Entry) async throws {
        let journal = try await opened()
        var record = entry.record
        record.attempts = entry.attempt
        state.withLock { s in
            if s.pending.updateValue(entry, forKey: entry.key) == nil { s.order.append(entry.key) }
        }
        do {
            try await journal.record(.outcome(record, at: entry.at))
        } catch {
            state.withLock { s in
                s.pending[entry.key] = nil
                s.order.removeAll { $0 == entry.key }
            }
            throw error
        }
    }

    /// Notes that an outcome reached the line, or was refused by it (`refusal` says why).
    public func markWritten(_ entry: Entry, refusal: String? = nil) {
        state.withLock { s in
            guard s.pending.removeValue(forKey: entry.key) != nil else { return }
            if let i = s.order.firstIndex(of: entry.key) { s.order.remove(at: i) }
            if let refusal { s.refused.append((entry, refusal)) }
        }
    }

    /// Releases the file; removes it when every outcome in it reached the line and none was refused
    /// (a refused one stays on record beside the report).
    public func close() async {
        guard let opening = state.withLock({ $0.opening }), let journal = try? await opening.value else { return }
        await journal.close()
        let done = state.withLock { s -> Bool in
            s.opening = nil
            return s.pending.isEmpty && s.refused.isEmpty
        }
        if done {
            unlink(path)
            FileIO.syncDirectory(of: path)
        }
    }

    /// The journal, created (with its header) by the first append; appends arriving meanwhile wait for it.
    private func opened() async throws -> FileJournal {
        let (path, header) = (self.path, self.header)
        let task = state.withLock { s -> Task<FileJournal, any Error> in
            if let opening = s.opening { return opening }
            let t = Task {
                let j = try FileJournal(path: path, fsync: true, create: true)
                _ = try await j.open(.start)
                try await j.record(.header(header.journalHeader, at: .now()))
                return j
            }
            s.opening = t
            return t
        }
        do {
            return try await task.value
        } catch {
            state.withLock { s in if s.opening == task { s.opening = nil } }
            throw error
        }
    }
}
