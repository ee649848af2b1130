import Support
import Testing


@Suite struct CRCTests {
    private let check = Array("123456789".utf8)

    @Test func everyAlgorithmMatchesItsCatalogueCheckValue() {
        #expect(CRCAlgorithm.crc16CCITTFalse.checksum(check) == 0x29B1)
        #expect(CRCAlgorithm.crc16Modbus.checksum(check) == 0x4B37)
        #expect(CRCAlgorithm.crc16XModem.checksum(check) == 0x31C3)
        #expect(CRCAlgorithm.crc32ISOHDLC.checksum(check) == 0xCBF4_3926)
        for a in CRCAlgorithm.allCases { #expect(a.checksum(check) == a.check, "\(a)") }
    }

    @Test func knownFramesAndEmptyInput() {
        // The Modbus RTU request "read one holding register at 0 from unit 1" ends in 84 0A.
        #expect(CRCAlgorithm.crc16Modbus.checksum([0x01, 0x03, 0x00, 0x00, 0x00, 0x01]) == 0x0A84)
        #expect(CRCAlgorithm.crc32ISOHDLC.checksum(Array("The quick brown fox jumps over the lazy dog".utf8)) == 0x414F_A339)
        #expect(CRCAlgorithm.crc16CCITTFalse.checksum([]) == 0xFFFF)
        #expect(CRCAlgorithm.crc16XModem.checksum([]) == 0)
        #expect(CRCAlgorithm.crc32ISOHDLC.checksum([]) == 0)
    }

    @Test func sixteenBitResultsStayInSixteenBits() {
        var g = SplitMix64(seed: 3)
        for _ in 0..<200 {
            let bytes = (0..<Int(g.next() % 40)).map { _ in UInt8(truncatingIfNeeded: g.next()) }
            for a in CRCAlgorithm.allCases where a.width == 16 { #expect(a.checksum(bytes) <= 0xFFFF) }
        }
    }

    @Test func namesReadBackCaseInsensitively() {
        #expect(CRCAlgorithm(name: "crc-16/modbus") == .crc16Modbus)
        #expect(CRCAlgorithm(name: "CRC-32/ISO-HDLC") == .crc32ISOHDLC)
        #expect(CRCAlgorithm(name: "CRC-16") == nil)
    }
}
