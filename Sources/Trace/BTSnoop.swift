/// The btsnoop capture format (a variant of RFC 1761 "snoop"), which Wireshark, Android and BlueZ's
/// btmon read. All integers are big-endian.
///
/// File header (16 bytes):
///
/// | field                  | size | value                                    |
/// |------------------------|------|------------------------------------------|
/// | identification pattern | 8    | `btsnoop\0`                              |
/// | version                | 4    | 1                                        |
/// | datalink type          | 4    | 1002: HCI UART (H4), each packet with its H4 indicator byte |
///
/// Then one record per packet (24 bytes + the packet):
///
/// | field             | size | meaning                                                       |
/// |-------------------|------|---------------------------------------------------------------|
/// | original length   | 4    | the packet's length                                           |
/// | included length   | 4    | bytes of it in this record                                    |
/// | packet flags      | 4    | bit 0: 0 sent, 1 received; bit 1: 0 data, 1 command or event  |
/// | cumulative drops  | 4    | packets lost before this one                                  |
/// | timestamp         | 8    | microseconds since midnight, 1 January 0 AD (proleptic Gregorian), signed |
/// | packet data       | included length | the H4 packet: indicator (01 command, 02 ACL, 03 SCO, 04 event, 05 ISO), then the HCI packet |
public enum BTSnoop {
    /// `btsnoop\0`.
    public static let identification: [UInt8] = Array("btsnoop".utf8) + [0]
    public static let version: UInt32 = 1
    /// HCI UART (H4).
    public static let datalinkH4: UInt32 = 1002
    /// Microseconds from the btsnoop epoch ("0 AD") to the Unix epoch: 0x00DCDDB30F2F8000, which is
    /// what Wireshark, Android and BlueZ use (719,540 days; a proleptic Gregorian count would give
    /// 719,528, but readers follow this constant, so writers must too).
    public static let unixEpochOffset: Int64 = 0x00DC_DDB3_0F2F_8000

    /// The 16-byte file header for H4 packets.
    public static var header: [UInt8] {
        identification + bigEndian(version) + bigEndian(datalinkH4)
    }

    /// The records of a btsnoop file with H4 packets. Never traps: a wrong header, an unknown version
    /// or datalink, or a record cut short throws `BTSnoopError` with the byte offset.
    public static func records(in bytes: [UInt8]) throws(BTSnoopError) -> [BTSnoopRecord] {
        guard bytes.count >= 16 else { throw BTSnoopError("the file is \(bytes.count) bytes, shorter than the 16-byte header", offset: 0) }
        guard Array(bytes[0..<8]) == identification else { throw BTSnoopError("not a btsnoop file (no `btsnoop\\0` pattern)", offset: 0) }
        let v = readUInt32(bytes, 8)
        guard v == version else { throw BTSnoopError("btsnoop version \(v); only version 1 is known", offset: 8) }
        let datalink = readUInt32(bytes, 12)
        guard datalink == datalinkH4 else { throw BTSnoopError("datalink \(datalink); only 1002 (HCI UART H4) is read here", offset: 12) }
        var records: [BTSnoopRecord] = []
        var offset = 16
        while offset < bytes.count {
            guard bytes.count - offset >= 24 else {
                throw BTSnoopError("record header cut short: \(bytes.count - offset) of 24 bytes", offset: offset)
            }
            let original = readUInt32(bytes, offset)
            let included = readUInt32(bytes, offset + 4)
            let flags = readUInt32(bytes, offset + 8)
            let drops = readUInt32(bytes, offset + 12)
            let timestamp = Int64(bitPattern: UInt64(readUInt32(bytes, offset + 16)) << 32 | UInt64(readUInt32(bytes, offset + 20)))
            guard included <= original else {
                throw BTSnoopError("included length \(included) is above the original length \(original)", offset: offset + 4)
            }
            let start = offset + 24
            guard Int(included) <= bytes.count - start else {
                throw BTSnoopError("packet cut short: \(bytes.count - start) of \(included) bytes", offset: start)
            }
            let packet = Array(bytes[start..<start + Int(included)])
            records.append(BTSnoopRecord(
                direction: flags & 1 == 0 ? .sent : .received, packet: packet,
                timestamp: timestamp &- unixEpochOffset, originalLength: original, cumulativeDrops: drops))
            offset = start + Int(included)
        }
        return records
    }

    static func bigEndian(_ v: UInt32) -> [UInt8] {
        [UInt8(truncatingIfNeeded: v >> 24), UInt8(truncatingIfNeeded: v >> 16), UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v)]
    }

    /// Four big-endian bytes at `offset` (the caller has checked the length).
    private static func readUInt32(_ b: [UInt8], _ offset: Int) -> UInt32 {
        UInt32(b[offset]) << 24 | UInt32(b[offset + 1]) << 16 | UInt32(b[offset + 2]) << 8 | UInt32(b[offset + 3])
    }
}

/// One packet in a btsnoop file.
public struct BTSnoopRecord: Sendable, Equatable {
    public var direction: TraceDirection
    /// The H4 packet: its indicator byte, then the HCI packet.
    public var packet: [UInt8]
    /// Microseconds since the Unix epoch (the file stores them since 0 AD).
    public var timestamp: Int64
    /// The packet's length before any truncation (`packet.count` unless the record was cut).
    public var originalLength: UInt32
    public var cumulativeDrops: UInt32

    public init(direction: TraceDirection, packet: [UInt8], timestamp: Int64, originalLength: UInt32? = nil, cumulativeDrops: UInt32 = 0) {
        self.direction = direction
        self.packet = packet
        self.timestamp = timestamp
        self.originalLength = originalLength ?? UInt32(truncatingIfNeeded: packet.count)
        self.cumulativeDrops = cumulativeDrops
    }

    /// H4 commands (01) and events (04) set flag bit 1; ACL, SCO and ISO data do not.
    public var isCommandOrEvent: Bool {
        guard let indicator = packet.first else { return false }
        return indicator == 0x01 || indicator == 0x04
    }

    /// Bit 0: direction (1 received); bit 1: command or event.
    public var flags: UInt32 {
        (direction == .received ? 1 : 0) | (isCommandOrEvent ? 2 : 0)
    }

    /// The record as the file holds it (24-byte header, then the packet).
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(24 + packet.count)
        out += BTSnoop.bigEndian(originalLength)
        out += BTSnoop.bigEndian(UInt32(truncatingIfNeeded: packet.count))
        out += BTSnoop.bigEndian(flags)
        out += BTSnoop.bigEndian(cumulativeDrops)
        let t = UInt64(bitPattern: timestamp &+ BTSnoop.unixEpochOffset)
        out += BTSnoop.bigEndian(UInt32(truncatingIfNeeded: t >> 32))
        out += BTSnoop.bigEndian(UInt32(truncatingIfNeeded: t))
        out += packet
        return out
    }
}

/// Why bytes are not a btsnoop file this reader understands, and where.
public struct BTSnoopError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    /// Byte offset in the file.
    public var offset: Int

    public init(_ message: String, offset: Int) {
        self.message = message
        self.offset = offset
    }

    public var description: String { "btsnoop at byte \(offset): \(message)" }
}
