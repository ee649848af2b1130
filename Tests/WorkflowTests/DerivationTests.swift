import Support
import Testing
@testable import Workflow

@Suite struct DerivationTests {
    private let mac: [UInt8] = [0xC0, 0x5E, 0x00, 0x00, 0x12, 0x34]

    @Test func slicesFromTheStartAndFromTheEnd() throws {
        #expect(try Derivation.slice(mac, start: 0, length: 3) == [0xC0, 0x5E, 0x00])
        #expect(try Derivation.slice(mac, start: 4, length: nil) == [0x12, 0x34])
        #expect(try Derivation.slice(mac, start: -2, length: nil) == [0x12, 0x34])
        #expect(try Derivation.slice(mac, start: -6, length: 1) == [0xC0])
        #expect(try Derivation.slice(mac, start: 6, length: 0) == [])
        #expect(try Derivation.slice(mac, start: -3, length: 2) == [0x00, 0x12])
        #expect(try Derivation.slice([], start: 0, length: nil) == [])
    }

    @Test func aSliceOutsideTheValueIsAClearError() {
        #expect(message { try Derivation.slice(mac, start: 5, length: 2) } == "slice start 5, length 2 is outside the value's 6 bytes")
        #expect(message { try Derivation.slice(mac, start: -7, length: nil) } == "slice start -7 is outside the value's 6 bytes")
        #expect(message { try Derivation.slice(mac, start: 7, length: nil) } == "slice start 7 is outside the value's 6 bytes")
        #expect(message { try Derivation.slice(mac, start: 0, length: -1) } == "slice length -1 is negative")
        #expect(message { try Derivation.slice([1], start: 0, length: 2) } == "slice start 0, length 2 is outside the value's 1 byte")
        // Extreme numbers neither trap nor wrap.
        #expect(message { try Derivation.slice(mac, start: Int.max, length: Int.max) } != nil)
        #expect(message { try Derivation.slice(mac, start: Int.min, length: 1) } != nil)
        #expect(message { try Derivation.slice(mac, start: 1, length: Int.max) } != nil)
    }

    @Test func derivationsOverTypedValues() throws {
        #expect(try Derivation.slice(start: -2, length: nil).apply([.bytes(mac)]) == .bytes([0x12, 0x34]))
        #expect(try Derivation.crc(.crc16CCITTFalse).apply([.text("123456789")]) == .integer(0x29B1, signed: false))
        #expect(try Derivation.crc(.crc32ISOHDLC).apply([.bytes(Array("123456789".utf8))]) == .integer(0xCBF4_3926, signed: false))
        #expect(try Derivation.concat.apply([.bytes([1]), .bytes([]), .bytes([2, 3])]) == .bytes([1, 2, 3]))
        #expect(try Derivation.concat.apply([.text("SN"), .text("0042")]) == .text("SN0042"))
    }

    @Test func resultTypesForValidation() throws {
        #expect(try Derivation.slice(start: 0, length: 1).resultType(for: [.bytes]) == .bytes)
        #expect(try Derivation.crc(.crc16Modbus).resultType(for: [.text]) == .integer(signed: false))
        #expect(try Derivation.concat.resultType(for: [.text, .text]) == .text)
        #expect(message { try Derivation.slice(start: 0, length: 1).resultType(for: [.text]) } == "slice needs bytes, but the value is text")
        #expect(message { try Derivation.crc(.crc16Modbus).resultType(for: [.integer(signed: false)]) }
            == "CRC-16/MODBUS needs bytes or text, but the value is an unsigned integer")
        #expect(message { try Derivation.concat.resultType(for: [.bytes, .text]) } == "concat joins all bytes or all text, got bytes, text")
        #expect(message { try Derivation.concat.resultType(for: []) } == "concat needs at least one value")
        // A CRC of several values is the CRC of them joined (`of: [{ uint32le: … }, { utf8: … }]`), all bytes or all text.
        #expect(try Derivation.crc(.crc16XModem).apply([.bytes([1]), .bytes([2])]) == .integer(Int64(CRCAlgorithm.crc16XModem.checksum([1, 2])), signed: false))
        #expect(try Derivation.crc(.crc16XModem).apply([.text("1234"), .text("56789")]) == .integer(0x31C3, signed: false))
        #expect(message { try Derivation.crc(.crc16XModem).apply([.bytes([1]), .text("2")]) } == "CRC-16/XMODEM joins all bytes or all text, got bytes, text")
        #expect(message { try Derivation.crc(.crc16XModem).resultType(for: []) } == "CRC-16/XMODEM needs a value")
    }
}
