import BLE

/// Reassembles L2CAP frames from ACL fragments for one connection (Vol 3 Part A 7.2).
///
/// Accepts fragments larger than the controller's advertised buffer size (some controllers send
/// whole PDUs). A continuation without a start, a new start while a frame is incomplete, or a frame
/// that overruns its announced length is reported and dropped; it never traps.
public struct ACLReassembler: Sendable {
    public enum Output: Sendable, Equatable {
        case frame(L2CAPBasicFrame)
        /// Bytes were dropped; the text says why (for the log).
        case dropped(String)
    }

    private var buffer: [UInt8] = []
    private var expected: Int?

    public init() {}

    public var isIdle: Bool { expected == nil && buffer.isEmpty }

    public mutating func push(_ packet: ACLDataPacket) -> [Output] {
        var out: [Output] = []
        if packet.boundary.isFirst {
            if !buffer.isEmpty {
                out.append(.dropped("incomplete L2CAP frame (\(buffer.count) bytes) replaced by a new start"))
            }
            buffer = packet.data
            expected = nil
        } else {
            guard !buffer.isEmpty else {
                out.append(.dropped("ACL continuation of \(packet.data.count) bytes without a start"))
                return out
            }
            buffer.append(contentsOf: packet.data)
        }
        if expected == nil, buffer.count >= 4 {
            expected = 4 + Int(UInt16(buffer[0]) | UInt16(buffer[1]) << 8)
        }
        guard let total = expected else { return out }
        if buffer.count == total {
            do {
                out.append(.frame(try L2CAPBasicFrame(bytes: buffer)))
            } catch {
                out.append(.dropped("malformed L2CAP frame: \(error)"))
            }
            buffer = []
            expected = nil
        } else if buffer.count > total {
            out.append(.dropped("L2CAP frame overran its length (\(buffer.count) > \(total))"))
            buffer = []
            expected = nil
        }
        return out
    }

    /// Forgets a partial frame (the link went down).
    public mutating func reset() {
        buffer = []
        expected = nil
    }
}
