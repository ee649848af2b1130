import BLE
import Foundation

/// One ATT PDU on one link, as the simulator's trace records it (`--trace PATH` on the simulator).
///
/// As a JSON line (keys sorted, as the report's; `handle` and `opcode` left out when the PDU has none):
/// ```json
/// {"direction":"sent","handle":18,"link":"D001","name":"Write Request","opcode":18,"time":"2026-05-01T12:00:00.123456Z","value":"0102"}
/// ```
/// As text: `2026-05-01T12:00:00.123456Z D001 sent Write Request (0x12) handle 0x0012 value 0102`.
///
/// `handle` is the attribute handle for the PDUs that start with one (read, read blob, write, write
/// command, signed write, prepare write request/response, notification, indication) and the handle
/// in error of an Error Response; `value` is the bytes after the opcode and that handle (all the
/// parameters for other PDUs: a Read Response's value, a discovery request's range and type).
public struct ATTTraceRecord: Sendable, Equatable, Encodable {
    /// Microseconds since the Unix epoch.
    public var timestamp: Int64
    /// The device (inventory id or address) the link leads to.
    public var link: String
    public var direction: TraceDirection
    /// Nil for an empty PDU (which a hostile peer may send).
    public var opcode: ATTOpcode?
    public var handle: UInt16?
    public var value: [UInt8]

    public init(timestamp: Int64, link: String, direction: TraceDirection, opcode: ATTOpcode?, handle: UInt16?, value: [UInt8]) {
        self.timestamp = timestamp
        self.link = link
        self.direction = direction
        self.opcode = opcode
        self.handle = handle
        self.value = value
    }

    /// Splits a raw ATT PDU into opcode, handle and value. Never traps: a PDU too short for its
    /// handle keeps its bytes as the value, without a handle.
    public init(pdu: [UInt8], link: String, direction: TraceDirection, timestamp: Int64) {
        self.timestamp = timestamp
        self.link = link
        self.direction = direction
        guard let first = pdu.first else {
            opcode = nil
            handle = nil
            value = []
            return
        }
        let op = ATTOpcode(first)
        opcode = op
        let handleOffset: Int?
        switch op {
        case .readRequest, .readBlobRequest, .writeRequest, .writeCommand, .signedWriteCommand, .prepareWriteRequest,
             .prepareWriteResponse, .handleValueNotification, .handleValueIndication:
            handleOffset = 1
        case .errorResponse:
            handleOffset = 2
        default:
            handleOffset = nil
        }
        if let h = handleOffset, pdu.count >= h + 2 {
            handle = UInt16(pdu[h]) | UInt16(pdu[h + 1]) << 8
            // An Error Response's request opcode sits before the handle; keep it with the error code.
            value = h == 2 ? [pdu[1]] + pdu[4...] : Array(pdu[(h + 2)...])
        } else {
            handle = nil
            value = Array(pdu.dropFirst())
        }
    }

    /// `Write Request`, `opcode 0x7f`, or `empty PDU`.
    public var name: String { opcode?.name ?? "empty PDU" }

    /// The record as one JSON line (without the newline).
    public var jsonLine: String {
        String(decoding: (try? Self.encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    /// Keys sorted (so that lines are byte-for-byte stable); slashes in a link name left as they are.
    static var encoder: JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }

    /// The record as one line of text (without the newline).
    public var textLine: String {
        var out = "\(TraceTime.iso8601(microseconds: timestamp)) \(link) \(direction.rawValue) \(name)"
        if let opcode { out += " (0x\(Self.hex(UInt16(opcode.rawValue), digits: 2)))" }
        if let handle { out += " handle 0x\(Self.hex(handle, digits: 4))" }
        if !value.isEmpty { out += " value \(value.hexString)" }
        return out
    }

    private static func hex(_ v: UInt16, digits: Int) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: max(0, digits - s.count)) + s
    }
}

extension ATTTraceRecord {
    private enum CodingKeys: String, CodingKey {
        case time, link, direction, opcode, name, handle, value
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(TraceTime.iso8601(microseconds: timestamp), forKey: .time)
        try c.encode(link, forKey: .link)
        try c.encode(direction, forKey: .direction)
        try c.encodeIfPresent(opcode?.rawValue, forKey: .opcode)
        try c.encode(name, forKey: .name)
        try c.encodeIfPresent(handle, forKey: .handle)
        try c.encode(value.hexString, forKey: .value)
    }
}
