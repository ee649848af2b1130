import AsyncSupport
import Dispatch
import Foundation
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// The run store as a file: append-only JSON lines, made durable with fsync by group commit.
///
/// `record` returns, for a durable line, only when the line (and every line before it) is on disk.
/// Lines that arrive while a write+fsync is under way are written together by the next one, so many
/// devices finishing at once share one fsync: durability does not cap throughput. File I/O runs on a
/// dedicated dispatch queue, never on the cooperative thread pool.
///
/// One run per journal: the file is locked (`flock`) for as long as the journal is open. On resume a
/// torn last line (a crash or a full disk cut it) is cut off before anything is appended, and the cut
/// bytes are appended to `<journal>.torn` beside it.
///
/// A journal path that is a symbolic link is followed, and what goes with the journal (`.torn`, the
/// directory synced after its creation) goes beside its target. (The command line refuses a journal
/// that is not a regular file: it is read back on resume.)
public actor FileJournal: RunStore {
    public nonisolated let path: String
    public nonisolated var location: String { path }
    /// The file itself (symbolic links followed).
    private nonisolated let target: String
    /// Where the bytes of a torn last line go when resume cuts them.
    public nonisolated var tornPath: String { target + ".torn" }
    private var fd: Int32
    private let fsyncEnabled: Bool
    private let io = DispatchQueue(label: "provision.journal")
    private var buffer = Data()
    /// Callers waiting for their lines to be durable: granted nil when they are, or the write's error.
    private let waiters = WaiterQueue<Void, FileError?>()
    private var flushing = false
    private var failure: FileError?
    /// Number of write+fsync batches (for benchmarks).
    public private(set) var batches = 0
    public private(set) var linesWritten = 0

    /// Opens and locks the journal, creating it unless `create` is false (a journal to resume must
    /// exist). With `fsync: false` lines are only written (they survive a crash of the process, not of
    /// the machine) — for benchmarks comparing the cost.
    public init(path: String, fsync: Bool = true, create: Bool = true) throws {
        let target = try OutputPath.target(of: path)
        let existed = FileManager.default.fileExists(atPath: target)
        self.path = path
        self.target = target
        let fd = try FileIO.open(target, O_RDWR | O_APPEND | (create ? O_CREAT : 0))
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
        if !existed { FileIO.syncDirectory(of: target) }
    }

    deinit { if fd >= 0 { _ = Glibc.close(fd) } }

    // MARK: Opening

    public func open(_ mode: RunStoreMode) throws -> JournalContents {
        let data = try readAll()
        switch mode {
        case .start:
            guard data.isEmpty else {
                throw RunStoreError("journal \(path) already exists; resume it with --resume \(path), or choose another --journal path")
            }
            return JournalContents(lines: [])
        case .resume:
            let parsed = try JournalFile.parse(data, path: path)
            guard case .header? = parsed.lines.first else {
                throw RunStoreError("\(path): not a provision journal (no header line)")
            }
            switch parsed.tail {
            case .none:
                return JournalContents(lines: parsed.lines)
            case .missingNewline:
                // The last line is whole but its newline was not written: complete it, or the next
                // line would be glued to it.
                try FileIO.writeAll(fd, [0x0A], path: path)
                if fsyncEnabled { try FileIO.sync(fd, path: path) }
                return JournalContents(lines: parsed.lines)
            case .torn(let offset):
                let torn = data[offset...]
                try keepTorn(Data(torn))
                try cut(at: offset)
                return JournalContents(lines: parsed.lines,
                                       repair: "cut a torn last line (\(torn.count) bytes: a crash or a full disk stopped its write) from \(path); the bytes are kept in \(tornPath)")
            }
        }
    }

    private func readAll() throws -> Data {
        var out = Data()
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var offset: off_t = 0
        while true {
            let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, offset) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError(path: path, operation: "read", errno: errno)
            }
            if n == 0 { return out }
            out.append(contentsOf: chunk[0..<n])
            offset += off_t(n)
        }
    }

    /// Appends the torn bytes, then a newline, to `<journal>.torn`, durably, before the journal is cut.
    private func keepTorn(_ bytes: Data) throws {
        let tfd = try FileIO.open(tornPath, O_WRONLY | O_CREAT | O_APPEND)
        defer { FileIO.close(tfd) }
        var record = bytes
        record.append(0x0A)
        try FileIO.writeAll(tfd, record, path: tornPath)
        if fsyncEnabled {
            try FileIO.sync(tfd, path: tornPath)
            FileIO.syncDirectory(of: tornPath)
        }
    }

    private func cut(at offset: Int) throws {
        while ftruncate(fd, off_t(offset)) != 0 {
            if errno == EINTR { continue }
            throw FileError(path: path, operation: "truncate", errno: errno)
        }
        if fsyncEnabled { try FileIO.sync(fd, path: path) }
    }

    // MARK: Appending

    public nonisolated func record(_ line: JournalLine) async throws {
        // Encoded by the caller's task, off the actor, so devices finishing at once encode in parallel.
        var bytes = RecordEncoder.compact(line)
        bytes.append(0x0A)
        try await append(encoded: bytes, durable: line.isDurable)
    }

    /// A line its caller encoded (`RecordEncoder.compact`, with its newline).
    public nonisolated func record(_ line: JournalLine, encoded: [UInt8]) async throws {
        try await append(encoded: encoded, durable: line.isDurable)
    }

    private func append(encoded bytes: [UInt8], durable: Bool) async throws {
        if let failure { throw failure }
        guard fd >= 0 else { throw FileError(path: path, operation: "append to closed journal", errno: EBADF) }
        buffer.append(contentsOf: bytes)
        linesWritten += 1
        if durable {
            try await waitUntilWritten()
        } else if buffer.count >= 256 * 1024 && !flushing {
            startFlush()
        }
    }

    /// Writes and syncs everything appended so far.
    public func flush() async throws {
        if let failure { throw failure }
        if buffer.isEmpty && !flushing { return }
        try await waitUntilWritten()
    }

    public func close() async {
        try? await flush()
        if fd >= 0 { FileIO.close(fd) }
        fd = -1
    }

    /// Waits until what is buffered now is on disk (the next write takes it, or the one after the
    /// write under way). The wait ignores cancellation: the line is being written either way, and its
    /// caller must learn whether it is durable.
    private func waitUntilWritten() async throws {
        let ticket = waiters.enqueue()
        if !flushing { startFlush() }
        if case .granted(let error?) = await waiters.wait(ticket, cancellation: .isIgnored) { throw error }
    }

    private func startFlush() {
        flushing = true
        batches += 1
        let data = buffer
        let batch = waiters.withLock { _, w in w.tickets }
        buffer = Data()
        let fd = self.fd
        let path = self.path
        let doSync = fsyncEnabled
        io.async {
            var result: FileError?
            do throws(FileError) {
                try FileIO.writeAll(fd, data, path: path)
                if doSync { try FileIO.sync(fd, path: path) }
            } catch {
                result = error
            }
            Task { await self.finishFlush(batch, result) }
        }
    }

    private func finishFlush(_ batch: [WaitTicket], _ error: FileError?) {
        flushing = false
        if let error {
            // Poisoned: nothing more is written, so the file keeps no gap (at worst a torn last line,
            // which the next resume cuts).
            failure = error
            buffer = Data()
            waiters.withLock { _, w in _ = w.resumeAll(error) }
            return
        }
        let more = waiters.withLock { _, w in
            for t in batch { w.resume(t, nil) }
            return !w.isEmpty
        }
        if more || buffer.count >= 256 * 1024 { startFlush() }
    }
}

/// The journal file's format: JSON lines, read back for resume.
package enum JournalFile {
    /// What follows the last newline.
    package enum Tail: Equatable {
        case none
        /// A whole line without its newline.
        case missingNewline
        /// A line cut short (a crash or a full disk): it starts at this byte offset.
        case torn(offset: Int)
    }

    /// Parses a journal. A last line that does not parse is torn (reported, not an error); a damaged
    /// line anywhere else is an error: what happened there cannot be known.
    package static func parse(_ data: Data, path: String) throws(RunStoreError) -> (lines: [JournalLine], tail: Tail) {
        let decoder = EngineJSON.decoder()
        var lines: [JournalLine] = []
        var tail = Tail.none
        var start = data.startIndex
        var number = 0
        while start < data.endIndex {
            number += 1
            let newline = data[start...].firstIndex(of: 0x0A)
            let end = newline ?? data.endIndex
            let raw = data[start..<end]
            if !raw.isEmpty {
                do {
                    lines.append(try decoder.decode(JournalLine.self, from: raw))
                    if newline == nil { tail = .missingNewline }
                } catch let e as JournalLine.UnknownType {
                    throw RunStoreError("\(path):\(number): \(e.description); refusing to guess what happened")
                } catch {
                    if newline == nil {
                        tail = .torn(offset: start - data.startIndex)
                    } else {
                        throw RunStoreError("\(path):\(number): journal line is damaged; refusing to guess what happened")
                    }
                }
            }
            guard let newline else { break }
            start = data.index(after: newline)
        }
        return (lines, tail)
    }
}
