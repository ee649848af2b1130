import Support
import Testing

/// Hex text to bytes and back: what workflow values, models, reports and tests use.
@Suite struct HexTests {
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
