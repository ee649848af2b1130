import BLE
import BLESecurity
import Testing

/// The toolbox against the Core specification's sample data (Vol 3 Part H, 2.2.3, 2.2.4 and Appendix D).
@Suite struct SMPCryptoTests {
    @Test func c1MatchesTheSampleIn2_2_3() throws {
        let value = try SMPCrypto.c1(k: 0, r: try u128("5783D52156AD6F0E6388274EC6702EE0"),
                                     preq: 0x07071000000101, pres: 0x05000800000302,
                                     iat: 1, ia: 0xA1A2A3A4A5A6, rat: 0, ra: 0xB1B2B3B4B5B6)
        #expect(value == (try u128("1e1e3fef878988ead2a74dc5bef13b86")))
    }

    @Test func c1TakesTheCommandsAsTheyAreOnTheWire() throws {
        // The sample's preq/pres are the 7-octet commands read least significant octet first.
        let request = SMPPairingParameters(ioCapability: .displayYesNo, oobDataFlag: 0, authRequirements: [],
                                           maxEncryptionKeySize: 16, initiatorKeys: [.encryptionKey, .identityKey, .signingKey],
                                           responderKeys: [.encryptionKey, .identityKey, .signingKey])
        // Wire 02 03 00 00 08 00 05: NoInputNoOutput, no OOB, no bonding, 8-octet keys, EncKey|SignKey.
        let sampleResponse = SMPPairingParameters(ioCapability: .noInputNoOutput, oobDataFlag: 0, authRequirements: [],
                                                  maxEncryptionKeySize: 8, initiatorKeys: [], responderKeys: [.encryptionKey, .signingKey])
        #expect(request.c1Value(code: .pairingRequest) == 0x07071000000101)
        #expect(sampleResponse.c1Value(code: .pairingResponse) == 0x05000800000302)
        let ia = try #require(BluetoothAddress("A1:A2:A3:A4:A5:A6", kind: .random))
        let ra = try #require(BluetoothAddress("B1:B2:B3:B4:B5:B6", kind: .public))
        let value = try SMPCrypto.c1(k: 0, r: try u128("5783D52156AD6F0E6388274EC6702EE0"),
                                     request: request, response: sampleResponse, initiator: ia, responder: ra)
        #expect(value == (try u128("1e1e3fef878988ead2a74dc5bef13b86")))
    }

    @Test func s1MatchesTheSampleIn2_2_4() throws {
        let value = try SMPCrypto.s1(k: 0, r1: try u128("000F0E0D0C0B0A091122334455667788"),
                                     r2: try u128("010203040506070899AABBCCDDEEFF00"))
        #expect(value == (try u128("9a1fe1f0e8b0f49b5b4216ae796da062")))
    }

    @Test func f4MatchesAppendixD2() throws {
        let value = try SMPCrypto.f4(u: try bytes(SpecKeys.publicAX), v: try bytes(SpecKeys.privateB),
                                     x: try u128("d5cb8454 d177733e ffffb2ec 712baeab"), z: 0)
        #expect(value == (try u128("f2c916f1 07a9bd1c f1eda1be a974872d")))
    }

    @Test func f5MatchesAppendixD3() throws {
        let w = try #require(DHKey(bigEndianBytes: try bytes(SpecKeys.dhKey)))
        let keys = try SMPCrypto.f5(w: w, n1: try u128("d5cb8454 d177733e ffffb2ec 712baeab"),
                                    n2: try u128("a6e8e7cc 25a75f6e 216583f7 ff3dc4cf"),
                                    a1: 0x00_5612_3737_bfce, a2: 0x00_a713_702d_cfc1)
        #expect(keys.macKey == (try u128("2965f176 a1084a02 fd3f6a20 ce636e20")))
        #expect(keys.ltk == (try u128("69867911 69d7cd23 980522b5 94750a38")))
    }

    @Test func f6MatchesAppendixD4() throws {
        let value = try SMPCrypto.f6(w: try u128("2965f176 a1084a02 fd3f6a20 ce636e20"),
                                     n1: try u128("d5cb8454 d177733e ffffb2ec 712baeab"),
                                     n2: try u128("a6e8e7cc 25a75f6e 216583f7 ff3dc4cf"),
                                     r: try u128("12a3343b b453bb54 08da42d2 0c2d0fc8"),
                                     ioCap: 0x010102, a1: 0x00_5612_3737_bfce, a2: 0x00_a713_702d_cfc1)
        #expect(value == (try u128("e3c47398 9cd0e8c5 d26c0b09 da958f61")))
    }

    @Test func g2MatchesAppendixD5() throws {
        let value = try SMPCrypto.g2(u: try bytes(SpecKeys.publicAX), v: try bytes(SpecKeys.privateB),
                                     x: try u128("d5cb8454 d177733e ffffb2ec 712baeab"),
                                     y: try u128("a6e8e7cc 25a75f6e 216583f7 ff3dc4cf"))
        #expect(value == 0x2f9ed5ba)
        #expect(value % 1_000_000 == 938_554)
    }

    @Test func h6MatchesAppendixD6() throws {
        let value = try SMPCrypto.h6(w: try u128("ec0234a3 57c8ad05 341010a6 0a397d9b"), keyID: 0x6c656272)
        #expect(value == (try u128("2d9ae102 e76dc91c e8d3a9e2 80b16399")))
    }

    @Test func h7MatchesAppendixD8() throws {
        let value = try SMPCrypto.h7(salt: 0x746D7031, w: try u128("ec0234a3 57c8ad05 341010a6 0a397d9b"))
        #expect(value == (try u128("fb173597 c6a3c0ec d2998c2a 75a57011")))
    }

    @Test func ahMatchesAppendixD7() throws {
        let value = try SMPCrypto.ah(k: try u128("ec0234a3 57c8ad05 341010a6 0a397d9b"), r: 0x708194)
        #expect(value == 0x0dfbaa)
    }

    @Test func addressValuesPutTheTypeAboveTheAddress() throws {
        let a = try #require(BluetoothAddress("56:12:37:37:BF:CE", kind: .public))
        let b = try #require(BluetoothAddress("A7:13:70:2D:CF:C1", kind: .random))
        #expect(SMPCrypto.addressValue(a) == 0x00_5612_3737_bfce)
        #expect(SMPCrypto.addressValue(b) == 0x01_a713_702d_cfc1)
    }

    @Test func wrongSizedCoordinatesAreRefused() {
        #expect(throws: CryptoError.self) { try SMPCrypto.f4(u: [1], v: [UInt8](repeating: 0, count: 32), x: 0, z: 0) }
        #expect(throws: CryptoError.self) { try SMPCrypto.g2(u: [UInt8](repeating: 0, count: 32), v: [2], x: 0, y: 0) }
    }
}
