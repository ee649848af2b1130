@testable import BLE
import Testing

/// Fixed-width integers to bytes and back: what PDUs use (hex text is Support's, HexTests).
@Suite struct ByteReaderTests {
    @Test func sixtyFourAndOneHundredTwentyEightBitValuesAreReadLeastSignificantOctetFirst() throws {
        var r = ByteReader([0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01] + (0..<16).map { UInt8($0) })
        #expect(try r.readUInt64LE("rand") == 0x0102_0304_0506_0708)
        #expect(try r.readUInt128LE("key") == 0x0F0E_0D0C_0B0A_0908_0706_0504_0302_0100)
        #expect(r.isAtEnd)
    }

    @Test func writingThemGivesTheSameBytesBack() {
        var w = ByteWriter()
        w.writeUInt64LE(0x0102_0304_0506_0708)
        w.writeUInt128LE(0x0F0E_0D0C_0B0A_0908_0706_0504_0302_0100)
        #expect(w.bytes == [0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01] + (0..<16).map { UInt8($0) })
    }

    @Test func aShortInputThrowsNamingTheFieldAndDoesNotAdvance() {
        var r = ByteReader([UInt8](repeating: 0xAA, count: 15))
        #expect(throws: DecodeError.truncated(field: "LTK", needed: 16, available: 15)) { try r.readUInt128LE("LTK") }
        #expect(r.offset == 0)
        #expect(throws: DecodeError.truncated(field: "rand", needed: 8, available: 7)) {
            var short = ByteReader([UInt8](repeating: 0, count: 7))
            _ = try short.readUInt64LE("rand")
        }
    }

    @Test func bigEndianConversionsOfOneHundredTwentyEightBitValuesRoundTrip() {
        let v: UInt128 = 0x0011_2233_4455_6677_8899_AABB_CCDD_EEFF
        #expect(UInt128(bigEndianBytes: v.bigEndianBytes) == v)
        #expect(UInt128(littleEndianBytes: v.littleEndianBytes) == v)
        #expect(UInt128(bigEndianBytes: [UInt8](repeating: 1, count: 17)) == nil)
    }
}
