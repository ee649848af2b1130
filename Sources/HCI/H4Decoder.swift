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
///
/// Decoding what a controller sends (`fromController`), it also refuses a header that makes no sense
/// — a length a packet of that kind cannot have — rather than wait for bytes that belong to the
/// packets after it: a command, SCO or ISO packet (this host sets up none), an event code 0x00, an
/// event whose length is not the one its code (or LE subevent) has, Number Of Completed Packets whose
/// length does not match its count, an ACL packet with broadcast flags, a handle above 0x0EFF or a
/// length above `maxACLLength`. Such a header is skipped byte by byte, like any other byte that is not
/// a packet, until a packet that makes sense starts: after a UART lost a byte, or was opened in the
/// middle of a packet, the decoder finds the next packet instead of trusting a length read from the
/// wrong place.
public struct H4Decoder: Sendable {
    private var buffer: [UInt8] = []
    private var start = 0
    /// Bytes thrown away while looking for a packet indicator.
    public private(set) var discardedBytes = 0
    /// Validate headers as a host receiving from a controller.
    public let fromController: Bool
    /// Longest ACL payload accepted from the controller.
    public let maxACLLength: Int

    public init(fromController: Bool = false, maxACLLength: Int = 1024) {
        self.fromController = fromController
        self.maxACLLength = maxACLLength
    }

    /// Bytes held back waiting for the rest of a packet.
    public var pendingBytes: Int { buffer.count - start }

    /// Throws away the bytes held back (a partial packet).
    public mutating func flush() {
        discardedBytes += pendingBytes
        buffer.removeAll(keepingCapacity: true)
        start = 0
    }

    public mutating func feed<C: Collection>(_ bytes: C) -> [H4Packet] where C.Element == UInt8 {
        buffer.append(contentsOf: bytes)
        var packets: [H4Packet] = []
        scan: while start < buffer.count {
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
            if fromController {
                switch sense(type, header: h, payloadLength: payloadLength, available: available - headerLength) {
                case .senseless:
                    discardedBytes += 1
                    start += 1
                    continue scan
                case .needMore:
                    break scan
                case .plausible:
                    break
                }
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

    private enum Sense {
        case plausible, senseless, needMore
    }

    /// Whether a header from a controller can start a packet. `available`: payload bytes already here.
    private func sense(_ type: H4PacketType, header h: Int, payloadLength: Int, available: Int) -> Sense {
        switch type {
        case .acl:
            let handleAndFlags = UInt16(buffer[h]) | UInt16(buffer[h + 1]) << 8
            let handle = handleAndFlags & 0x0FFF
            let broadcast = handleAndFlags >> 14
            guard handle <= 0x0EFF, broadcast == 0, payloadLength <= maxACLLength else { return .senseless }
            return .plausible
        case .event:
            let code = buffer[h]
            guard code != 0 else { return .senseless }
            if let fixed = Self.eventLengths[code] {
                return payloadLength == fixed ? .plausible : .senseless
            }
            switch code {
            case 0x0E:
                // Command Complete: Num_HCI_Command_Packets, Command_Opcode, then at least a Status
                // unless the opcode is 0x0000 (no operation).
                return payloadLength >= 3 ? .plausible : .senseless
            case 0x13:
                // Number Of Completed Packets: Num_Handles, then 4 octets per handle.
                guard payloadLength >= 1 else { return .senseless }
                guard available >= 1 else { return .needMore }
                return payloadLength == 1 + 4 * Int(buffer[h + 2]) ? .plausible : .senseless
            case 0x3E:
                guard payloadLength >= 1 else { return .senseless }
                guard available >= 1 else { return .needMore }
                let sub = buffer[h + 2]
                if let fixed = Self.leSubeventLengths[sub] { return payloadLength == fixed ? .plausible : .senseless }
                switch sub {
                case 0x02: return payloadLength >= 12 ? .plausible : .senseless     // Advertising Report, one report
                case 0x0D: return payloadLength >= 26 ? .plausible : .senseless     // Extended Advertising Report
                default: return .plausible
                }
            default:
                return .plausible
            }
        default:
            // A controller sends no command packet, and this host sets up no SCO or ISO link.
            return .senseless
        }
    }

    /// Parameter lengths of the events of fixed length this host receives (Vol 4 Part E 7.7).
    private static let eventLengths: [UInt8: Int] = [
        0x05: 4,   // Disconnection Complete
        0x08: 4,   // Encryption Change v1
        0x0F: 4,   // Command Status
        0x10: 1,   // Hardware Error
        0x1A: 1,   // Data Buffer Overflow
        0x30: 3,   // Encryption Key Refresh Complete
        0x59: 5,   // Encryption Change v2
    ]

    /// Parameter lengths (subevent code included) of the LE subevents of fixed length (Vol 4 Part E 7.7.65).
    private static let leSubeventLengths: [UInt8: Int] = [
        0x01: 19,  // Connection Complete
        0x03: 10,  // Connection Update Complete
        0x04: 12,  // Read Remote Features Complete
        0x05: 13,  // Long Term Key Request
        0x06: 11,  // Remote Connection Parameter Request
        0x07: 11,  // Data Length Change
        0x0A: 31,  // Enhanced Connection Complete
        0x0C: 6,   // PHY Update Complete
        0x14: 4,   // Channel Selection Algorithm
    ]
}
