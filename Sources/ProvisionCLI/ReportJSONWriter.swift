import Engine
import Foundation
import Support

/// `provision report --json`: a report written device by device as it streams past, byte for byte as
/// `RunReport.writeJSON` writes one held whole (keys sorted, `devices` first, pretty-printed as
/// `JSONEncoder` does), so a 100,000-device report is never held in memory to be printed.
///
/// Each record is encoded by the engine's `RecordEncoder` on its own and indented to its depth: JSON
/// strings hold no raw newline, so putting the indentation after every newline is exact.
final class ReportJSONWriter {
    private let run: RunInfo
    private let schema: String
    private let summary: Summary
    private let emit: (String) -> Void
    private var buffer: [UInt8] = []
    private var count = 0

    init(run: RunInfo, schema: String, summary: Summary, emit: @escaping (String) -> Void) {
        self.run = run
        self.schema = schema
        self.summary = summary
        self.emit = emit
        buffer.reserveCapacity(1 << 20)
        buffer.append(contentsOf: "{\n  \"devices\" : [".utf8)
    }

    /// The next device.
    func device(_ d: DeviceRecord) {
        if count > 0 { buffer.append(UInt8(ascii: ",")) }
        buffer.append(contentsOf: "\n    ".utf8)
        Self.indented(RecordEncoder.pretty(d), by: 4, into: &buffer)
        count += 1
        if buffer.count >= 1 << 20 { flush() }
    }

    /// The rest of the document (and its final newline).
    func finish() {
        if count == 0 { buffer.append(0x0A) }
        buffer.append(contentsOf: "\n  ],\n  \"run\" : ".utf8)
        Self.indented(RecordEncoder.pretty(run), by: 2, into: &buffer)
        buffer.append(contentsOf: ",\n  \"schema\" : ".utf8)
        JSONString.append(schema, to: &buffer)
        buffer.append(contentsOf: ",\n  \"summary\" : ".utf8)
        Self.indented(RecordEncoder.pretty(summary), by: 2, into: &buffer)
        buffer.append(contentsOf: "\n}\n".utf8)
        flush()
    }

    private func flush() {
        emit(String(decoding: buffer, as: UTF8.self))
        buffer.removeAll(keepingCapacity: true)
    }

    /// `json` with `spaces` more indentation on every line but the first, except on the empty line
    /// `JSONEncoder` writes inside an empty list or object (`[\n\n  ]`), which stays empty.
    private static func indented(_ json: [UInt8], by spaces: Int, into out: inout [UInt8]) {
        for (i, b) in json.enumerated() {
            out.append(b)
            if b == 0x0A, i + 1 < json.count, json[i + 1] != 0x0A { for _ in 0..<spaces { out.append(0x20) } }
        }
    }
}
