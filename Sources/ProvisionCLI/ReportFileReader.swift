import Engine
import Foundation
import Support
import Workflow

/// Reads a report file as a stream (docs/report.md, "Reading a report"): memory is bounded by the
/// largest device record, not by the run.
///
/// A report is one JSON object whose `devices` list holds one record per device (written first, keys
/// sorted). It is read in two passes over a 1 MiB buffer:
/// 1. `header()`: the top level is scanned, the `devices` list skipped byte by byte without being
///    parsed (strings and brackets only), and `schema`, `run` and `summary` read: a query knows the
///    run (and the types of its captured values) before the first device.
/// 2. `devices(_:)`: each element of `devices` is cut out, parsed into a `JSONTape` (the whole record
///    must be JSON), decoded with the engine's `RecordDecoder` (all of it, or without the parts a query
///    does not read: `omitting`) and checked (`ReportChecks`) before it is handed on; a device id
///    seen before is refused.
///
/// Everything in the file is hostile: any error names the file's line and column (and the JSON path)
/// and stops the reading; nothing traps. The second pass may be run again (a query that prints whole
/// records reads the devices twice); a file that changed in between is refused.
struct ReportFileReader {
    /// The file as the user named it (for messages), and its absolute path.
    let label: String
    let path: String

    /// A device record larger than this is refused (a record is a few kilobytes; a run's largest, with
    /// long values and many steps, tens of kilobytes).
    static let largestRecord = 16 << 20
    /// The top-level values other than `devices` (`run`, `summary`) are read whole; bounded too.
    static let largestHeaderValue = 16 << 20

    /// What pass 1 found: the top level's values and where the devices list starts.
    struct Header {
        var schema: String?
        /// The bytes of `run` and `summary`, with the offset each starts at.
        var run: (offset: Int, bytes: [UInt8])?
        var summary: (offset: Int, bytes: [UInt8])?
        /// Byte offset of the `[` of `devices`; nil when the report has no devices list.
        var devicesOffset: Int?
        /// What the file was when it was read (size, modification time): pass 2 refuses a changed file.
        var identity: FileIdentity
    }

    struct FileIdentity: Equatable {
        var device: UInt64, inode: UInt64, size: Int64, modified: Int64, modifiedNanoseconds: Int64
    }

    /// Why the file cannot be read: a message in words and, when the problem is at a place in the
    /// file, its byte offset (turned into a line and column by `problem(_:)`).
    struct Failure: Error {
        var message: String
        var offset: Int?
        var path: [JSONTape.PathComponent] = []
    }

    // MARK: - Pass 1: the top level

    /// Scans the top level: `schema`, `run` and `summary` whole, `devices` skipped.
    func header() throws(Failure) -> Header {
        let stream = try ByteStream(path: path)
        defer { stream.close() }
        var header = Header(identity: stream.identity)
        try stream.skipSpace()
        guard try stream.peek() != nil else { throw Failure(message: "the file is empty, not a report") }
        guard try stream.peek() == UInt8(ascii: "{") else {
            // A list, a number, `null`: JSON, but not a report (or not JSON at all).
            throw Failure(message: "not a provision report: it is not a JSON object", offset: stream.offset)
        }
        stream.advance()
        var first = true
        var seen: Set<String> = []
        while true {
            try stream.skipSpace()
            guard let c = try stream.peek() else { throw Failure(message: "not JSON (the text ends inside the top-level object)", offset: stream.offset) }
            if c == UInt8(ascii: "}") { stream.advance(); break }
            if !first {
                guard c == UInt8(ascii: ",") else { throw Failure(message: "not JSON (expected `,` or `}`, found `\(Character(Unicode.Scalar(c)))`)", offset: stream.offset) }
                stream.advance()
                try stream.skipSpace()
            }
            first = false
            let keyOffset = stream.offset
            let keyBytes = try stream.value(limit: 4096)
            guard keyBytes.first == UInt8(ascii: "\""), let key = try? JSONTape(keyBytes).string(0) else {
                let found = keyBytes.first.map { "`\(Character(Unicode.Scalar($0)))`" } ?? "the end of the text"
                throw Failure(message: "not JSON (expected a member name in quotes, found \(found))", offset: keyOffset)
            }
            try stream.skipSpace()
            guard try stream.peek() == UInt8(ascii: ":") else { throw Failure(message: "not JSON (expected `:` after `\(key)`)", offset: stream.offset) }
            stream.advance()
            try stream.skipSpace()
            let valueOffset = stream.offset
            guard seen.insert(key).inserted || !["devices", "run", "schema", "summary"].contains(key) else {
                throw Failure(message: "`\(key)` is given twice", offset: keyOffset)
            }
            switch key {
            case "devices":
                guard try stream.peek() == UInt8(ascii: "[") else {
                    throw Failure(message: "`devices` is not a list", offset: valueOffset, path: [.key("devices")])
                }
                header.devicesOffset = valueOffset
                try stream.skipValue()
            case "schema":
                let bytes = try stream.value(limit: 4096)
                guard let tape = try? JSONTape(bytes), tape.tokens.first?.kind == .string, let s = try? tape.string(0) else {
                    throw Failure(message: "`schema` is not text", offset: valueOffset, path: [.key("schema")])
                }
                header.schema = s
            case "run":
                header.run = (valueOffset, try stream.value(limit: Self.largestHeaderValue))
            case "summary":
                header.summary = (valueOffset, try stream.value(limit: Self.largestHeaderValue))
            default:
                try stream.skipValue()
            }
        }
        try stream.skipSpace()
        if try stream.peek() != nil { throw Failure(message: "not JSON (more after the top-level object)", offset: stream.offset) }
        return header
    }

    // MARK: - Pass 2: the devices

    /// Reads every device record in order: decoded, checked against `checks` (ranges, capture types,
    /// duplicate ids), then handed to `visit` (which may throw to stop, e.g. when the task is cancelled).
    func devices(_ header: Header, checks: ReportChecks, omitting: [String: RecordDecoder.Omitted] = [:],
                 _ visit: (DeviceRecord) throws -> Void) throws -> Void {
        guard let start = header.devicesOffset else { return }
        let stream = try ByteStream(path: path)
        defer { stream.close() }
        guard stream.identity == header.identity else {
            throw Failure(message: "the file changed while it was being read")
        }
        try stream.seek(to: start)
        guard try stream.peek() == UInt8(ascii: "[") else { throw Failure(message: "the file changed while it was being read") }
        stream.advance()
        let decoder = RecordDecoder()
        var ids = ReportChecks.DeviceIDs()
        var index = 0
        while true {
            try stream.skipSpace()
            guard let c = try stream.peek() else { throw Failure(message: "not JSON (the text ends inside `devices`)", offset: stream.offset) }
            if c == UInt8(ascii: "]") { break }
            if index > 0 {
                guard c == UInt8(ascii: ",") else {
                    throw Failure(message: "not JSON (expected `,` or `]` after a device)", offset: stream.offset, path: [.key("devices")])
                }
                stream.advance()
                try stream.skipSpace()
            }
            let recordOffset = stream.offset
            let bytes = try stream.value(limit: Self.largestRecord, what: "device record")
            let path: [JSONTape.PathComponent] = [.key("devices"), .index(index)]
            let tape: JSONTape
            do {
                tape = try JSONTape(bytes)
            } catch {
                throw Failure(message: "not JSON (\(error.message))", offset: recordOffset + error.offset, path: path)
            }
            let record: DeviceRecord
            do {
                record = try decoder.decode(DeviceRecord.self, from: tape, omitting: omitting)
            } catch {
                throw Failure(message: error.message, offset: recordOffset + error.offset, path: path + error.path)
            }
            if let problem = checks.check(record) ?? ids.insert(record.id, index: index) {
                let at = tape.locate(problem.path).map { tape.offset(of: $0) } ?? 0
                throw Failure(message: problem.message, offset: recordOffset + at, path: path + problem.path)
            }
            try visit(record)
            index += 1
        }
    }

    /// A failure as one line: `not a valid provision.report/2 report: line 12, column 7: `devices[3].duration_ms`: …`.
    func describe(_ failure: Failure) -> String {
        guard let offset = failure.offset else { return failure.message }
        let (line, column) = Self.position(of: offset, in: path)
        let at = failure.path.isEmpty ? "" : "`\(RecordDecodingError.text(failure.path))`: "
        return "line \(line), column \(column): \(at)\(failure.message)"
    }

    /// Line and column (characters) of a byte offset: the file is read again up to there (only when
    /// there is an error to show).
    static func position(of offset: Int, in path: String) -> (line: Int, column: Int) {
        guard let stream = try? ByteStream(path: path) else { return (1, 1) }
        defer { stream.close() }
        var line = 1, column = 1
        var left = offset
        while left > 0, let chunk = try? stream.chunk(max: left), !chunk.isEmpty {
            for b in chunk where b & 0xC0 != 0x80 {
                if b == 0x0A { line += 1; column = 1 } else { column += 1 }
            }
            left -= chunk.count
        }
        return (line, column)
    }
}

/// A file read forward through a 1 MiB buffer, for the report reader: peek, advance, skip whitespace,
/// cut out or skip one JSON value (strings and brackets followed, nothing parsed).
final class ByteStream {
    private let fd: Int32
    let identity: ReportFileReader.FileIdentity
    private var buffer: [UInt8]
    private var start = 0, end = 0
    /// File offset of `buffer[0]`.
    private var base = 0
    private var atEOF = false

    static let bufferSize = 1 << 20

    init(path: String) throws(ReportFileReader.Failure) {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ReportFileReader.Failure(message: "cannot read the file: \(String(cString: strerror(errno)))") }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let why = String(cString: strerror(errno))
            Glibc.close(fd)
            throw ReportFileReader.Failure(message: "cannot read the file: \(why)")
        }
        guard st.st_mode & S_IFMT == S_IFREG else {
            Glibc.close(fd)
            throw ReportFileReader.Failure(message: st.st_mode & S_IFMT == S_IFDIR ? "is a directory, not a report" : "is not a regular file")
        }
        self.fd = fd
        identity = ReportFileReader.FileIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size),
                                                 modified: Int64(st.st_mtim.tv_sec), modifiedNanoseconds: Int64(st.st_mtim.tv_nsec))
        buffer = [UInt8](repeating: 0, count: Self.bufferSize)
    }

    func close() { Glibc.close(fd) }

    /// The file offset of the next byte.
    var offset: Int { base + start }

    /// Reads more into the buffer, keeping unread bytes; false at the end of the file.
    private func fill() throws(ReportFileReader.Failure) -> Bool {
        if atEOF { return false }
        if start > 0 {
            // Move the unread bytes to the front.
            let unread = end - start
            if unread > 0 {
                buffer.withUnsafeMutableBufferPointer { p in
                    guard let b = p.baseAddress else { return }
                    memmove(b, b + start, unread)
                }
            }
            base += start
            start = 0
            end = unread
        }
        if end == buffer.count { buffer.append(contentsOf: [UInt8](repeating: 0, count: buffer.count)) }
        while true {
            let n = buffer.withUnsafeMutableBufferPointer { p in Glibc.read(fd, p.baseAddress.map { $0 + end }, p.count - end) }
            if n < 0 {
                if errno == EINTR { continue }
                throw ReportFileReader.Failure(message: "cannot read the file: \(String(cString: strerror(errno)))", offset: offset)
            }
            if n == 0 {
                atEOF = true
                return false
            }
            end += n
            return true
        }
    }

    /// The next byte, not consumed; nil at the end.
    func peek() throws(ReportFileReader.Failure) -> UInt8? {
        if start == end, try !fill() { return nil }
        return buffer[start]
    }

    /// Consumes the byte `peek` returned.
    func advance() { if start < end { start += 1 } }

    func skipSpace() throws(ReportFileReader.Failure) {
        while true {
            while start < end {
                let b = buffer[start]
                guard b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 else { return }
                start += 1
            }
            if try !fill() { return }
        }
    }

    /// Moves to file offset `target` (forward or back).
    func seek(to target: Int) throws(ReportFileReader.Failure) {
        guard lseek(fd, off_t(target), SEEK_SET) == off_t(target) else {
            throw ReportFileReader.Failure(message: "cannot read the file: \(String(cString: strerror(errno)))")
        }
        base = target
        start = 0
        end = 0
        atEOF = false
    }

    /// Up to `max` bytes from here (consumed); empty at the end.
    func chunk(max: Int) throws(ReportFileReader.Failure) -> ArraySlice<UInt8> {
        if start == end, try !fill() { return [] }
        let n = min(max, end - start)
        defer { start += n }
        return buffer[start..<(start + n)]
    }

    /// The bytes of the JSON value starting here, consumed; at most `limit` of them.
    func value(limit: Int, what: String = "value") throws(ReportFileReader.Failure) -> [UInt8] {
        var out: [UInt8] = []
        try scan(limit: limit, what: what) { out.append(contentsOf: $0) }
        return out
    }

    /// Skips the JSON value starting here.
    func skipValue() throws(ReportFileReader.Failure) {
        try scan(limit: .max, what: "value") { _ in }
    }

    /// Follows one value: a string to its closing quote, a container to its matching bracket (strings
    /// inside followed, escapes skipped), a number or literal to the next delimiter. The bytes go to
    /// `take` in runs; the grammar inside is left to the parser of whoever keeps them.
    private func scan(limit: Int, what: String, take: (ArraySlice<UInt8>) -> Void) throws(ReportFileReader.Failure) {
        let valueStart = offset
        guard let first = try peek() else { throw ReportFileReader.Failure(message: "not JSON (the text ends where a value was expected)", offset: offset) }
        enum Mode { case container, string, scalar }
        let mode: Mode = first == UInt8(ascii: "{") || first == UInt8(ascii: "[") ? .container : first == UInt8(ascii: "\"") ? .string : .scalar
        var depth = 0
        // A string's opening quote is taken before the loop, which then runs inside the string.
        var inString = false, escape = false
        if mode == .string {
            take(buffer[start..<(start + 1)])
            start += 1
            inString = true
        }
        var taken = mode == .string ? 1 : 0
        var done = false
        while !done {
            if start == end, try !fill() {
                if mode == .scalar, taken > 0 { return }  // a number or literal at the end of the file
                throw ReportFileReader.Failure(message: "not JSON (the text ends inside a \(what))", offset: valueStart)
            }
            var i = start
            let stop = end
            buffer.withUnsafeBufferPointer { p in
                while i < stop {
                    let b = p[i]
                    if inString {
                        if escape {
                            escape = false
                        } else if b == 0x5C {
                            escape = true
                        } else if b == UInt8(ascii: "\"") {
                            inString = false
                            if mode == .string { i += 1; done = true; return }
                        }
                    } else if mode == .container {
                        switch b {
                        case UInt8(ascii: "\""): inString = true
                        case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                        case UInt8(ascii: "}"), UInt8(ascii: "]"):
                            depth -= 1
                            if depth == 0 { i += 1; done = true; return }
                        default: break
                        }
                    } else if b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 || b == UInt8(ascii: ",") || b == UInt8(ascii: "}")
                                || b == UInt8(ascii: "]") {
                        done = true  // the end of a number or literal (the delimiter is not part of it)
                        return
                    }
                    i += 1
                }
            }
            taken += i - start
            guard taken <= limit else {
                throw ReportFileReader.Failure(message: "a \(what) larger than \(limit >= 1 << 20 ? "\(limit >> 20) MiB" : "\(limit) bytes")", offset: valueStart)
            }
            take(buffer[start..<i])
            start = i
        }
    }
}
