import Testing
@testable import Support

@Suite struct StableHashTests {
    @Test func fnv1aMatchesThePublishedValues() {
        // Test vectors of the FNV-1a 64-bit hash (Fowler, Noll, Vo).
        #expect(StableHash.fnv1a("") == 0xCBF2_9CE4_8422_2325)
        #expect(StableHash.fnv1a("a") == 0xAF63_DC4C_8601_EC8C)
        #expect(StableHash.fnv1a("foobar") == 0x8594_4171_F739_67E8)
    }

    @Test func fnv1aHashesTheUTF8Bytes() {
        #expect(StableHash.fnv1a("é") != StableHash.fnv1a("e"))
        #expect(StableHash.fnv1a("SN-1") != StableHash.fnv1a("SN-2"))
    }
}
