import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What a run's journal starts with: enough to refuse resuming with another workflow or inventory.
public struct JournalHeader: Codable, Sendable, Equatable {
    public var runId: String
    public var workflow: FileRef
    public var inventory: FileRef
    public var adapters: [String]
    public var options: [String: String]
    public var started: String
    public var toolVersion: String
    /// True for the header a resumed run appends.
    public var resumed: Bool
}

/// One line of the journal (JSON). `type` says which fields are set:
/// `header`, `started` (device, attempt), `intent` (device, step, step_index: an irreversible write is
/// about to be sent), `outcome` (record), `end` (stopped).
public struct JournalLine: Codable, Sendable, Equatable {
    public var type: String
    public var at: String
    public var header: JournalHeader?
    public var device: String?
    public var attempt: Int?
    public var step: String?
    public var stepIndex: Int?
    public var record: DeviceRecord?
    public var stopped: StopInfo?

    public init(type: String, at: String, header: JournalHeader? = nil, device: String? = nil, attempt: Int? = nil,
                step: String? = nil, stepIndex: Int? = nil, record: DeviceRecord? = nil, stopped: StopInfo? = nil) {
        self.type = type
        self.at = at
        self.header = header
        self.device = device
        self.attempt = attempt
        self.step = step
        self.stepIndex = stepIndex
        self.record = record
        self.stopped = stopped
    }
}

/// The append-only journal of a run: JSON lines, made durable with fsync by group commit.
///
/// `append(_:durable: true)` returns only when the line (and every line before it) is on disk. Lines
/// that arrive while a write+fsync is under way are written together by the next one, so many devices
/// finishing at once share one fsync: durability does not cap throughput. File I/O runs on a dedicated
/// dispatch queue, never on the cooperative thread pool.
public actor Journal {
    public nonisolated let path: String
    private let fd: Int32
    private let fsyncEnabled: Bool
    private let io = DispatchQueue(label: "provision.journal")
    private var buffer = Data()
    private var waiters: [CheckedContinuation<Void, any Error>] = []
    private var flushing = false
    private var failure: FileError?
    /// Number of write+fsync batches (for benchmarks).
    public private(set) var batches = 0
    public private(set) var linesWritten = 0

    /// Opens (creating if needed) the journal for appending. With `fsync: false` lines are only written
    /// (they survive a crash of the process, not of the machine) — for benchmarks comparing the cost.
    public init(path: String, fsync: Bool = true) throws {
        let existed = FileManager.default.fileExists(atPath: path)
        self.path = path
        let fd = try AtomicFile.open(path, O_WRONLY | O_CREAT | O_APPEND)
        // One run per journal: a second station (or a second terminal) resuming the same journal
        // would interleave outcomes and could provision a device twice.
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let e = errno
            _ = Glibc.close(fd)
            throw e == EWOULDBLOCK
                ? FileError(path: path, operation: "lock (another provision run is using this journal)", errno: e)
                : FileError(path: path, operation: "lock", errno: e)
        }
        self.fd = fd
        self.fsyncEnabled = fsync
        if !existed { AtomicFile.syncDirectory(of: path) }
    }

    deinit { _ = Glibc.close(fd) }

    /// Appends a line; with `durable`, waits until it is on disk. The line is encoded by the caller's
    /// task (`RecordJSON`, off the actor), so devices finishing at once encode in parallel.
    public nonisolated func append(_ line: JournalLine, durable: Bool) async throws {
        var bytes = line.compactJSON()
        bytes.append(0x0A)
        try await append(encoded: bytes, durable: durable)
    }

    private func append(encoded bytes: [UInt8], durable: Bool) async throws {
        if let failure { throw failure }
        buffer.append(contentsOf: bytes)
        linesWritten += 1
        if durable {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                waiters.append(c)
                if !flushing { startFlush() }
            }
        } else if buffer.count >= 256 * 1024 && !flushing {
            startFlush()
        }
    }

    /// Writes and syncs everything appended so far.
    public func sync() async throws {
        if buffer.isEmpty && !flushing { return }
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
            waiters.append(c)
            if !flushing { startFlush() }
        }
    }

    private func startFlush() {
        flushing = true
        batches += 1
        let data = buffer
        let batch = waiters
        buffer = Data()
        waiters = []
        let fd = self.fd
        let path = self.path
        let doSync = fsyncEnabled
        io.async {
            var result: FileError?
            do {
                try AtomicFile.writeAll(fd, data, path: path)
                if doSync { try AtomicFile.fsyncFD(fd, path: path) }
            } catch let e as FileError {
                result = e
            } catch {
                result = FileError(path: path, operation: "write", errno: EIO)
            }
            Task { await self.finishFlush(batch, result) }
        }
    }

    private func finishFlush(_ batch: [CheckedContinuation<Void, any Error>], _ error: FileError?) {
        flushing = false
        if let error {
            failure = error
            for c in batch { c.resume(throwing: error) }
            for c in waiters { c.resume(throwing: error) }
            waiters = []
            return
        }
        for c in batch { c.resume() }
        if !waiters.isEmpty || buffer.count >= 256 * 1024 { startFlush() }
    }
}

/// A journal read back for `--resume`.
public struct JournalState: Sendable {
    public var headers: [JournalHeader]
    /// The last outcome recorded per device.
    public var outcomes: [String: DeviceRecord]
    /// Devices with an irreversible-write intent recorded after their last start, and the step.
    public var pendingIntents: [String: String]
    /// How many times each device was started.
    public var starts: [String: Int]
    /// True when the last line was cut short (the process died mid-write); it was ignored.
    public var truncatedTail: Bool

    /// Why a journal cannot be used.
    public struct ReadError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Reads a journal. A damaged last line is ignored (the process died while writing it); a damaged
    /// line anywhere else is an error.
    public static func read(path: String) throws -> JournalState {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ReadError(description: "cannot read journal \(path)")
        }
        let decoder = EngineJSON.decoder()
        var lines = data.split(separator: 0x0A, omittingEmptySubsequences: false)
        let endsWithNewline = data.last == 0x0A
        if endsWithNewline { lines.removeLast() }
        var state = JournalState(headers: [], outcomes: [:], pendingIntents: [:], starts: [:], truncatedTail: false)
        for (i, raw) in lines.enumerated() {
            if raw.isEmpty { continue }
            let line: JournalLine
            do {
                line = try decoder.decode(JournalLine.self, from: Data(raw))
            } catch {
                if i == lines.count - 1 {
                    state.truncatedTail = true
                    break
                }
                throw ReadError(description: "\(path):\(i + 1): journal line is damaged; refusing to guess what happened")
            }
            if i == lines.count - 1 && !endsWithNewline {
                // A complete JSON object without its newline: the write was cut after the object. Keep it.
                state.truncatedTail = false
            }
            switch line.type {
            case "header":
                if let h = line.header { state.headers.append(h) }
            case "started":
                if let d = line.device {
                    state.starts[d, default: 0] += 1
                    state.pendingIntents[d] = nil
                }
            case "intent":
                if let d = line.device { state.pendingIntents[d] = line.step ?? "step \(line.stepIndex ?? 0)" }
            case "outcome":
                if let r = line.record {
                    state.outcomes[r.id] = r
                    // An interrupted device may have been cut after its irreversible write went out:
                    // its intent stands.
                    if r.outcome != .interrupted { state.pendingIntents[r.id] = nil }
                }
            default:
                break
            }
        }
        guard !state.headers.isEmpty else {
            throw ReadError(description: "\(path): not a provision journal (no header line)")
        }
        return state
    }
}
