import Testing
@testable import BLE

/// Bytes from hex written with spaces for readability.
private func b(_ hex: String) -> [UInt8] {
    guard let v = [UInt8](hex: hex) else { preconditionFailure("bad hex in the test itself: \(hex)") }
    return v
}

private let uuid128 = BluetoothUUID("6E400001-B5A3-F393-E0A9-E50E24DCCA9E")!
/// The 128-bit UUID above, least significant byte first (its ATT wire form).
private let uuid128Wire = "9e ca dc 24 0e e5 a9 e0 93 f3 a3 b5 01 00 40 6e"

/// Every ATT PDU against hex checked by hand from Vol 3 Part F 3.4 (opcode first, little-endian fields).
private let golden: [(String, ATTPDU)] = [
    ("01 0a 0300 0a", .errorResponse(ATTErrorResponse(requestOpcode: .readRequest, handle: 3, code: .attributeNotFound))),
    ("01 12 0900 05", .errorResponse(ATTErrorResponse(requestOpcode: .writeRequest, handle: 9, code: .insufficientAuthentication))),
    ("01 0a 0300 0f", .errorResponse(ATTErrorResponse(requestOpcode: .readRequest, handle: 3, code: .insufficientEncryption))),
    ("02 f700", .exchangeMTURequest(ATTExchangeMTU(mtu: 247))),
    ("03 1700", .exchangeMTUResponse(ATTExchangeMTU(mtu: 23))),
    ("04 0100 ffff", .findInformationRequest(ATTFindInformationRequest(range: ATTHandleRange(start: 1, end: 0xFFFF)))),
    ("05 01 0300 0229 0400 0129", .findInformationResponse(ATTFindInformationResponse(entries: [
        .init(handle: 3, type: BluetoothUUID(0x2902)), .init(handle: 4, type: BluetoothUUID(0x2901))]))),
    ("05 02 1000 " + uuid128Wire, .findInformationResponse(ATTFindInformationResponse(entries: [.init(handle: 0x10, type: uuid128)]))),
    // A SIG UUID declared in its 128-bit form keeps that form.
    ("05 02 1100 fb349b5f8000008000100000192a0000", .findInformationResponse(ATTFindInformationResponse(
        entries: [.init(handle: 0x11, type: BluetoothUUID(0x2A19))], uses128BitUUIDs: true))),
    ("06 0100 ffff 0028 f0ff", .findByTypeValueRequest(ATTFindByTypeValueRequest(
        range: ATTHandleRange(start: 1, end: 0xFFFF), type: 0x2800, value: [0xF0, 0xFF]))),
    ("07 0400 0b00 2000 2f00", .findByTypeValueResponse(ATTFindByTypeValueResponse(ranges: [
        ATTHandleRange(start: 4, end: 11), ATTHandleRange(start: 0x20, end: 0x2F)]))),
    ("08 0100 ffff 0328", .readByTypeRequest(ATTReadByTypeRequest(range: ATTHandleRange(start: 1, end: 0xFFFF), type: .characteristic))),
    ("08 0100 ffff " + uuid128Wire, .readByTypeRequest(ATTReadByTypeRequest(range: ATTHandleRange(start: 1, end: 0xFFFF), type: uuid128))),
    ("09 07 0200 02 0300 292a 0400 02 0500 242a", .readByTypeResponse(ATTReadByTypeResponse(entries: [
        .init(handle: 2, value: b("02 0300 292a")), .init(handle: 4, value: b("02 0500 242a"))]))),
    ("0a 0300", .readRequest(ATTReadRequest(handle: 3))),
    ("0b 41636d65", .readResponse(Array("Acme".utf8))),
    ("0b", .readResponse([])),
    ("0c 0300 1600", .readBlobRequest(ATTReadBlobRequest(handle: 3, offset: 22))),
    ("0d 5a5a", .readBlobResponse([0x5A, 0x5A])),
    ("0e 0300 0500", .readMultipleRequest(ATTReadMultipleRequest(handles: [3, 5]))),
    ("0f 0102", .readMultipleResponse([1, 2])),
    ("10 0100 ffff 0028", .readByGroupTypeRequest(ATTReadByTypeRequest(range: ATTHandleRange(start: 1, end: 0xFFFF), type: .primaryService))),
    ("11 06 0100 0300 0a18 0400 0b00 f0ff", .readByGroupTypeResponse(ATTReadByGroupTypeResponse(entries: [
        .init(handle: 1, endGroupHandle: 3, value: [0x0A, 0x18]), .init(handle: 4, endGroupHandle: 11, value: [0xF0, 0xFF])]))),
    ("11 14 2000 2f00 " + uuid128Wire, .readByGroupTypeResponse(ATTReadByGroupTypeResponse(entries: [
        .init(handle: 0x20, endGroupHandle: 0x2F, value: b(uuid128Wire))]))),
    ("12 0900 0100", .writeRequest(ATTHandleValue(handle: 9, value: [1, 0]))),
    ("13", .writeResponse),
    ("16 0600 0000 010203", .prepareWriteRequest(ATTPrepareWrite(handle: 6, offset: 0, value: [1, 2, 3]))),
    ("17 0600 1200 04", .prepareWriteResponse(ATTPrepareWrite(handle: 6, offset: 18, value: [4]))),
    ("18 01", .executeWriteRequest(ATTExecuteWriteRequest(commit: true))),
    ("18 00", .executeWriteRequest(ATTExecuteWriteRequest(commit: false))),
    ("19", .executeWriteResponse),
    ("1b 0800 0100", .handleValueNotification(ATTHandleValue(handle: 8, value: [1, 0]))),
    ("1b 0800", .handleValueNotification(ATTHandleValue(handle: 8, value: []))),
    ("1d 0800 07", .handleValueIndication(ATTHandleValue(handle: 8, value: [7]))),
    ("1e", .handleValueConfirmation),
    ("52 0b00 aabb", .writeCommand(ATTHandleValue(handle: 11, value: [0xAA, 0xBB]))),
    ("20 0300 0500 0900", .readMultipleVariableRequest(ATTReadMultipleVariableRequest(handles: [3, 5, 9]))),
    ("21 0400 41636d65 0100 57", .readMultipleVariableResponse(ATTReadMultipleVariableResponse(tuples: [
        .init(Array("Acme".utf8)), .init([0x57])]))),
    ("21 0000 0000", .readMultipleVariableResponse(ATTReadMultipleVariableResponse(tuples: [.init([]), .init([])]))),
    // Cut by the MTU inside the last value: 5 announced, 2 arrived.
    ("21 0100 01 0500 3131", .readMultipleVariableResponse(ATTReadMultipleVariableResponse(tuples: [
        .init([0x01]), .init(length: 5, value: [0x31, 0x31])]))),
    // Cut inside the next tuple's Value Length.
    ("21 0200 0102 03", .readMultipleVariableResponse(ATTReadMultipleVariableResponse(tuples: [.init([1, 2])], cutLength: 0x03))),
    ("d2 0b00 aa", .unknown(opcode: .signedWriteCommand, payload: b("0b00 aa"))),
    ("3f 0102", .unknown(opcode: ATTOpcode(0x3F), payload: [1, 2])),
]

/// Inputs that must throw: truncated, oversized (trailing bytes) and wrong-length lists.
private let malformed: [String] = [
    "",                         // no opcode
    "01 0a 0300",               // Error Response without its code
    "01 0a 0300 0a ff",         // ... with a trailing byte
    "02 f7",                    // Exchange MTU cut short
    "02 f700 00",               // ... oversized
    "03",
    "04 0100",                  // Find Information without the end handle
    "04 0100 ffff 00",
    "05 01",                    // Find Information Response with no entries
    "05 03 0300 0229",          // unknown format
    "05 01 0300 02",            // partial entry
    "05 02 0300 0229",          // 128-bit format with a 16-bit entry
    "06 0100 ffff 00",          // Find By Type Value without the full type
    "07",                       // Find By Type Value Response with no entries
    "07 0400 0b",               // partial entry
    "08 0100 ffff 0328 00",     // a 3-byte type
    "08 0100 ffff",             // no type
    "09 01 0200",               // length shorter than a handle
    "09 07 0200 02 0300 29",    // list not a whole number of 7-byte entries
    "09 07",                    // no entries
    "0a 03",                    // Read Request cut short
    "0a 0300 00",               // ... oversized
    "0c 0300 16",               // Read Blob Request cut short
    "0e 0300",                  // Read Multiple with one handle
    "0e 0300 0500 06",          // odd length
    "10 0100 ffff 00",          // Read By Group Type with a 1-byte type
    "11 03 0100 03",            // length shorter than two handles
    "11 06 0100 0300 0a",       // partial entry
    "12 09",                    // Write Request without a whole handle
    "13 00",                    // Write Response with a body
    "16 0600 00",               // Prepare Write without a whole offset
    "17 06",
    "18",                       // Execute Write without flags
    "18 02",                    // invalid flags
    "18 01 00",                 // oversized
    "19 00",
    "1b 08",                    // notification without a whole handle
    "1d",
    "1e 00",
    "52 0b",
    "20 0300",                  // Read Multiple Variable Length with one handle
    "20 0300 0500 06",          // odd length
    "20",                       // no handles
    "21",                       // Read Multiple Variable Length Response with no tuple
    "21 04",                    // ... with half a length
    "21 0102 00",               // a Value Length of 513
]

@Suite struct ATTPDUTests {
    @Test(arguments: golden.indices)
    func everyPDURoundTripsThroughItsGoldenBytes(_ i: Int) throws {
        let (hex, pdu) = golden[i]
        let bytes = b(hex)
        #expect(pdu.bytes == bytes, "encoding \(pdu.opcode.name)")
        let decoded = try ATTPDU(decoding: bytes)
        #expect(decoded == pdu, "decoding \(hex)")
        #expect(decoded.bytes == bytes)
        #expect(decoded.opcode == pdu.opcode)
    }

    @Test(arguments: malformed)
    func malformedInputsThrow(_ hex: String) {
        #expect(throws: DecodeError.self) { _ = try ATTPDU(decoding: b(hex)) }
    }

    @Test func everyKnownOpcodeIsCoveredByAGoldenCase() {
        let covered = Set(golden.map { $0.1.opcode })
        let known: [ATTOpcode] = [.errorResponse, .exchangeMTURequest, .exchangeMTUResponse, .findInformationRequest,
            .findInformationResponse, .findByTypeValueRequest, .findByTypeValueResponse, .readByTypeRequest,
            .readByTypeResponse, .readRequest, .readResponse, .readBlobRequest, .readBlobResponse, .readMultipleRequest,
            .readMultipleResponse, .readByGroupTypeRequest, .readByGroupTypeResponse, .writeRequest, .writeResponse,
            .prepareWriteRequest, .prepareWriteResponse, .executeWriteRequest, .executeWriteResponse,
            .handleValueNotification, .handleValueIndication, .handleValueConfirmation, .writeCommand, .signedWriteCommand,
            .readMultipleVariableRequest, .readMultipleVariableResponse]
        #expect(known.filter { !covered.contains($0) } == [])
    }

    @Test func aCutTupleIsIncompleteAndAWholeOneIsComplete() throws {
        guard case .readMultipleVariableResponse(let r) = try ATTPDU(decoding: b("21 0100 01 0500 3131")) else {
            Issue.record("not a Read Multiple Variable Length Response")
            return
        }
        #expect(r.tuples.map(\.isComplete) == [true, false])
        #expect(r.cutLength == nil)
    }

    @Test func opcodesKnowTheirResponses() {
        #expect(ATTOpcode.readRequest.responseOpcode == .readResponse)
        #expect(ATTOpcode.executeWriteRequest.responseOpcode == .executeWriteResponse)
        #expect(ATTOpcode.writeCommand.responseOpcode == nil)
        #expect(ATTOpcode.readMultipleVariableRequest.responseOpcode == .readMultipleVariableResponse)
        #expect(ATTOpcode.readMultipleVariableResponse.isResponse)
        #expect(ATTOpcode.writeCommand.isCommand)
        #expect(ATTOpcode.errorResponse.isResponse)
        #expect(!ATTOpcode.handleValueNotification.isResponse)
    }
}
