import BLESecurity
import Testing

/// The debug key pairs and DHKey of Vol 3 Part H, 2.3.5.6.1 and Appendix D.
enum SpecKeys {
    static let privateA = "3f49f6d4 a3c55f38 74c9b3e3 d2103f50 4aff607b eb40b799 5899b8a6 cd3c1abd"
    static let publicAX = "20b003d2 f297be2c 5e2c83a7 e9f9a5b9 eff49111 acf4fddb cc030148 0e359de6"
    static let publicAY = "dc809c49 652aeb6d 63329abf 5a52155c 766345c2 8fed3024 741c8ed0 1589d28b"
    static let privateB = "55188b3d 32f6bb9a 900afcfb eed4e72a 59cb9ac2 f19d7cfb 6b4fdd49 f47fc5fd"
    static let publicBX = "1ea1f0f0 1faf1d96 09592284 f19e4c00 47b58afd 8615a69f 559077b2 2faaa190"
    static let publicBY = "4c55f33e 429dad37 7356703a 9ab85160 472d1130 e28e3676 5f89aff9 15b1214a"
    static let dhKey = "ec0234a3 57c8ad05 341010a6 0a397d9b 99796b13 b4f866f1 868d34f3 73bfa698"

    static func pairA() throws -> P256KeyPair { try P256KeyPair(privateKey: try bytes(privateA)) }
    static func pairB() throws -> P256KeyPair { try P256KeyPair(privateKey: try bytes(privateB)) }
    static func publicB() throws -> P256PublicKey { try #require(P256PublicKey(x: try bytes(publicBX), y: try bytes(publicBY))) }
}

@Suite struct P256Tests {
    @Test func theSpecificationsPrivateKeysGiveItsPublicKeys() throws {
        let a = try SpecKeys.pairA(), b = try SpecKeys.pairB()
        #expect(a.publicKey.x == (try bytes(SpecKeys.publicAX)))
        #expect(a.publicKey.y == (try bytes(SpecKeys.publicAY)))
        #expect(b.publicKey == (try SpecKeys.publicB()))
    }

    @Test func bothSidesDeriveTheSpecificationsDHKey() throws {
        let a = try SpecKeys.pairA(), b = try SpecKeys.pairB()
        let expected = try #require(DHKey(bigEndianBytes: try bytes(SpecKeys.dhKey)))
        #expect(try a.sharedSecret(with: b.publicKey) == expected)
        #expect(try b.sharedSecret(with: a.publicKey) == expected)
    }

    @Test func freshKeyPairsDifferAndAgreeOnASecret() throws {
        let a = try P256KeyPair.generate(), b = try P256KeyPair.generate()
        #expect(a.publicKey != b.publicKey)
        #expect(try a.sharedSecret(with: b.publicKey) == b.sharedSecret(with: a.publicKey))
    }

    @Test func aPointOffTheCurveIsRefused() throws {
        // The invalid-curve attack: a valid X with a Y that does not satisfy y² = x³ - 3x + b.
        let a = try SpecKeys.pairA()
        var y = try bytes(SpecKeys.publicBY)
        y[31] ^= 0x01
        let forged = try #require(P256PublicKey(x: try bytes(SpecKeys.publicBX), y: y))
        do {
            _ = try a.sharedSecret(with: forged)
            Issue.record("a point off the curve was accepted")
        } catch {
            #expect(error.kind == .invalidPublicKey)
        }
    }

    @Test func thePointAtInfinityIsRefused() throws {
        let a = try SpecKeys.pairA()
        let zero = try #require(P256PublicKey(x: [UInt8](repeating: 0, count: 32), y: [UInt8](repeating: 0, count: 32)))
        #expect { try a.sharedSecret(with: zero) } throws: { ($0 as? CryptoError)?.kind == .invalidPublicKey }
    }

    @Test func aCoordinateAtOrAboveTheFieldPrimeIsRefused() throws {
        let a = try SpecKeys.pairA()
        let p = try bytes("ffffffff 00000001 00000000 00000000 00000000 ffffffff ffffffff ffffffff")
        let atP = try #require(P256PublicKey(x: p, y: try bytes(SpecKeys.publicBY)))
        let above = try #require(P256PublicKey(x: try bytes(SpecKeys.publicBX), y: [UInt8](repeating: 0xFF, count: 32)))
        for key in [atP, above] {
            #expect { try a.sharedSecret(with: key) } throws: { ($0 as? CryptoError)?.kind == .invalidPublicKey }
        }
    }

    @Test func aPrivateKeyOutOfRangeIsRefused() throws {
        #expect(throws: CryptoError.self) { try P256KeyPair(privateKey: [UInt8](repeating: 0, count: 32)) }
        #expect(throws: CryptoError.self) { try P256KeyPair(privateKey: [UInt8](repeating: 0xFF, count: 32)) }
        #expect(throws: CryptoError.self) { try P256KeyPair(privateKey: [1, 2, 3]) }
    }

    @Test func coordinatesMustBe32Bytes() {
        #expect(P256PublicKey(x: [UInt8](repeating: 1, count: 31), y: [UInt8](repeating: 1, count: 32)) == nil)
        #expect(P256PublicKey(x: [UInt8](repeating: 1, count: 32), y: [UInt8](repeating: 1, count: 33)) == nil)
    }

    @Test func printingAKeyPairOrADHKeyShowsNoSecret() throws {
        let a = try SpecKeys.pairA()
        let dh = try a.sharedSecret(with: try SpecKeys.publicB())
        var dumped = ""
        dump(dh, to: &dumped)
        for text in ["\(a)", String(reflecting: a), "\(dh)", String(reflecting: dh), dumped] {
            #expect(!text.contains("3f49f6d4"))
            #expect(!text.lowercased().contains("ec0234a3"))
        }
    }
}
