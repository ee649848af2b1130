import BLE

/// An HCI ACL data packet (Core v5.4 Vol 4 Part E 5.4.2).
///
/// | Parameter | Size |
/// |---|---|
/// | Handle (12 bits), PB_Flag (2 bits), BC_Flag (2 bits) | 2 |
/// | Data_Total_Length | 2 |
/// | Data | Data_Total_Length |
public struct ACLDataPacket: Sendable, Equatable {
    /// Packet boundary flag.
    public struct Boundary: RawRepresentable, Hashable, Sendable {
        public var rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue & 0x03 }
        /// First fragment of a non-automatically-flushable L2CAP PDU (host to controller on LE).
        public static let firstNonFlushable = Boundary(rawValue: 0b00)
        public static let continuation = Boundary(rawValue: 0b01)
        /// First fragment of an automatically flushable PDU (controller to host).
        public static let firstFlushable = Boundary(rawValue: 0b10)

        public var isFirst: Bool { self != .continuation }
    }

    public var handle: UInt16
    public var boundary: Boundary
    public var broadcast: UInt8
    public var data: [UInt8]

    public init(handle: UInt16, boundary: Boundary, broadcast: UInt8 = 0, data: [UInt8]) {
        self.handle = handle & 0x0FFF
        self.boundary = boundary
        self.broadcast = broadcast & 0x03
        self.data = data
    }

    /// Parses a whole ACL packet (without the H4 indicator); the length must match exactly.
    public init(packet: [UInt8]) throws(DecodeError) {
        var r = ByteReader(packet)
        let header = try r.readUInt16LE("Handle")
        let length = try r.readUInt16LE("Data_Total_Length")
        handle = header & 0x0FFF
        boundary = Boundary(rawValue: UInt8(truncatingIfNeeded: header >> 12))
        broadcast = UInt8(truncatingIfNeeded: header >> 14) & 0x03
        data = try r.readBytes(Int(length), "Data")
        try r.expectEnd("ACL data packet")
    }

    public var packet: [UInt8] {
        var w = ByteWriter(capacity: 4 + data.count)
        w.writeUInt16LE(handle | UInt16(boundary.rawValue) << 12 | UInt16(broadcast) << 14)
        w.writeUInt16LE(UInt16(truncatingIfNeeded: data.count))
        w.write(data)
        return w.bytes
    }
}

/// An L2CAP basic frame (B-frame, Core v5.4 Vol 3 Part A 3.1).
///
/// | Parameter | Size |
/// |---|---|
/// | PDU_Length | 2 |
/// | Channel_ID | 2 |
/// | Information_Payload | PDU_Length |
public struct L2CAPBasicFrame: Sendable, Equatable {
    /// A channel identifier (Vol 3 Part A 2.1). Open.
    public struct ChannelID: RawRepresentable, Hashable, Sendable {
        public var rawValue: UInt16
        public init(rawValue: UInt16) { self.rawValue = rawValue }
        public static let att = ChannelID(rawValue: 0x0004)
        public static let leSignaling = ChannelID(rawValue: 0x0005)
        public static let smp = ChannelID(rawValue: 0x0006)
    }

    public var channel: ChannelID
    public var payload: [UInt8]

    public init(channel: ChannelID, payload: [UInt8]) {
        self.channel = channel
        self.payload = payload
    }

    public init(bytes: [UInt8]) throws(DecodeError) {
        var r = ByteReader(bytes)
        let length = try r.readUInt16LE("PDU_Length")
        channel = ChannelID(rawValue: try r.readUInt16LE("Channel_ID"))
        payload = try r.readBytes(Int(length), "Information_Payload")
        try r.expectEnd("L2CAP basic frame")
    }

    public var bytes: [UInt8] {
        var w = ByteWriter(capacity: 4 + payload.count)
        w.writeUInt16LE(UInt16(truncatingIfNeeded: payload.count))
        w.writeUInt16LE(channel.rawValue)
        w.write(payload)
        return w.bytes
    }
}

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
