import Digests
import Testing

/// SHA-256 from libcrypto against the FIPS 180-4 example vectors, for any collection of bytes.
@Suite struct SHA256Tests {
    @Test func emptyInputMatchesTheKnownDigest() {
        #expect(SHA256.hexDigest([UInt8]()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func abcMatchesTheFIPSVector() {
        #expect(SHA256.hexDigest(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func twoBlockMessageMatchesTheFIPSVector() {
        let text = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
        #expect(SHA256.hexDigest(Array(text.utf8)) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test func oneMillionAsMatchesTheFIPSVector() {
        #expect(SHA256.hexDigest([UInt8](repeating: 0x61, count: 1_000_000))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func slicesAndNonContiguousBytesHashLikeArrays() {
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        #expect(SHA256.hash(bytes[100..<900]) == SHA256.hash(Array(bytes[100..<900])))
        #expect(SHA256.hash("abc".utf8) == SHA256.hash(Array("abc".utf8)))
        #expect(SHA256.hash(bytes).count == 32)
    }
}
