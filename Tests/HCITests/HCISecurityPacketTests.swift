import BLE
import BLESecurity
import HCI
import Testing

private func hex(_ s: String) -> [UInt8] { [UInt8](hex: s.replacingOccurrences(of: " ", with: "")) ?? [] }

/// Golden bytes of the encryption commands and events (Vol 4 Part E 7.8.24, 7.8.26, 7.7.8, 7.7.39,
/// 7.7.65.5), with truncated and oversized inputs that must throw.
@Suite struct HCISecurityPacketTests {
    @Test func leEnableEncryptionCarriesHandleRandEDIVAndTheKeyLeastSignificantOctetFirst() throws {
        let command = LEEnableEncryptionCommand(handle: 0x0040, rand: 0x0102_0304_0506_0708, ediv: 0x1234,
                                                ltk: Key128(0x0011_2233_4455_6677_8899_AABB_CCDD_EEFF))
        let golden = hex("1920 1c 4000 0807060504030201 3412 ffeeddccbbaa99887766554433221100")
        #expect(command.packet == golden)
        let parameters = Array(golden.dropFirst(3))
        #expect(try LEEnableEncryptionCommand(parameters: parameters) == command)
        #expect(throws: DecodeError.self) { try LEEnableEncryptionCommand(parameters: Array(parameters.dropLast())) }
        #expect(throws: DecodeError.self) { try LEEnableEncryptionCommand(parameters: parameters + [0]) }
        // Printing the command (a log line, an error) shows no byte of the key.
        for text in ["\(command)", String(reflecting: command)] {
            #expect(!text.contains("ffeedd") && !text.contains("00112233") && text.contains("redacted"))
        }
    }

    @Test func theSecurityManagersKeyBecomesTheCommandsKey() {
        let key = SMPEncryptionKey(ltk: Key128(0xABCD), ediv: 7, rand: 9, keySize: 16)
        #expect(LEEnableEncryptionCommand(handle: 1, key: key) == LEEnableEncryptionCommand(handle: 1, rand: 9, ediv: 7, ltk: Key128(0xABCD)))
    }

    @Test func longTermKeyNegativeReplyNamesTheHandle() throws {
        #expect(LELongTermKeyRequestNegativeReplyCommand(handle: 0x0040).packet == hex("1b20 02 4000"))
        #expect(try LELongTermKeyRequestNegativeReplyCommand(parameters: hex("4000")) == LELongTermKeyRequestNegativeReplyCommand(handle: 0x40))
        #expect(throws: DecodeError.self) { try LELongTermKeyRequestNegativeReplyCommand(parameters: hex("40")) }
    }

    private func roundTrip(_ golden: String, _ expected: HCIEvent) throws {
        let bytes = hex(golden)
        #expect(try HCIEvent(packet: bytes) == expected)
        #expect(expected.packet == bytes)
        var cut = Array(bytes.dropLast())
        cut[1] -= 1
        #expect(throws: DecodeError.self) { try HCIEvent(packet: cut) }
        var long = bytes + [0xEE]
        long[1] += 1
        #expect(throws: DecodeError.self) { try HCIEvent(packet: long) }
        #expect(throws: DecodeError.self) { try HCIEvent(packet: Array(bytes.dropLast())) }
    }

    @Test func encryptionChangeV1AndV2() throws {
        try roundTrip("08 04 00 4000 01", .encryptionChange(EncryptionChangeEvent(handle: 0x40, enabled: 1)))
        try roundTrip("59 05 00 4000 01 10", .encryptionChange(EncryptionChangeEvent(handle: 0x40, enabled: 1, keySize: 16)))
        let failed = try HCIEvent(packet: hex("08 04 06 4000 00"))
        #expect(failed == .encryptionChange(EncryptionChangeEvent(status: .pinOrKeyMissing, handle: 0x40, enabled: 0)))
        if case .encryptionChange(let e) = failed { #expect(!e.isEncrypted) }
    }

    @Test func encryptionKeyRefreshComplete() throws {
        try roundTrip("30 03 00 4000", .encryptionKeyRefreshComplete(EncryptionKeyRefreshCompleteEvent(handle: 0x40)))
    }

    @Test func leLongTermKeyRequest() throws {
        try roundTrip("3e 0d 05 4000 0807060504030201 3412",
                      .leLongTermKeyRequest(LELongTermKeyRequestEvent(handle: 0x40, rand: 0x0102_0304_0506_0708, ediv: 0x1234)))
    }

    @Test func statusesOfSecurityHaveNames() {
        #expect(HCIStatus.pinOrKeyMissing.description == "PIN or key missing (0x6)")
        #expect(HCIOpcode.leEnableEncryption.name == "LE Enable Encryption")
    }
}
