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
