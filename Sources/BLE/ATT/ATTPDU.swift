/// Every ATT PDU this host sends or receives, decoded from (and encoded to) its bytes, opcode first.
///
/// One registry: `init(decoding:)` dispatches on the opcode. An opcode this host does not know becomes
/// `.unknown(opcode, payload)`; a known opcode with a malformed body throws `DecodeError`.
public enum ATTPDU: Sendable, Hashable {
    case errorResponse(ATTErrorResponse)
    case exchangeMTURequest(ATTExchangeMTU)
    case exchangeMTUResponse(ATTExchangeMTU)
    case findInformationRequest(ATTFindInformationRequest)
    case findInformationResponse(ATTFindInformationResponse)
    case findByTypeValueRequest(ATTFindByTypeValueRequest)
    case findByTypeValueResponse(ATTFindByTypeValueResponse)
    case readByTypeRequest(ATTReadByTypeRequest)
    case readByTypeResponse(ATTReadByTypeResponse)
    case readRequest(ATTReadRequest)
    case readResponse([UInt8])
    case readBlobRequest(ATTReadBlobRequest)
    case readBlobResponse([UInt8])
    case readMultipleRequest(ATTReadMultipleRequest)
    case readMultipleResponse([UInt8])
    case readByGroupTypeRequest(ATTReadByTypeRequest)
    case readByGroupTypeResponse(ATTReadByGroupTypeResponse)
    case writeRequest(ATTHandleValue)
    case writeResponse
    case writeCommand(ATTHandleValue)
    case prepareWriteRequest(ATTPrepareWrite)
    case prepareWriteResponse(ATTPrepareWrite)
    case executeWriteRequest(ATTExecuteWriteRequest)
    case executeWriteResponse
    case handleValueNotification(ATTHandleValue)
    case handleValueIndication(ATTHandleValue)
    case handleValueConfirmation
    case readMultipleVariableRequest(ATTReadMultipleVariableRequest)
    case readMultipleVariableResponse(ATTReadMultipleVariableResponse)
    case unknown(opcode: ATTOpcode, payload: [UInt8])

    /// Decodes one PDU. Empty input, or a known opcode with a malformed body, throws.
    public init(decoding bytes: [UInt8]) throws(DecodeError) {
        var r = ByteReader(bytes)
        let opcode = ATTOpcode(try r.readUInt8("ATT opcode"))
        switch opcode {
        case .errorResponse: self = .errorResponse(try ATTErrorResponse(from: &r))
        case .exchangeMTURequest: self = .exchangeMTURequest(try ATTExchangeMTU(from: &r))
        case .exchangeMTUResponse: self = .exchangeMTUResponse(try ATTExchangeMTU(from: &r))
        case .findInformationRequest: self = .findInformationRequest(try ATTFindInformationRequest(from: &r))
        case .findInformationResponse: self = .findInformationResponse(try ATTFindInformationResponse(from: &r))
        case .findByTypeValueRequest: self = .findByTypeValueRequest(try ATTFindByTypeValueRequest(from: &r))
        case .findByTypeValueResponse: self = .findByTypeValueResponse(try ATTFindByTypeValueResponse(from: &r))
        case .readByTypeRequest: self = .readByTypeRequest(try ATTReadByTypeRequest(from: &r))
        case .readByTypeResponse: self = .readByTypeResponse(try ATTReadByTypeResponse(from: &r))
        case .readRequest: self = .readRequest(try ATTReadRequest(from: &r))
        case .readResponse: self = .readResponse(r.readRemaining())
        case .readBlobRequest: self = .readBlobRequest(try ATTReadBlobRequest(from: &r))
        case .readBlobResponse: self = .readBlobResponse(r.readRemaining())
        case .readMultipleRequest: self = .readMultipleRequest(try ATTReadMultipleRequest(from: &r))
        case .readMultipleResponse: self = .readMultipleResponse(r.readRemaining())
        case .readByGroupTypeRequest: self = .readByGroupTypeRequest(try ATTReadByTypeRequest(from: &r))
        case .readByGroupTypeResponse: self = .readByGroupTypeResponse(try ATTReadByGroupTypeResponse(from: &r))
        case .writeRequest: self = .writeRequest(try ATTHandleValue(from: &r))
        case .writeResponse:
            try r.expectEnd("Write Response")
            self = .writeResponse
        case .writeCommand: self = .writeCommand(try ATTHandleValue(from: &r))
        case .prepareWriteRequest: self = .prepareWriteRequest(try ATTPrepareWrite(from: &r))
        case .prepareWriteResponse: self = .prepareWriteResponse(try ATTPrepareWrite(from: &r))
        case .executeWriteRequest: self = .executeWriteRequest(try ATTExecuteWriteRequest(from: &r))
        case .executeWriteResponse:
            try r.expectEnd("Execute Write Response")
            self = .executeWriteResponse
        case .handleValueNotification: self = .handleValueNotification(try ATTHandleValue(from: &r))
        case .handleValueIndication: self = .handleValueIndication(try ATTHandleValue(from: &r))
        case .handleValueConfirmation:
            try r.expectEnd("Handle Value Confirmation")
            self = .handleValueConfirmation
        case .readMultipleVariableRequest: self = .readMultipleVariableRequest(try ATTReadMultipleVariableRequest(from: &r))
        case .readMultipleVariableResponse: self = .readMultipleVariableResponse(try ATTReadMultipleVariableResponse(from: &r))
        default: self = .unknown(opcode: opcode, payload: r.readRemaining())
        }
    }

    public var opcode: ATTOpcode {
        switch self {
        case .errorResponse: return .errorResponse
        case .exchangeMTURequest: return .exchangeMTURequest
        case .exchangeMTUResponse: return .exchangeMTUResponse
        case .findInformationRequest: return .findInformationRequest
        case .findInformationResponse: return .findInformationResponse
        case .findByTypeValueRequest: return .findByTypeValueRequest
        case .findByTypeValueResponse: return .findByTypeValueResponse
        case .readByTypeRequest: return .readByTypeRequest
        case .readByTypeResponse: return .readByTypeResponse
        case .readRequest: return .readRequest
        case .readResponse: return .readResponse
        case .readBlobRequest: return .readBlobRequest
        case .readBlobResponse: return .readBlobResponse
        case .readMultipleRequest: return .readMultipleRequest
        case .readMultipleResponse: return .readMultipleResponse
        case .readByGroupTypeRequest: return .readByGroupTypeRequest
        case .readByGroupTypeResponse: return .readByGroupTypeResponse
        case .writeRequest: return .writeRequest
        case .writeResponse: return .writeResponse
        case .writeCommand: return .writeCommand
        case .prepareWriteRequest: return .prepareWriteRequest
        case .prepareWriteResponse: return .prepareWriteResponse
        case .executeWriteRequest: return .executeWriteRequest
        case .executeWriteResponse: return .executeWriteResponse
        case .handleValueNotification: return .handleValueNotification
        case .handleValueIndication: return .handleValueIndication
        case .handleValueConfirmation: return .handleValueConfirmation
        case .readMultipleVariableRequest: return .readMultipleVariableRequest
        case .readMultipleVariableResponse: return .readMultipleVariableResponse
        case .unknown(let opcode, _): return opcode
        }
    }

    /// The PDU's bytes, opcode first.
    public var bytes: [UInt8] {
        var w = ByteWriter()
        w.write(opcode.rawValue)
        switch self {
        case .errorResponse(let p): p.encode(into: &w)
        case .exchangeMTURequest(let p), .exchangeMTUResponse(let p): p.encode(into: &w)
        case .findInformationRequest(let p): p.encode(into: &w)
        case .findInformationResponse(let p): p.encode(into: &w)
        case .findByTypeValueRequest(let p): p.encode(into: &w)
        case .findByTypeValueResponse(let p): p.encode(into: &w)
        case .readByTypeRequest(let p), .readByGroupTypeRequest(let p): p.encode(into: &w)
        case .readByTypeResponse(let p): p.encode(into: &w)
        case .readRequest(let p): p.encode(into: &w)
        case .readResponse(let v), .readBlobResponse(let v), .readMultipleResponse(let v): w.write(v)
        case .readBlobRequest(let p): p.encode(into: &w)
        case .readMultipleRequest(let p): p.encode(into: &w)
        case .readByGroupTypeResponse(let p): p.encode(into: &w)
        case .writeRequest(let p), .writeCommand(let p), .handleValueNotification(let p), .handleValueIndication(let p):
            p.encode(into: &w)
        case .prepareWriteRequest(let p), .prepareWriteResponse(let p): p.encode(into: &w)
        case .executeWriteRequest(let p): p.encode(into: &w)
        case .readMultipleVariableRequest(let p): p.encode(into: &w)
        case .readMultipleVariableResponse(let p): p.encode(into: &w)
        case .writeResponse, .executeWriteResponse, .handleValueConfirmation: break
        case .unknown(_, let payload): w.write(payload)
        }
        return w.bytes
    }
}
