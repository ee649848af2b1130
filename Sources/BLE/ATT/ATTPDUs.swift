// ATT PDUs (Bluetooth Core v5.4, Vol 3, Part F, 3.4). One struct per PDU, fields in wire order.
// Each decodes from the bytes after the opcode and encodes the same; lengths are checked before access.

/// A UUID in ATT: 2 or 16 bytes on the wire (Vol 3 Part F 3.2.1).
private func readATTUUID(_ r: inout ByteReader, width: Int, _ field: String) throws(DecodeError) -> BluetoothUUID {
    guard width == 2 || width == 16 else { throw .invalid(field: field, reason: "UUID must be 2 or 16 bytes, not \(width)") }
    let raw = try r.readBytes(width, field)
    guard let uuid = BluetoothUUID(wire: raw) else { throw .invalid(field: field, reason: "bad UUID") }
    return uuid
}

/// Error Response (3.4.1.1).
/// | Request Opcode In Error | 1 | Attribute Handle In Error | 2 | Error Code | 1 |
public struct ATTErrorResponse: Sendable, Hashable {
    public var requestOpcode: ATTOpcode
    public var handle: UInt16
    public var code: ATTErrorCode
    public init(requestOpcode: ATTOpcode, handle: UInt16, code: ATTErrorCode) {
        self.requestOpcode = requestOpcode; self.handle = handle; self.code = code
    }
    public init(from r: inout ByteReader) throws(DecodeError) {
        requestOpcode = ATTOpcode(try r.readUInt8("Error Response request opcode"))
        handle = try r.readUInt16LE("Error Response handle")
        code = ATTErrorCode(rawValue: try r.readUInt8("Error Response error code"))
        try r.expectEnd("Error Response")
    }
    public func encode(into w: inout ByteWriter) {
        w.write(requestOpcode.rawValue); w.writeUInt16LE(handle); w.write(code.rawValue)
    }
    public var error: ATTError { ATTError(code: code, handle: handle, requestOpcode: requestOpcode.rawValue) }
}

/// Exchange MTU Request / Response (3.4.2.1, 3.4.2.2). | Client/Server Rx MTU | 2 |
public struct ATTExchangeMTU: Sendable, Hashable {
    public var mtu: UInt16
    public init(mtu: UInt16) { self.mtu = mtu }
    public init(from r: inout ByteReader) throws(DecodeError) {
        mtu = try r.readUInt16LE("Exchange MTU Rx MTU")
        try r.expectEnd("Exchange MTU")
    }
    public func encode(into w: inout ByteWriter) { w.writeUInt16LE(mtu) }
}

/// A handle range, used by the discovery requests. | Starting Handle | 2 | Ending Handle | 2 |
public struct ATTHandleRange: Sendable, Hashable {
    public var start: UInt16
    public var end: UInt16
    public init(start: UInt16, end: UInt16) { self.start = start; self.end = end }
    init(from r: inout ByteReader, _ pdu: String) throws(DecodeError) {
        start = try r.readUInt16LE("\(pdu) starting handle")
        end = try r.readUInt16LE("\(pdu) ending handle")
    }
    func encode(into w: inout ByteWriter) { w.writeUInt16LE(start); w.writeUInt16LE(end) }
}

/// Find Information Request (3.4.3.1). | Starting Handle | 2 | Ending Handle | 2 |
public struct ATTFindInformationRequest: Sendable, Hashable {
    public var range: ATTHandleRange
    public init(range: ATTHandleRange) { self.range = range }
    public init(from r: inout ByteReader) throws(DecodeError) {
        range = try ATTHandleRange(from: &r, "Find Information Request")
        try r.expectEnd("Find Information Request")
    }
    public func encode(into w: inout ByteWriter) { range.encode(into: &w) }
}

/// Find Information Response (3.4.3.2).
/// | Format (1: 16-bit UUIDs, 2: 128-bit) | 1 | Information Data (handle 2 + UUID 2 or 16) | 4 to MTU-2 |
public struct ATTFindInformationResponse: Sendable, Hashable {
    public struct Entry: Sendable, Hashable {
        public var handle: UInt16
        public var type: BluetoothUUID
        public init(handle: UInt16, type: BluetoothUUID) { self.handle = handle; self.type = type }
    }
    public var entries: [Entry]
    /// Format 2 (128-bit UUIDs), also for UUIDs with a 16-bit form when a server declares them so.
    public var uses128BitUUIDs: Bool
    /// Format 2 by default when any type has no 16-bit form.
    public init(entries: [Entry], uses128BitUUIDs: Bool? = nil) {
        self.entries = entries
        self.uses128BitUUIDs = uses128BitUUIDs ?? entries.contains { $0.type.value16 == nil }
    }
    public init(from r: inout ByteReader) throws(DecodeError) {
        let format = try r.readUInt8("Find Information Response format")
        let width: Int
        switch format {
        case 1: width = 2
        case 2: width = 16
        default: throw .invalid(field: "Find Information Response format", reason: "\(format) is neither 1 nor 2")
        }
        guard r.remaining > 0, r.remaining % (2 + width) == 0 else {
            throw .invalid(field: "Find Information Response data", reason: "\(r.remaining) bytes is not a whole number of \(2 + width)-byte entries")
        }
        var out: [Entry] = []
        while !r.isAtEnd {
            let h = try r.readUInt16LE("Find Information Response handle")
            out.append(Entry(handle: h, type: try readATTUUID(&r, width: width, "Find Information Response UUID")))
        }
        entries = out
        uses128BitUUIDs = width == 16
    }
    public func encode(into w: inout ByteWriter) {
        let long = uses128BitUUIDs || entries.contains { $0.type.value16 == nil }
        w.write(long ? 2 : 1)
        for e in entries {
            w.writeUInt16LE(e.handle)
            w.write(long ? e.type.uuid128.reversed() : e.type.wireBytes)
        }
    }
}

/// Find By Type Value Request (3.4.3.3).
/// | Starting Handle | 2 | Ending Handle | 2 | Attribute Type (16-bit UUID) | 2 | Attribute Value | 0 to MTU-7 |
public struct ATTFindByTypeValueRequest: Sendable, Hashable {
    public var range: ATTHandleRange
    public var type: UInt16
    public var value: [UInt8]
    public init(range: ATTHandleRange, type: UInt16, value: [UInt8]) { self.range = range; self.type = type; self.value = value }
    public init(from r: inout ByteReader) throws(DecodeError) {
        range = try ATTHandleRange(from: &r, "Find By Type Value Request")
        type = try r.readUInt16LE("Find By Type Value Request attribute type")
        value = r.readRemaining()
    }
    public func encode(into w: inout ByteWriter) { range.encode(into: &w); w.writeUInt16LE(type); w.write(value) }
}

/// Find By Type Value Response (3.4.3.4). | Handles Information List (found 2 + group end 2) | 4 to MTU-1 |
public struct ATTFindByTypeValueResponse: Sendable, Hashable {
    public var ranges: [ATTHandleRange]
    public init(ranges: [ATTHandleRange]) { self.ranges = ranges }
    public init(from r: inout ByteReader) throws(DecodeError) {
        guard r.remaining > 0, r.remaining % 4 == 0 else {
            throw .invalid(field: "Find By Type Value Response list", reason: "\(r.remaining) bytes is not a whole number of 4-byte entries")
        }
        var out: [ATTHandleRange] = []
        while !r.isAtEnd { out.append(try ATTHandleRange(from: &r, "Find By Type Value Response")) }
        ranges = out
    }
    public func encode(into w: inout ByteWriter) { for range in ranges { range.encode(into: &w) } }
}

/// Read By Type Request (3.4.4.1) and Read By Group Type Request (3.4.4.9).
/// | Starting Handle | 2 | Ending Handle | 2 | Attribute (Group) Type | 2 or 16 |
public struct ATTReadByTypeRequest: Sendable, Hashable {
    public var range: ATTHandleRange
    public var type: BluetoothUUID
    public init(range: ATTHandleRange, type: BluetoothUUID) { self.range = range; self.type = type }
    public init(from r: inout ByteReader) throws(DecodeError) {
        range = try ATTHandleRange(from: &r, "Read By Type Request")
        let width = r.remaining
        type = try readATTUUID(&r, width: width, "Read By Type Request attribute type")
    }
    public func encode(into w: inout ByteWriter) { range.encode(into: &w); w.write(type.wireBytes) }
}

/// Read By Type Response (3.4.4.2). | Length | 1 | Attribute Data List (handle 2 + value Length-2) | 2 to MTU-2 |
public struct ATTReadByTypeResponse: Sendable, Hashable {
    public struct Entry: Sendable, Hashable {
        public var handle: UInt16
        public var value: [UInt8]
        public init(handle: UInt16, value: [UInt8]) { self.handle = handle; self.value = value }
    }
    public var entries: [Entry]
    public init(entries: [Entry]) { self.entries = entries }
    public init(from r: inout ByteReader) throws(DecodeError) {
        let length = Int(try r.readUInt8("Read By Type Response length"))
        guard length >= 2 else { throw .invalid(field: "Read By Type Response length", reason: "\(length) is shorter than a handle") }
        guard r.remaining > 0, r.remaining % length == 0 else {
            throw .invalid(field: "Read By Type Response list", reason: "\(r.remaining) bytes is not a whole number of \(length)-byte entries")
        }
        var out: [Entry] = []
        while !r.isAtEnd {
            let h = try r.readUInt16LE("Read By Type Response handle")
            out.append(Entry(handle: h, value: try r.readBytes(length - 2, "Read By Type Response value")))
        }
        entries = out
    }
    /// Entries must all have the same value length (the server truncates to the first's).
    public func encode(into w: inout ByteWriter) {
        let valueLength = entries.first?.value.count ?? 0
        w.write(UInt8(truncatingIfNeeded: valueLength + 2))
        for e in entries { w.writeUInt16LE(e.handle); w.write(e.value.prefix(valueLength)) }
    }
}

/// Read Request (3.4.4.3). | Attribute Handle | 2 |
public struct ATTReadRequest: Sendable, Hashable {
    public var handle: UInt16
    public init(handle: UInt16) { self.handle = handle }
    public init(from r: inout ByteReader) throws(DecodeError) {
        handle = try r.readUInt16LE("Read Request handle")
        try r.expectEnd("Read Request")
    }
    public func encode(into w: inout ByteWriter) { w.writeUInt16LE(handle) }
}

/// Read Blob Request (3.4.4.5). | Attribute Handle | 2 | Value Offset | 2 |
public struct ATTReadBlobRequest: Sendable, Hashable {
    public var handle: UInt16
    public var offset: UInt16
    public init(handle: UInt16, offset: UInt16) { self.handle = handle; self.offset = offset }
    public init(from r: inout ByteReader) throws(DecodeError) {
        handle = try r.readUInt16LE("Read Blob Request handle")
        offset = try r.readUInt16LE("Read Blob Request offset")
        try r.expectEnd("Read Blob Request")
    }
    public func encode(into w: inout ByteWriter) { w.writeUInt16LE(handle); w.writeUInt16LE(offset) }
}

/// Read Multiple Request (3.4.4.7). | Set Of Handles | 4 to MTU-1 |
public struct ATTReadMultipleRequest: Sendable, Hashable {
    public var handles: [UInt16]
    public init(handles: [UInt16]) { self.handles = handles }
    public init(from r: inout ByteReader) throws(DecodeError) {
        guard r.remaining >= 4, r.remaining % 2 == 0 else {
            throw .invalid(field: "Read Multiple Request handles", reason: "needs two or more 2-byte handles, got \(r.remaining) bytes")
        }
        var out: [UInt16] = []
        while !r.isAtEnd { out.append(try r.readUInt16LE("Read Multiple Request handle")) }
        handles = out
    }
    public func encode(into w: inout ByteWriter) { for h in handles { w.writeUInt16LE(h) } }
}

/// Read By Group Type Response (3.4.4.10).
/// | Length | 1 | Attribute Data List (handle 2 + end group handle 2 + value Length-4) | 4 to MTU-2 |
public struct ATTReadByGroupTypeResponse: Sendable, Hashable {
    public struct Entry: Sendable, Hashable {
        public var handle: UInt16
        public var endGroupHandle: UInt16
        public var value: [UInt8]
        public init(handle: UInt16, endGroupHandle: UInt16, value: [UInt8]) {
            self.handle = handle; self.endGroupHandle = endGroupHandle; self.value = value
        }
    }
    public var entries: [Entry]
    public init(entries: [Entry]) { self.entries = entries }
    public init(from r: inout ByteReader) throws(DecodeError) {
        let length = Int(try r.readUInt8("Read By Group Type Response length"))
        guard length >= 4 else { throw .invalid(field: "Read By Group Type Response length", reason: "\(length) is shorter than two handles") }
        guard r.remaining > 0, r.remaining % length == 0 else {
            throw .invalid(field: "Read By Group Type Response list", reason: "\(r.remaining) bytes is not a whole number of \(length)-byte entries")
        }
        var out: [Entry] = []
        while !r.isAtEnd {
            let h = try r.readUInt16LE("Read By Group Type Response handle")
            let e = try r.readUInt16LE("Read By Group Type Response end group handle")
            out.append(Entry(handle: h, endGroupHandle: e, value: try r.readBytes(length - 4, "Read By Group Type Response value")))
        }
        entries = out
    }
    public func encode(into w: inout ByteWriter) {
        let valueLength = entries.first?.value.count ?? 0
        w.write(UInt8(truncatingIfNeeded: valueLength + 4))
        for e in entries { w.writeUInt16LE(e.handle); w.writeUInt16LE(e.endGroupHandle); w.write(e.value.prefix(valueLength)) }
    }
}

/// A handle and a value: Write Request (3.4.5.1), Write Command (3.4.5.3), Handle Value Notification
/// (3.4.7.1) and Indication (3.4.7.2). | Attribute Handle | 2 | Attribute Value | 0 to MTU-3 |
public struct ATTHandleValue: Sendable, Hashable {
    public var handle: UInt16
    public var value: [UInt8]
    public init(handle: UInt16, value: [UInt8]) { self.handle = handle; self.value = value }
    public init(from r: inout ByteReader) throws(DecodeError) {
        handle = try r.readUInt16LE("attribute handle")
        value = r.readRemaining()
    }
    public func encode(into w: inout ByteWriter) { w.writeUInt16LE(handle); w.write(value) }
}

/// Prepare Write Request / Response (3.4.6.1, 3.4.6.2).
/// | Attribute Handle | 2 | Value Offset | 2 | Part Attribute Value | 0 to MTU-5 |
public struct ATTPrepareWrite: Sendable, Hashable {
    public var handle: UInt16
    public var offset: UInt16
    public var value: [UInt8]
    public init(handle: UInt16, offset: UInt16, value: [UInt8]) { self.handle = handle; self.offset = offset; self.value = value }
    public init(from r: inout ByteReader) throws(DecodeError) {
        handle = try r.readUInt16LE("Prepare Write handle")
        offset = try r.readUInt16LE("Prepare Write offset")
        value = r.readRemaining()
    }
    public func encode(into w: inout ByteWriter) { w.writeUInt16LE(handle); w.writeUInt16LE(offset); w.write(value) }
}

/// Execute Write Request (3.4.6.3). | Flags (0 cancel, 1 write) | 1 |
public struct ATTExecuteWriteRequest: Sendable, Hashable {
    public var commit: Bool
    public init(commit: Bool) { self.commit = commit }
    public init(from r: inout ByteReader) throws(DecodeError) {
        let flags = try r.readUInt8("Execute Write Request flags")
        guard flags <= 1 else { throw .invalid(field: "Execute Write Request flags", reason: "0x\(String(flags, radix: 16)) is neither 0 nor 1") }
        commit = flags == 1
        try r.expectEnd("Execute Write Request")
    }
    public func encode(into w: inout ByteWriter) { w.write(commit ? 1 : 0) }
}

/// Read Multiple Variable Length Request (3.4.4.11). | Set Of Handles | 4 to MTU-1 |
///
/// Two or more handles; the server answers with each value and its length, in the same order.
public struct ATTReadMultipleVariableRequest: Sendable, Hashable {
    public var handles: [UInt16]
    public init(handles: [UInt16]) { self.handles = handles }
    public init(from r: inout ByteReader) throws(DecodeError) {
        guard r.remaining >= 4, r.remaining % 2 == 0 else {
            throw .invalid(field: "Read Multiple Variable Length Request handles",
                           reason: "needs two or more 2-byte handles, got \(r.remaining) bytes")
        }
        var out: [UInt16] = []
        while !r.isAtEnd { out.append(try r.readUInt16LE("Read Multiple Variable Length Request handle")) }
        handles = out
    }
    public func encode(into w: inout ByteWriter) { for h in handles { w.writeUInt16LE(h) } }
}

/// Read Multiple Variable Length Response (3.4.4.12).
/// | Length Value Tuple List (Value Length 2 + Attribute Value) | 2 to MTU-1 |
///
/// The server stops the list at ATT_MTU-1 octets, so the last tuple may be cut: inside its value (fewer
/// bytes than its Value Length says) or even inside its 2-octet length (one byte left over, `cutLength`).
/// Tuples for the handles after it are then missing. A Value Length above 512 (the longest attribute
/// value, Vol 3 Part F 3.2.9) cannot be real and is refused.
public struct ATTReadMultipleVariableResponse: Sendable, Hashable {
    /// One value as sent: `length` is the Value Length field, `value` the bytes that fitted.
    public struct Tuple: Sendable, Hashable {
        public var length: UInt16
        public var value: [UInt8]
        public init(length: UInt16, value: [UInt8]) { self.length = length; self.value = value }
        public init(_ value: [UInt8]) { self.init(length: UInt16(clamping: value.count), value: value) }
        /// True when every byte the length announces is here.
        public var isComplete: Bool { value.count == Int(length) }
    }
    public var tuples: [Tuple]
    /// The first byte of a Value Length the MTU cut in two (nil when the list ends on a tuple boundary).
    public var cutLength: UInt8?
    public init(tuples: [Tuple], cutLength: UInt8? = nil) { self.tuples = tuples; self.cutLength = cutLength }
    public init(from r: inout ByteReader) throws(DecodeError) {
        guard r.remaining >= 2 else {
            throw .truncated(field: "Read Multiple Variable Length Response value length", needed: 2, available: r.remaining)
        }
        var out: [Tuple] = []
        var cut: UInt8?
        while !r.isAtEnd {
            if r.remaining == 1 {
                cut = try r.readUInt8("Read Multiple Variable Length Response cut value length")
                break
            }
            let length = try r.readUInt16LE("Read Multiple Variable Length Response value length")
            guard length <= 512 else {
                throw .invalid(field: "Read Multiple Variable Length Response value length",
                               reason: "\(length) is longer than an attribute value can be (512)")
            }
            out.append(Tuple(length: length, value: try r.readBytes(min(Int(length), r.remaining),
                                                                      "Read Multiple Variable Length Response value")))
        }
        tuples = out
        cutLength = cut
    }
    public func encode(into w: inout ByteWriter) {
        for t in tuples { w.writeUInt16LE(t.length); w.write(t.value) }
        if let cutLength { w.write(cutLength) }
    }
}
