import BLE
import Foundation
import Support
import Testing
@testable import Workflow
import YAML

@Suite struct CodecTests {
    let none: (String) -> String? = { _ in nil }

    @Test func hexValueWithTemplate() throws {
        let spec = ValueSpec.hex(try Template(parsing: "01${c}"))
        #expect(try spec.bytes(variables: { $0 == "c" ? "0A0b" : nil }, baseDirectory: "") == [0x01, 0x0A, 0x0B])
    }

    @Test func badHexIsAnError() throws {
        let spec = ValueSpec.hex(try Template(parsing: "${c}"))
        #expect(throws: ValueError.self) { try spec.bytes(variables: { _ in "zz" }, baseDirectory: "") }
    }

    @Test func utf8AndBase64() throws {
        #expect(try ValueSpec.utf8(Template(literal: "Hi")).bytes(variables: none, baseDirectory: "") == [0x48, 0x69])
        #expect(try ValueSpec.base64(Template(literal: "AQID")).bytes(variables: none, baseDirectory: "") == [1, 2, 3])
        #expect(throws: ValueError.self) { try ValueSpec.base64(Template(literal: "!!")).bytes(variables: none, baseDirectory: "") }
    }

    @Test func littleEndianIntegers() throws {
        #expect(try ValueSpec.integer(.uint16le, .literal(Template(literal: "300"))).bytes(variables: none, baseDirectory: "") == [0x2C, 0x01])
        #expect(try ValueSpec.integer(.uint32le, .literal(Template(literal: "0x01020304"))).bytes(variables: none, baseDirectory: "") == [4, 3, 2, 1])
        #expect(try ValueSpec.integer(.int16le, .literal(Template(literal: "-2"))).bytes(variables: none, baseDirectory: "") == [0xFE, 0xFF])
        #expect(throws: ValueError.self) { try ValueSpec.integer(.uint8, .literal(Template(literal: "256"))).bytes(variables: none, baseDirectory: "") }
        #expect(throws: ValueError.self) { try ValueSpec.integer(.int8, .literal(Template(literal: "-129"))).bytes(variables: none, baseDirectory: "") }
    }

    @Test func fileAndLengthOfResolveAgainstTheBaseDirectory() throws {
        let dir = try TemporaryDirectory()
        try dir.write("blobs/a.bin", [1, 2, 3, 4, 5])
        let lookup: (String) -> String? = { $0 == "blob" ? "blobs/a.bin" : nil }
        let spec = ValueSpec.concat([
            .hex(Template(literal: "03")),
            .integer(.uint32le, .lengthOf(try Template(parsing: "${blob}"))),
        ])
        #expect(try spec.bytes(variables: lookup, baseDirectory: dir.path) == [3, 5, 0, 0, 0])
        #expect(try ValueSpec.file(try Template(parsing: "${blob}")).bytes(variables: lookup, baseDirectory: dir.path) == [1, 2, 3, 4, 5])
        #expect(throws: ValueError.self) { try ValueSpec.file(Template(literal: "missing.bin")).bytes(variables: lookup, baseDirectory: dir.path) }
    }

    @Test func readFormatsTurnBytesIntoTypedValues() throws {
        #expect(try ValueFormat.hex.decode([0x0A, 0xFF]) == .bytes([0x0A, 0xFF]))
        #expect(try ValueFormat.utf8.decode(Array("2.4.1".utf8)) == .text("2.4.1"))
        #expect(try ValueFormat.uint8.decode([100]) == .integer(100, signed: false))
        #expect(try ValueFormat.uint16le.decode([0x2C, 0x01]) == .integer(300, signed: false))
        #expect(try ValueFormat.uint32le.decode([1, 0, 0, 0x80]) == .integer(2_147_483_649, signed: false))
        #expect(try ValueFormat.int8.decode([0xFF]) == .integer(-1, signed: true))
        #expect(try ValueFormat.int16le.decode([0xFE, 0xFF]) == .integer(-2, signed: true))
        #expect(try ValueFormat.int32le.decode([0, 0, 0, 0x80]) == .integer(-2_147_483_648, signed: true))
        #expect(try ValueFormat.base64.decode([1, 2, 3]) == .text("AQID"))
        #expect(try ValueFormat.base64.encode(.text("AQID")) == [1, 2, 3])
        #expect(throws: ValueError.self) { try ValueFormat.base64.encode(.text("!!")) }
    }

    @Test func readFormatsRejectWrongLengthsAndBadUTF8() {
        #expect(throws: ValueError.self) { try ValueFormat.uint16le.decode([1]) }
        #expect(throws: ValueError.self) { try ValueFormat.utf8.decode([0xC3, 0x28]) }
    }

    @Test func durationsNeedAUnit() {
        #expect(DurationText.parse("250ms") == .success(.milliseconds(250)))
        #expect(DurationText.parse("10s") == .success(.seconds(10)))
        #expect(DurationText.parse("1.5s") == .success(.milliseconds(1500)))
        #expect(DurationText.parse("2m") == .success(.seconds(120)))
        #expect(DurationText.parse("1h") == .success(.seconds(3600)))
        #expect(DurationText.parse("10") == .failure(.missingUnit))
        #expect(DurationText.parse("10sec") == .failure(.unknownUnit("sec")))
        #expect(DurationText.parse("-1s") == .failure(.negative))
        #expect(DurationText.parse("s") == .failure(.malformed))
        #expect(DurationText.parse("1.2.3s") == .failure(.malformed))
    }

    @Test func durationsFormatTheWayTheyAreWritten() {
        #expect(DurationText.format(.milliseconds(250)) == "250ms")
        #expect(DurationText.format(.seconds(10)) == "10s")
        #expect(DurationText.format(.seconds(120)) == "2m")
        #expect(DurationText.format(.milliseconds(1500)) == "1.5s")
    }

    @Test func uuidFormsAreAcceptedCaseInsensitively() {
        #expect(BluetoothUUID("180a") == BluetoothUUID(0x180A))
        #expect(BluetoothUUID("0x180A") == BluetoothUUID(0x180A))
        #expect(BluetoothUUID("0000180A") == BluetoothUUID(0x180A))
        #expect(BluetoothUUID("0000180a-0000-1000-8000-00805F9B34FB") == BluetoothUUID(0x180A))
        #expect(BluetoothUUID("18G0") == nil)
    }
}
