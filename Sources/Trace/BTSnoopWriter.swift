/// Writes HCI traffic as a btsnoop file (H4 datalink) that Wireshark opens: `--trace PATH` on HCI
/// adapters. Records stream through a `TraceFile`, so memory stays bounded however long the run.
/// Safe to call from any task; records are written in the order the calls happen.
public final class BTSnoopWriter: Sendable {
    private let file: TraceFile

    /// Creates (or truncates) `path` and writes the btsnoop header.
    public init(path: String, bufferLimit: Int = 64 * 1024) throws(TraceError) {
        file = try TraceFile(path: path, bufferLimit: bufferLimit)
        try file.append(BTSnoop.header)
    }

    public var path: String { file.path }

    /// Appends one record.
    public func write(_ record: BTSnoopRecord) throws(TraceError) {
        try file.append(record.encoded)
    }

    /// Appends one H4 packet (indicator byte first) seen now, or at `timestamp` (µs since the Unix epoch).
    public func write(_ packet: [UInt8], direction: TraceDirection, timestamp: Int64 = TraceTime.nowMicroseconds()) throws(TraceError) {
        try write(BTSnoopRecord(direction: direction, packet: packet, timestamp: timestamp))
    }

    /// Writes out buffered records (for a reader that wants the file as it is now).
    public func flush() throws(TraceError) { try file.flush() }

    /// Flushes and closes the file.
    public func close() throws(TraceError) { try file.close() }
}
