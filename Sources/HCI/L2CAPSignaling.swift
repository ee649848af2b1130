import BLE

/// An LE signalling command on CID 5 (Core v5.4 Vol 3 Part A 4).
///
/// | Parameter | Size |
/// |---|---|
/// | Code | 1 |
/// | Identifier | 1 |
/// | Data_Length | 2 |
/// | Data | Data_Length |
public struct L2CAPSignal: Sendable, Equatable {
    /// Signalling command codes (Vol 3 Part A 4, Table 4.2). Open.
    public struct Code: RawRepresentable, Hashable, Sendable {
        public var rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let commandReject = Code(rawValue: 0x01)
        public static let disconnectionRequest = Code(rawValue: 0x06)
        public static let connectionParameterUpdateRequest = Code(rawValue: 0x12)
        public static let connectionParameterUpdateResponse = Code(rawValue: 0x13)
        public static let leCreditBasedConnectionRequest = Code(rawValue: 0x14)
    }

    public var code: Code
    public var identifier: UInt8
    public var data: [UInt8]

    public init(code: Code, identifier: UInt8, data: [UInt8]) {
        self.code = code
        self.identifier = identifier
        self.data = data
    }

    public init(bytes: [UInt8]) throws(DecodeError) {
        var r = ByteReader(bytes)
        code = Code(rawValue: try r.readUInt8("Code"))
        identifier = try r.readUInt8("Identifier")
        let length = try r.readUInt16LE("Data_Length")
        data = try r.readBytes(Int(length), "Data")
        try r.expectEnd("L2CAP signalling command")
    }

    public var bytes: [UInt8] {
        var w = ByteWriter(capacity: 4 + data.count)
        w.write(code.rawValue)
        w.write(identifier)
        w.writeUInt16LE(UInt16(truncatingIfNeeded: data.count))
        w.write(data)
        return w.bytes
    }
}

/// L2CAP_CONNECTION_PARAMETER_UPDATE_REQ data (Vol 3 Part A 4.20).
///
/// | Parameter | Size |
/// |---|---|
/// | Interval_Min | 2 |
/// | Interval_Max | 2 |
/// | Latency | 2 |
/// | Timeout | 2 |
public struct ConnectionParameterUpdateRequest: Sendable, Equatable {
    public var intervalMin: UInt16
    public var intervalMax: UInt16
    public var latency: UInt16
    public var timeout: UInt16

    public init(intervalMin: UInt16, intervalMax: UInt16, latency: UInt16, timeout: UInt16) {
        self.intervalMin = intervalMin
        self.intervalMax = intervalMax
        self.latency = latency
        self.timeout = timeout
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        intervalMin = try r.readUInt16LE("Interval_Min")
        intervalMax = try r.readUInt16LE("Interval_Max")
        latency = try r.readUInt16LE("Latency")
        timeout = try r.readUInt16LE("Timeout")
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt16LE(intervalMin)
        w.writeUInt16LE(intervalMax)
        w.writeUInt16LE(latency)
        w.writeUInt16LE(timeout)
    }

    /// Whether the values are within the ranges of Vol 6 Part B 4.5.1/4.5.2 (interval 7.5 ms–4 s,
    /// latency ≤ 499, timeout 100 ms–32 s and longer than (1 + latency) × interval × 2).
    public var isAcceptable: Bool {
        guard intervalMin >= 6, intervalMax <= 3200, intervalMin <= intervalMax else { return false }
        guard latency <= 499, timeout >= 10, timeout <= 3200 else { return false }
        // timeout (10 ms units) > (1 + latency) * intervalMax (1.25 ms units) * 2
        return Int(timeout) * 10 * 4 > (1 + Int(latency)) * Int(intervalMax) * 5 * 2
    }
}

/// What the LE signalling channel answers to a command from the peer, as a pure function.
public enum LESignalingResponder {
    /// The response to send (nil for none) and, for an accepted parameter update, the parameters
    /// the host should ask the controller for. With a link `target`, a parameter update is accepted
    /// within its limits (`LinkTuning.answer`: the overlap of the two interval ranges); without, any
    /// request valid by the specification is accepted as it is.
    public static func respond(to bytes: [UInt8], target: LinkTuning.Target? = nil)
        -> (response: L2CAPSignal?, accepted: ConnectionParameterUpdateRequest?) {
        guard let signal = try? L2CAPSignal(bytes: bytes) else {
            // Vol 3 Part A 4.1: a malformed command gets Command Reject "not understood" if an
            // identifier can be read at all.
            guard bytes.count >= 2, bytes[1] != 0 else { return (nil, nil) }
            return (reject(identifier: bytes[1]), nil)
        }
        switch signal.code {
        case .connectionParameterUpdateRequest:
            var r = ByteReader(signal.data)
            guard let request = try? ConnectionParameterUpdateRequest(from: &r), r.isAtEnd else {
                return (reject(identifier: signal.identifier), nil)
            }
            let answer = target.map { LinkTuning.answer(request, target: $0) } ?? (request.isAcceptable ? request : nil)
            let response = L2CAPSignal(code: .connectionParameterUpdateResponse, identifier: signal.identifier,
                                       data: [answer != nil ? 0x00 : 0x01, 0x00])
            return (response, answer)
        case .commandReject, .connectionParameterUpdateResponse:
            return (nil, nil)
        default:
            return (reject(identifier: signal.identifier), nil)
        }
    }

    /// L2CAP_COMMAND_REJECT_RSP with reason 0x0000 "command not understood" (Vol 3 Part A 4.1).
    public static func reject(identifier: UInt8) -> L2CAPSignal {
        L2CAPSignal(code: .commandReject, identifier: identifier, data: [0x00, 0x00])
    }
}

/// The SMP answer of a host that does not pair (Core v5.4 Vol 3 Part H 3.5.5): every request gets
/// Pairing Failed with reason 0x05 "Pairing Not Supported".
///
/// | Parameter | Size |
/// |---|---|
/// | Code (0x05) | 1 |
/// | Reason | 1 |
public enum SMPResponder {
    public static let pairingFailedCode: UInt8 = 0x05
    public static let pairingNotSupported: UInt8 = 0x05

    public static func respond(to bytes: [UInt8]) -> [UInt8]? {
        guard let code = bytes.first, code != pairingFailedCode else { return nil }
        return [pairingFailedCode, pairingNotSupported]
    }
}
