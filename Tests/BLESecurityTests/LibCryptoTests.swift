import BLESecurity
import Testing

@Suite struct LibCryptoTests {
    @Test func aes128EncryptsTheFIPS197ExampleBlock() throws {
        // FIPS-197 Appendix C.1 (AES-128).
        let out = try LibCrypto.aes128Encrypt(key: try bytes("000102030405060708090a0b0c0d0e0f"),
                                              block: try bytes("00112233445566778899aabbccddeeff"))
        #expect(out == (try bytes("69c4e0d86a7b0430d8cdb78070b4c55a")))
    }

    @Test func aesCMACMatchesTheCoreSpecificationSampleData() throws {
        // Vol 3 Part H, D.1 (the RFC 4493 examples): messages of 0, 16, 40 and 64 octets.
        let key = try bytes("2b7e1516 28aed2a6 abf71588 09cf4f3c")
        let m64 = try bytes("6bc1bee2 2e409f96 e93d7e11 7393172a ae2d8a57 1e03ac9c 9eb76fac 45af8e51 30c81c46 a35ce411 e5fbc119 1a0a52ef f69f2445 df4f9b17 ad2b417b e66c3710")
        #expect(try LibCrypto.aesCMAC(key: key, message: []) == (try bytes("bb1d6929 e9593728 7fa37d12 9b756746")))
        #expect(try LibCrypto.aesCMAC(key: key, message: Array(m64.prefix(16))) == (try bytes("070a16b4 6b4d4144 f79bdd9d d04a287c")))
        #expect(try LibCrypto.aesCMAC(key: key, message: Array(m64.prefix(40))) == (try bytes("dfa66747 de9ae630 30ca3261 1497c827")))
        #expect(try LibCrypto.aesCMAC(key: key, message: m64) == (try bytes("51f0bebf 7e3b9d92 fc497417 79363cfe")))
    }

    @Test func wrongSizedKeysAndBlocksAreRefusedWithAClearError() {
        #expect(throws: CryptoError.self) { try LibCrypto.aes128Encrypt(key: [UInt8](repeating: 0, count: 15), block: [UInt8](repeating: 0, count: 16)) }
        #expect(throws: CryptoError.self) { try LibCrypto.aes128Encrypt(key: [UInt8](repeating: 0, count: 16), block: [UInt8](repeating: 0, count: 17)) }
        do {
            _ = try LibCrypto.aesCMAC(key: [1, 2, 3], message: [])
            Issue.record("a 3-byte key was accepted")
        } catch {
            #expect(error.kind == .invalidInput)
            #expect(error.description.contains("16 bytes"))
        }
    }

    @Test func randomBytesHaveTheAskedLengthAndDiffer() throws {
        let a = try LibCrypto.randomBytes(32), b = try LibCrypto.randomBytes(32)
        #expect(a.count == 32 && b.count == 32)
        #expect(a != b)
        #expect(try LibCrypto.randomBytes(0).isEmpty)
        #expect(throws: CryptoError.self) { try LibCrypto.randomBytes(-1) }
    }

    @Test func cleanseZeroesABuffer() {
        var secret: [UInt8] = [1, 2, 3, 4]
        LibCrypto.cleanse(&secret)
        #expect(secret == [0, 0, 0, 0])
    }
}
