import BLE

/// Whole SMP frames out of the pieces a transport delivers (GATT notifications, or the writes of a
/// request on a device with reassembly): a frame is complete when the header's Data Length has arrived.
///
/// A piece that starts a frame with an impossible header (reserved bits set, longer than `maxFrame`)
/// is discarded with everything buffered, so the next piece starts afresh; `reset()` drops a partial
/// frame whose remainder will never come (its request was given up).
public struct SMPReassembler: Sendable {
    public enum Output: Sendable, Equatable {
        case frame(SMPFrame)
        /// Bytes thrown away, and why.
        case discarded(bytes: Int, reason: String)
    }

    /// The largest frame accepted (header included).
    public let maxFrame: Int
    private var buffer: [UInt8] = []

    public init(maxFrame: Int) {
        self.maxFrame = max(maxFrame, SMPHeader.size)
    }

    /// Bytes of a frame still incomplete.
    public var pending: Int { buffer.count }

    public mutating func feed(_ piece: [UInt8]) -> [Output] {
        buffer.append(contentsOf: piece)
        var out: [Output] = []
        while buffer.count >= SMPHeader.size {
            var reader = ByteReader(buffer.prefix(SMPHeader.size))
            let header: SMPHeader
            do {
                header = try SMPHeader(from: &reader)
            } catch {
                out.append(.discarded(bytes: buffer.count, reason: "\(error)"))
                buffer.removeAll()
                break
            }
            let total = SMPHeader.size + Int(header.length)
            guard total <= maxFrame else {
                out.append(.discarded(bytes: buffer.count, reason: "a frame of \(total) bytes exceeds the limit of \(maxFrame)"))
                buffer.removeAll()
                break
            }
            guard buffer.count >= total else { break }
            out.append(.frame(SMPFrame(header: header, data: Array(buffer[SMPHeader.size..<total]))))
            buffer.removeFirst(total)
        }
        return out
    }

    /// Drops a partial frame.
    public mutating func reset() -> Int {
        defer { buffer.removeAll() }
        return buffer.count
    }
}
