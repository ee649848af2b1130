import Engine
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A station's outcomes that could not be written to the line yet (the database was away), kept on
/// disk beside the station's report until they are: append-only JSON lines, each made durable (fsync)
/// before the device counts as done, exactly like the file journal's outcome lines.
///
/// Lines: one `header` (run, station, line), then `outcome` lines (device, attempt, the record as the
/// report holds it, secrets already redacted) and `written` lines (the outcome reached the line, or
/// the line refused it because another station holds the device now). An outcome without a `written`
/// line is still to be written; `provision line flush SPOOL` writes what a station could not.
/// The file is created on first use and removed once every outcome in it is written.
public actor LineSpool {
    public nonisolated let path: String
    public nonisolated let header: Header
    private var fd: Int32 = -1
    /// Outcomes not written yet, in the order they were spooled.
    public private(set) var unwritten: [Entry] = []
    /// Outcomes the line refused (another station holds the device now), with why.
    public private(set) var refused: [(entry: Entry, why: String)] = []
    private var written = 0

    /// Whose spool it is.
    public struct Header: Codable, Sendable, Equatable {
        public var run: String
        public var station: String
        /// The line, as messages show it (secrets redacted).
        public var line: String

        public init(run: String, station: String, line: String) {
            self.run = run
            self.station = station
            self.line = line
        }
    }

    /// One spooled outcome.
    public struct Entry: Sendable, Equatable {
        public var device: String
        public var attempt: Int
        public var record: DeviceRecord
        /// When the outcome was known.
        public var at: String

        public init(device: String, attempt: Int, record: DeviceRecord, at: String) {
            self.device = device
            self.attempt = attempt
            self.record = record
            self.at = at
        }
    }

    /// One line of the file.
    private struct Line: Codable {
        var type: String
        var at: String
        var header: Header?
        var device: String?
        var attempt: Int?
        var record: DeviceRecord?
        var result: String?
        var message: String?
    }

    /// A spool to be created at `path` when the first outcome needs it.
    public init(path: String, header: Header) {
        self.init(path: path, header: header, unwritten: [])
    }

    private init(path: String, header: Header, unwritten: [Entry]) {
        self.path = path
        self.header = header
        self.unwritten = unwritten
    }

    /// Why a spool file cannot be read.
    public struct ReadError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Opens an existing spool (for `provision line flush`): its header and the outcomes not written yet.
    /// A torn last line (a crash mid-append) is ignored; a damaged line anywhere else is an error.
    public static func open(existing path: String) throws -> LineSpool {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ReadError(description: "\(path): cannot read the spool (no such file, or no permission)")
        }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        var lines: [Line] = []
        var number = 0
        let parts = data.split(separator: 0x0A, omittingEmptySubsequences: false)
        for (i, raw) in parts.enumerated() {
            number += 1
            if raw.isEmpty { continue }
            do {
                lines.append(try decoder.decode(Line.self, from: Data(raw)))
            } catch {
                // The last line without its newline was being written when the station died.
                if i == parts.count - 1 { break }
                throw ReadError(description: "\(path):\(number): damaged spool line; refusing to guess what it held")
            }
        }
        guard let first = lines.first, first.type == "header", let header = first.header else {
            throw ReadError(description: "\(path): not a provision spool (no header line)")
        }
        var pending: [String: Entry] = [:]
        var order: [String] = []
        for line in lines.dropFirst() {
            guard let device = line.device, let attempt = line.attempt else { continue }
            let key = "\(attempt)/\(device)"
            switch line.type {
            case "outcome":
                guard let record = line.record else { continue }
                if pending[key] == nil { order.append(key) }
                pending[key] = Entry(device: device, attempt: attempt, record: record, at: line.at)
            case "written":
                pending[key] = nil
            default:
                continue
            }
        }
        return LineSpool(path: path, header: header, unwritten: order.compactMap { pending[$0] })
    }

    /// Keeps an outcome durably (returns after fsync).
    public func append(_ entry: Entry) throws {
        try ensureOpen()
        try write(Line(type: "outcome", at: entry.at, device: entry.device, attempt: entry.attempt, record: entry.record))
        unwritten.append(entry)
    }

    /// Notes that an outcome reached the line (`result` says how), or was refused (`refusal`).
    public func markWritten(_ entry: Entry, result: String, refusal: String? = nil) throws {
        try ensureOpen()
        try write(Line(type: "written", at: WallClock.iso(Date()), device: entry.device, attempt: entry.attempt,
                       result: result, message: refusal))
        unwritten.removeAll { $0.device == entry.device && $0.attempt == entry.attempt }
        if let refusal { refused.append((entry, refusal)) }
        written += 1
    }

    /// True when the file exists and holds nothing left to write.
    public var isDrained: Bool { unwritten.isEmpty }

    /// Closes the file; removes it when every outcome in it was written and none was refused (a refused
    /// one stays on record beside the report).
    public func close() {
        if fd >= 0 {
            _ = Glibc.close(fd)
            fd = -1
        }
        if unwritten.isEmpty, refused.isEmpty, FileManager.default.fileExists(atPath: path) {
            unlink(path)
            AtomicFile.syncDirectory(of: path)
        }
    }

    private func ensureOpen() throws {
        guard fd < 0 else { return }
        let existed = FileManager.default.fileExists(atPath: path)
        fd = try AtomicFile.open(path, O_WRONLY | O_APPEND | O_CREAT)
        if !existed {
            try write(Line(type: "header", at: WallClock.iso(Date()), header: header))
            AtomicFile.syncDirectory(of: path)
        }
    }

    private func write(_ line: Line) throws {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var data = try encoder.encode(line)
        data.append(0x0A)
        try AtomicFile.writeAll(fd, data, path: path)
        try AtomicFile.fsyncFD(fd, path: path)
    }
}
