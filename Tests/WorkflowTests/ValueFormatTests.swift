import Testing
@testable import Workflow

@Suite struct ValueFormatTests {
    private func decode(_ format: ValueFormat, _ bytes: [UInt8]) throws -> TypedValue { try format.decode(bytes) }

    @Test func unsignedIntegersInBothByteOrders() throws {
        #expect(try decode(.uint8, [0xFF]) == .integer(255, signed: false))
        #expect(try decode(.uint16le, [0x2C, 0x01]) == .integer(300, signed: false))
        #expect(try decode(.uint16be, [0x01, 0x2C]) == .integer(300, signed: false))
        #expect(try decode(.uint16le, [0xFF, 0xFF]) == .integer(65535, signed: false))
        #expect(try decode(.uint32le, [0x04, 0x03, 0x02, 0x01]) == .integer(0x0102_0304, signed: false))
        #expect(try decode(.uint32be, [0x01, 0x02, 0x03, 0x04]) == .integer(0x0102_0304, signed: false))
        #expect(try decode(.uint32le, [0xFF, 0xFF, 0xFF, 0xFF]) == .integer(4_294_967_295, signed: false))
        #expect(try decode(.uint64be, [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]) == .integer(Int64.max, signed: false))
    }

    @Test func signedIntegersInBothByteOrders() throws {
        #expect(try decode(.int8, [0xFF]) == .integer(-1, signed: true))
        #expect(try decode(.int8, [0x80]) == .integer(-128, signed: true))
        #expect(try decode(.int8, [0x7F]) == .integer(127, signed: true))
        #expect(try decode(.int16le, [0xFE, 0xFF]) == .integer(-2, signed: true))
        #expect(try decode(.int16be, [0xFF, 0xFE]) == .integer(-2, signed: true))
        #expect(try decode(.int16le, [0x00, 0x80]) == .integer(-32768, signed: true))
        #expect(try decode(.int32le, [0x00, 0x00, 0x00, 0x80]) == .integer(-2_147_483_648, signed: true))
        #expect(try decode(.int32be, [0x80, 0x00, 0x00, 0x00]) == .integer(-2_147_483_648, signed: true))
        #expect(try decode(.int32be, [0x00, 0x00, 0x01, 0x00]) == .integer(256, signed: true))
        #expect(try decode(.int64le, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]) == .integer(-1, signed: true))
    }

    @Test func everyFixedSizeFormatRefusesAWrongLength() {
        for format in ValueFormat.allCases {
            guard let size = format.size else { continue }
            for count in [0, size - 1, size + 1] where count >= 0 {
                let bytes = [UInt8](repeating: 0x01, count: count)
                let text = message { try format.decode(bytes) }
                #expect(text?.hasPrefix("\(format.rawValue) needs exactly \(size) byte") == true, "\(format) \(count): \(text ?? "no error")")
                #expect(text?.contains("got \(count)") == true)
            }
        }
        #expect(message { try ValueFormat.uint16le.decode([0x01, 0x02, 0x03]) } == "uint16le needs exactly 2 bytes, got 3 (010203)")
        #expect(message { try ValueFormat.uint8.decode([]) } == "uint8 needs exactly 1 byte, got 0")
    }

    @Test func aUint64AboveTheIntegerRangeIsAnError() {
        #expect(message { try ValueFormat.uint64le.decode([0, 0, 0, 0, 0, 0, 0, 0x80]) }?.contains("above 9223372036854775807") == true)
    }

    @Test func ieee11073FloatsDecodeLittleEndian() throws {
        #expect(try decode(.sfloat, [0x6C, 0xF1]) == .real(36.4))
        #expect(try decode(.sfloat, [0xFF, 0xFF]) == .real(-0.1))
        #expect(try decode(.sfloat, [0xFE, 0x07]) == .real(.infinity))
        #expect(try decode(.sfloat, [0x02, 0x08]) == .real(-.infinity))
        #expect(try decode(.float, [0x6C, 0x01, 0x00, 0xFF]) == .real(36.4))
        #expect(try decode(.float, [0xFE, 0xFF, 0x7F, 0x00]) == .real(.infinity))
        #expect(try decode(.float, [0x02, 0x00, 0x80, 0x00]) == .real(-.infinity))
    }

    @Test func ieee11073ValuesWithoutANumberAreErrorsThatNameThem() {
        #expect(message { try ValueFormat.sfloat.decode([0xFF, 0x07]) } == "sfloat ff07 is NaN (not a number): the device has no valid measurement")
        #expect(message { try ValueFormat.sfloat.decode([0x00, 0x08]) }?.contains("NRes (not at this resolution)") == true)
        #expect(message { try ValueFormat.sfloat.decode([0x01, 0x08]) }?.contains("reserved for future use") == true)
        #expect(message { try ValueFormat.float.decode([0xFF, 0xFF, 0x7F, 0x00]) }?.hasPrefix("float ffff7f00 is NaN") == true)
        #expect(message { try ValueFormat.float.decode([0x00, 0x00, 0x80, 0x00]) }?.contains("NRes") == true)
        #expect(message { try ValueFormat.float.decode([0x01, 0x00, 0x80, 0x00]) }?.contains("reserved") == true)
    }

    @Test func utf8MustBeValid() throws {
        #expect(try decode(.utf8, Array("2.4.1".utf8)) == .text("2.4.1"))
        #expect(try decode(.utf8, []) == .text(""))
        #expect(try decode(.utf8, [0xE2, 0x82, 0xAC]) == .text("€"))
        #expect(message { try ValueFormat.utf8.decode([0xC3, 0x28]) } == "value c328 is not valid UTF-8")
        #expect(message { try ValueFormat.utf8.decode([0xE2, 0x82]) } == "value e282 is not valid UTF-8")
        #expect(message { try ValueFormat.utf8.decode([UInt8](repeating: 0xFF, count: 100)) }?.count ?? 0 < 100)
    }

    @Test func hexKeepsTheBytes() throws {
        #expect(try decode(.hex, [0x0A, 0xFF]) == .bytes([0x0A, 0xFF]))
        #expect(try decode(.hex, []) == .bytes([]))
    }

    @Test func versionsDecodeFromUTF8TextPaddingTrimmed() throws {
        #expect(try decode(.version, Array("2.4.1".utf8)) == .version(SemanticVersion(parsing: "2.4.1")))
        #expect(try decode(.version, Array("v10.0.0".utf8)) == .version(SemanticVersion(parsing: "10.0.0")))
        #expect(try decode(.version, Array("1.9.0-rc1".utf8)) == .version(SemanticVersion(parsing: "1.9.0-rc1")))
        let padded = try decode(.version, Array("2.0".utf8) + [0, 0, 0])
        #expect(padded == .version(try SemanticVersion(parsing: "2.0")))
        #expect(padded.description == "2.0")
        #expect(try decode(.version, Array(" 2.0 \r\n".utf8)).description == "2.0")
        #expect(message { try ValueFormat.version.decode(Array("build 7".utf8)) }?.hasPrefix("\"build 7\" is not a version") == true)
        #expect(message { try ValueFormat.version.decode([0xFF]) } == "value ff is not valid UTF-8")
    }

    @Test func integersEncodeInTheirWidthAndRefuseWhatDoesNotFit() throws {
        #expect(try ValueFormat.uint8.encode(.integer(200, signed: false)) == [0xC8])
        #expect(try ValueFormat.uint16le.encode(.integer(300, signed: false)) == [0x2C, 0x01])
        #expect(try ValueFormat.uint16be.encode(.integer(300, signed: false)) == [0x01, 0x2C])
        #expect(try ValueFormat.uint32be.encode(.integer(0x0102_0304, signed: true)) == [1, 2, 3, 4])
        #expect(try ValueFormat.int16be.encode(.integer(-2, signed: true)) == [0xFF, 0xFE])
        #expect(try ValueFormat.int8.encode(.integer(-128, signed: true)) == [0x80])
        #expect(message { try ValueFormat.uint8.encode(.integer(300, signed: false)) } == "300 does not fit in uint8 (0...255)")
        #expect(message { try ValueFormat.uint8.encode(.integer(-1, signed: true)) } == "-1 does not fit in uint8 (0...255)")
        #expect(message { try ValueFormat.int8.encode(.integer(128, signed: false)) } == "128 does not fit in int8 (-128...127)")
        #expect(message { try ValueFormat.uint8.encode(.text("20")) } == "uint8 writes an unsigned integer, not text (\"20\")")
    }

    @Test func encodingRoundTripsThroughDecoding() throws {
        let samples: [Int64] = [0, 1, -1, 127, -128, 255, 256, 32767, -32768, 65535, 0x7FFF_FFFF, -0x8000_0000, 0xFFFF_FFFF, Int64.max, Int64.min]
        for format in ValueFormat.allCases where format.valueType.isNumeric && format.valueType != .real {
            guard case .integer(let signed) = format.valueType else { continue }
            for n in samples {
                guard let bytes = try? format.encode(.integer(n, signed: true)) else { continue }
                #expect(try format.decode(bytes) == .integer(n, signed: signed), "\(format) \(n)")
            }
        }
    }

    @Test func textBytesAndVersionsEncode() throws {
        #expect(try ValueFormat.utf8.encode(.text("hé")) == [0x68, 0xC3, 0xA9])
        #expect(try ValueFormat.hex.encode(.bytes([1, 2])) == [1, 2])
        #expect(try ValueFormat.version.encode(.version(SemanticVersion(parsing: "v2.0"))) == Array("v2.0".utf8))
        #expect(message { try ValueFormat.hex.encode(.text("0102")) } == "hex writes bytes, not text (\"0102\")")
        #expect(message { try ValueFormat.sfloat.encode(.real(1)) }?.contains("for reading measurements") == true)
    }

    @Test func formatsKnowTheirTypes() {
        #expect(ValueFormat.uint8.valueType == .integer(signed: false))
        #expect(ValueFormat.int16be.valueType == .integer(signed: true))
        #expect(ValueFormat.sfloat.valueType == .real)
        #expect(ValueFormat.float.valueType == .real)
        #expect(ValueFormat.utf8.valueType == .text)
        #expect(ValueFormat.hex.valueType == .bytes)
        #expect(ValueFormat.version.valueType == .version)
        #expect(ValueFormat.named("uint16").hint == "did you mean `uint16be`?" || ValueFormat.named("uint16").hint == "did you mean `uint16le`?")
        #expect(ValueFormat.named("utf-8").hint == "did you mean `utf8`?")
        #expect(ValueFormat.named("uint8").format == .uint8)
    }
}
