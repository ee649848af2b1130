/// An ATT opcode (Vol 3 Part F 3.4.8). Open: an opcode this host does not know is kept, not trapped on.
public struct ATTOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    public static let errorResponse = ATTOpcode(0x01)
    public static let exchangeMTURequest = ATTOpcode(0x02)
    public static let exchangeMTUResponse = ATTOpcode(0x03)
    public static let findInformationRequest = ATTOpcode(0x04)
    public static let findInformationResponse = ATTOpcode(0x05)
    public static let findByTypeValueRequest = ATTOpcode(0x06)
    public static let findByTypeValueResponse = ATTOpcode(0x07)
    public static let readByTypeRequest = ATTOpcode(0x08)
    public static let readByTypeResponse = ATTOpcode(0x09)
    public static let readRequest = ATTOpcode(0x0A)
    public static let readResponse = ATTOpcode(0x0B)
    public static let readBlobRequest = ATTOpcode(0x0C)
    public static let readBlobResponse = ATTOpcode(0x0D)
    public static let readMultipleRequest = ATTOpcode(0x0E)
    public static let readMultipleResponse = ATTOpcode(0x0F)
    public static let readByGroupTypeRequest = ATTOpcode(0x10)
    public static let readByGroupTypeResponse = ATTOpcode(0x11)
    public static let writeRequest = ATTOpcode(0x12)
    public static let writeResponse = ATTOpcode(0x13)
    public static let prepareWriteRequest = ATTOpcode(0x16)
    public static let prepareWriteResponse = ATTOpcode(0x17)
    public static let executeWriteRequest = ATTOpcode(0x18)
    public static let executeWriteResponse = ATTOpcode(0x19)
    public static let handleValueNotification = ATTOpcode(0x1B)
    public static let handleValueIndication = ATTOpcode(0x1D)
    public static let handleValueConfirmation = ATTOpcode(0x1E)
    public static let readMultipleVariableRequest = ATTOpcode(0x20)
    public static let readMultipleVariableResponse = ATTOpcode(0x21)
    public static let writeCommand = ATTOpcode(0x52)
    public static let signedWriteCommand = ATTOpcode(0xD2)

    /// Bit 6: a command (no response expected).
    public var isCommand: Bool { rawValue & 0x40 != 0 }

    /// The response opcode that completes this request, if it is a request.
    public var responseOpcode: ATTOpcode? {
        switch self {
        case .exchangeMTURequest, .findInformationRequest, .findByTypeValueRequest, .readByTypeRequest,
             .readRequest, .readBlobRequest, .readMultipleRequest, .readByGroupTypeRequest, .writeRequest,
             .prepareWriteRequest, .executeWriteRequest, .readMultipleVariableRequest:
            return ATTOpcode(rawValue + 1)
        default:
            return nil
        }
    }

    public var isRequest: Bool { responseOpcode != nil }

    /// Responses to requests (and the Error Response).
    public var isResponse: Bool {
        switch self {
        case .errorResponse, .exchangeMTUResponse, .findInformationResponse, .findByTypeValueResponse,
             .readByTypeResponse, .readResponse, .readBlobResponse, .readMultipleResponse,
             .readByGroupTypeResponse, .writeResponse, .prepareWriteResponse, .executeWriteResponse,
             .readMultipleVariableResponse:
            return true
        default:
            return false
        }
    }

    public var name: String {
        switch self {
        case .errorResponse: return "Error Response"
        case .exchangeMTURequest: return "Exchange MTU Request"
        case .exchangeMTUResponse: return "Exchange MTU Response"
        case .findInformationRequest: return "Find Information Request"
        case .findInformationResponse: return "Find Information Response"
        case .findByTypeValueRequest: return "Find By Type Value Request"
        case .findByTypeValueResponse: return "Find By Type Value Response"
        case .readByTypeRequest: return "Read By Type Request"
        case .readByTypeResponse: return "Read By Type Response"
        case .readRequest: return "Read Request"
        case .readResponse: return "Read Response"
        case .readBlobRequest: return "Read Blob Request"
        case .readBlobResponse: return "Read Blob Response"
        case .readMultipleRequest: return "Read Multiple Request"
        case .readMultipleResponse: return "Read Multiple Response"
        case .readByGroupTypeRequest: return "Read By Group Type Request"
        case .readByGroupTypeResponse: return "Read By Group Type Response"
        case .writeRequest: return "Write Request"
        case .writeResponse: return "Write Response"
        case .prepareWriteRequest: return "Prepare Write Request"
        case .prepareWriteResponse: return "Prepare Write Response"
        case .executeWriteRequest: return "Execute Write Request"
        case .executeWriteResponse: return "Execute Write Response"
        case .handleValueNotification: return "Handle Value Notification"
        case .handleValueIndication: return "Handle Value Indication"
        case .handleValueConfirmation: return "Handle Value Confirmation"
        case .readMultipleVariableRequest: return "Read Multiple Variable Length Request"
        case .readMultipleVariableResponse: return "Read Multiple Variable Length Response"
        case .writeCommand: return "Write Command"
        case .signedWriteCommand: return "Signed Write Command"
        default: return "opcode 0x\(String(rawValue, radix: 16))"
        }
    }

    public var description: String { name }
}
