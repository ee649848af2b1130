import Foundation
import Synchronization

/// Writes the simulator's ATT-level trace: one `ATTTraceRecord` a line, as JSON lines or as text.
/// Records stream through a `TraceFile` (bounded memory). Safe to call from any task.
public final class ATTTraceWriter: Sendable {
    /// The line format.
    public enum Format: String, Sendable, CaseIterable {
        /// One JSON object a line (`ATTTraceRecord.jsonLine`).
        case jsonLines = "jsonl"
        /// One line of text a record (`ATTTraceRecord.textLine`).
        case text
    }

    public let format: Format
    private let file: TraceFile
    /// One encoder for every line; JSONEncoder is not documented as safe to share across threads.
    private let encoder: Mutex<JSONEncoder>

    /// Creates (or truncates) `path`.
    public init(path: String, format: Format, bufferLimit: Int = 64 * 1024) throws(TraceError) {
        self.format = format
        file = try TraceFile(path: path, bufferLimit: bufferLimit)
        encoder = Mutex(ATTTraceRecord.encoder)
    }

    public var path: String { file.path }

    /// Appends one record as a line.
    public func write(_ record: ATTTraceRecord) throws(TraceError) {
        var line: [UInt8]
        switch format {
        case .jsonLines:
            line = encoder.withLock { e in (try? e.encode(record)).map { [UInt8]($0) } ?? [] }
        case .text:
            line = Array(record.textLine.utf8)
        }
        line.append(0x0A)
        try file.append(line)
    }

    /// Appends the record of one raw ATT PDU seen now, or at `timestamp` (µs since the Unix epoch).
    public func write(pdu: [UInt8], link: String, direction: TraceDirection, timestamp: Int64 = TraceTime.nowMicroseconds()) throws(TraceError) {
        try write(ATTTraceRecord(pdu: pdu, link: link, direction: direction, timestamp: timestamp))
    }

    public func flush() throws(TraceError) { try file.flush() }

    public func close() throws(TraceError) { try file.close() }
}
