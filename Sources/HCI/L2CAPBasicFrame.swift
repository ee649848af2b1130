import BLE

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
