@testable import BLE
import Testing

/// Fixed-width integers and hex text to bytes and back: what PDUs, workflow values, models and tests use.
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

    @Test func hexParsesDigitsInEitherCaseWithSeparatorsBetweenBytesAndALeadingZeroX() {
        #expect([UInt8](hex: "0a0B") == [0x0A, 0x0B])
        #expect([UInt8](hex: "0x0102") == [0x01, 0x02])
        #expect([UInt8](hex: "0XfF") == [0xFF])
        #expect([UInt8](hex: "01 02:03-04_05") == [1, 2, 3, 4, 5])
        #expect([UInt8](hex: "") == [])
        #expect([UInt8](hex: "0x") == [])
    }

    @Test func hexRefusesOddLengthsSeparatorsInsideAByteAndAnythingElse() {
        #expect([UInt8](hex: "abc") == nil)
        #expect([UInt8](hex: "0 1") == nil)
        #expect([UInt8](hex: "0g") == nil)
        #expect([UInt8](hex: "x0") == nil)
        #expect([UInt8](hex: "00x1") == nil)
        #expect([UInt8](hex: "0é") == nil)
        #expect([UInt8](hex: "0x\u{301}00") == nil)
    }

    @Test func hexStringIsLowerCaseWithoutSeparatorsAndRoundTrips() {
        let bytes: [UInt8] = [0x00, 0x7F, 0x80, 0xAB, 0xFF]
        #expect(bytes.hexString == "007f80abff")
        #expect([UInt8](hex: bytes.hexString) == bytes)
    }
}
