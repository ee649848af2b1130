import BLE
import Testing
import BLE

@Suite struct SHA256Tests {
    @Test func emptyInputMatchesTheKnownDigest() {
        #expect(SHA256.hexDigest([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func abcMatchesTheFIPSVector() {
        #expect(SHA256.hexDigest(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func twoBlockMessageMatchesTheFIPSVector() {
        let text = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
        #expect(SHA256.hexDigest(Array(text.utf8)) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test func oneMillionAsMatchesTheFIPSVector() {
        var h = SHA256()
        let chunk = [UInt8](repeating: 0x61, count: 1000)
        for _ in 0..<1000 { h.update(chunk) }
        #expect(h.finalize().hexString == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func incrementalUpdatesEqualOneShot() {
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var h = SHA256()
        for split in stride(from: 0, to: 1000, by: 37) { h.update(Array(bytes[split..<min(split + 37, 1000)])) }
        #expect(h.finalize() == SHA256.hash(bytes))
    }
}
