/// What the ATT client does with one PDU from the peer: a pure function of the bytes, the request
/// pending (if any) and the ATT_MTU, so the rules can be tested without a bearer or a clock.
///
/// - A response with no request pending is `stray` (dropped, counted).
/// - A response that is oversized, malformed, of the wrong opcode, or an Error Response naming another
///   request fails the pending request (`failPending`); a matching Error Response fails it with `.att`.
/// - Notifications and indications become `value`, or `drop` when oversized or truncated.
/// - A request from the peer is answered with Request Not Supported; other PDUs are dropped.
/// Indications must be confirmed whatever the action (`confirm`).
enum ATTInbound: Sendable, Equatable {
    case response(ATTPDU)
    case failPending(BLEError)
    case stray(String)
    case value(ATTValueEvent)
    case drop(String)
    case answerNotSupported(ATTOpcode)

    static func classify(_ bytes: [UInt8], pending: ATTOpcode?, mtu: Int) -> ATTInbound {
        guard let first = bytes.first else { return .drop("empty PDU") }
        let opcode = ATTOpcode(first)

        if opcode.isResponse {
            guard let request = pending else { return .stray("\(opcode.name) with no request outstanding") }
            guard bytes.count <= mtu else {
                return .failPending(.protocolError("\(opcode.name) of \(bytes.count) bytes exceeds ATT_MTU \(mtu)"))
            }
            let pdu: ATTPDU
            do {
                pdu = try ATTPDU(decoding: bytes)
            } catch {
                return .failPending(.protocolError("malformed \(opcode.name): \(error)"))
            }
            if case .errorResponse(let e) = pdu {
                guard e.requestOpcode == request else {
                    return .failPending(.protocolError("Error Response for \(e.requestOpcode.name) while \(request.name) was pending"))
                }
                return .failPending(.att(e.error))
            }
            guard opcode == request.responseOpcode else {
                return .failPending(.protocolError("\(opcode.name) in answer to \(request.name)"))
            }
            return .response(pdu)
        }

        switch opcode {
        case .handleValueNotification, .handleValueIndication:
            if bytes.count > mtu { return .drop("\(opcode.name) of \(bytes.count) bytes exceeds ATT_MTU \(mtu)") }
            if bytes.count < 3 { return .drop("truncated \(opcode.name) (\(bytes.count) bytes)") }
            let handle = UInt16(bytes[1]) | UInt16(bytes[2]) << 8
            return .value(ATTValueEvent(handle: handle, value: Array(bytes[3...]), isIndication: opcode == .handleValueIndication))
        default:
            if opcode.isCommand || opcode == .handleValueConfirmation { return .drop("unexpected \(opcode.name)") }
            return .answerNotSupported(opcode)
        }
    }

    /// True for an indication: it is confirmed even when dropped, so the server's queue moves on.
    static func needsConfirmation(_ bytes: [UInt8]) -> Bool {
        bytes.first == ATTOpcode.handleValueIndication.rawValue
    }
}
