import BLE

/// One packet taken off an H4 stream: its indicator and its bytes (header included, indicator not).
public struct H4Packet: Sendable, Equatable {
    public var type: H4PacketType
    public var bytes: [UInt8]

    public init(type: H4PacketType, bytes: [UInt8]) {
        self.type = type
        self.bytes = bytes
    }

    /// The packet as sent on the wire, with its indicator.
    public var framed: [UInt8] { [type.rawValue] + bytes }
}

/// An incremental H4 decoder (Core v5.4 Vol 4 Part A): feed it whatever a read returned, get whole
/// packets back. Partial packets wait for more bytes. A byte that is not a packet indicator is
/// skipped (counted in `discardedBytes`) so the decoder resynchronises on the next indicator.
public struct H4Decoder: Sendable {
    private var buffer: [UInt8] = []
    private var start = 0
    /// Bytes thrown away while looking for a packet indicator.
    public private(set) var discardedBytes = 0

    public init() {}

    /// Bytes held back waiting for the rest of a packet.
    public var pendingBytes: Int { buffer.count - start }

    public mutating func feed<C: Collection>(_ bytes: C) -> [H4Packet] where C.Element == UInt8 {
        buffer.append(contentsOf: bytes)
        var packets: [H4Packet] = []
        while start < buffer.count {
            let type = H4PacketType(rawValue: buffer[start])
            let headerLength: Int
            switch type {
            case .command: headerLength = 3
            case .acl: headerLength = 4
            case .sco: headerLength = 3
            case .event: headerLength = 2
            case .iso: headerLength = 4
            default:
                discardedBytes += 1
                start += 1
                continue
            }
            let available = buffer.count - start - 1
            guard available >= headerLength else { break }
            let h = start + 1
            let payloadLength: Int
            switch type {
            case .command: payloadLength = Int(buffer[h + 2])
            case .acl: payloadLength = Int(UInt16(buffer[h + 2]) | UInt16(buffer[h + 3]) << 8)
            case .sco: payloadLength = Int(buffer[h + 2])
            case .event: payloadLength = Int(buffer[h + 1])
            default: payloadLength = Int(UInt16(buffer[h + 2]) | UInt16(buffer[h + 3] & 0x3F) << 8)
            }
            let total = headerLength + payloadLength
            guard available >= total else { break }
            packets.append(H4Packet(type: type, bytes: Array(buffer[h..<h + total])))
            start = h + total
        }
        if start > 0 && (start >= buffer.count || start > 4096) {
            buffer.removeFirst(start)
            start = 0
        }
        return packets
    }
}
