import Foundation
import Support
import Testing
import YAML
@testable import Workflow

/// Byte building in the language: every encoding a value can be built from, golden bytes for each, and
/// the forms as a workflow writes them (`write`, `await` triggers, `verify` limits, `set:`).
@Suite struct ValueBuildingTests {
    private func spec(_ yaml: String) throws -> ValueSpec {
        let parsed = ValueSpec.parse(commandLine: yaml)
        #expect(parsed.diagnostics.isEmpty, "\(parsed.diagnostics)")
        return try #require(parsed.spec)
    }

    private func bytes(_ yaml: String, _ vars: [String: String] = [:]) throws -> [UInt8] {
        try spec(yaml).bytes(variables: { vars[$0] }, baseDirectory: "")
    }

    // MARK: Integers

    @Test func everyIntegerFormatWritesItsGoldenBytes() throws {
        let cases: [(String, String)] = [
            ("{ uint8: 200 }", "c8"),
            ("{ uint16le: 0x1234 }", "3412"), ("{ uint16be: 0x1234 }", "1234"),
            ("{ uint32le: 300 }", "2c010000"), ("{ uint32be: 300 }", "0000012c"),
            ("{ uint64le: 0x0102030405060708 }", "0807060504030201"), ("{ uint64be: 0x0102030405060708 }", "0102030405060708"),
            ("{ int8: -1 }", "ff"),
            ("{ int16le: -2 }", "feff"), ("{ int16be: -2 }", "fffe"),
            ("{ int32le: -300 }", "d4feffff"), ("{ int32be: -300 }", "fffffed4"),
            ("{ int64le: -1 }", "ffffffffffffffff"), ("{ int64be: -256 }", "ffffffffffffff00"),
        ]
        for (yaml, hex) in cases {
            #expect(try bytes(yaml).hexString == hex, "\(yaml)")
        }
    }

    @Test func integerFormatsRoundTripAtTheirLimits() throws {
        for format in IntegerFormat.allCases {
            for value in [format.range.lowerBound, format.range.upperBound, 0, 1] where format.range.contains(value) {
                let encoded = try #require(format.encode(value))
                #expect(encoded.count == format.size)
                #expect(format.decode(encoded) == value, "\(format) \(value)")
            }
            #expect(format.decode([UInt8](repeating: 0, count: format.size + 1)) == nil)
            if format.range.upperBound < Int64.max { #expect(format.encode(format.range.upperBound + 1) == nil) }
            // The value format of the same name reads what the integer format wrote.
            let valueFormat = try #require(ValueFormat(rawValue: format.rawValue))
            #expect(try valueFormat.decode(try #require(format.encode(1))) == .integer(1, signed: format.isSigned))
        }
    }

    @Test func aNumberOutOfRangeIsRefusedForEveryDevice() throws {
        let s = try spec("{ uint16be: \"${n}\" }")
        #expect(throws: ValueError("70000 does not fit in uint16be (0...65535)")) { try s.bytes(variables: { _ in "70000" }, baseDirectory: "") }
        #expect(throws: ValueError("\"x\" is not an integer")) { try s.bytes(variables: { _ in "x" }, baseDirectory: "") }
    }

    // MARK: Text

    @Test func utf8InAFixedFieldIsPaddedNeverCut() throws {
        #expect(try bytes("{ utf8: Hall, length: 6 }") == Array("Hall".utf8) + [0, 0])
        #expect(try bytes("{ utf8: Hall, length: 6, pad: 0x20 }") == Array("Hall  ".utf8))
        #expect(try bytes("{ utf8: Hall, length: 4 }") == Array("Hall".utf8))
        // "à" is two bytes of UTF-8: the field counts bytes.
        #expect(try bytes("{ utf8: \"${room}\", length: 16 }", ["room": "Salle à manger"]) == Array("Salle à manger".utf8) + [0])
        let s = try spec("{ utf8: \"${room}\", length: 16 }")
        #expect(throws: ValueError("\"Salle à manger 2\" is 17 bytes of UTF-8, longer than its field of 16")) {
            try s.bytes(variables: { _ in "Salle à manger 2" }, baseDirectory: "")
        }
    }

    @Test func hexBase64AndBytesOfACapturedValue() throws {
        #expect(try bytes("{ hex: \"01 02:03\" }") == [1, 2, 3])
        #expect(try bytes("{ base64: AQID }") == [1, 2, 3])
        // A capture or declared variable of type bytes is shown as hex: `bytes:` writes those bytes.
        #expect(try bytes("{ bytes: \"${cfg}\" }", ["cfg": "0a0b0c"]) == [0x0A, 0x0B, 0x0C])
        let s = try spec("{ bytes: \"${cfg}\" }")
        #expect(throws: ValueError("`${cfg}` is not bytes (\"Kitchen\")")) { try s.bytes(variables: { _ in "Kitchen" }, baseDirectory: "") }
    }

    // MARK: CRCs

    @Test func aCRCPartIsTheCRCOfItsValueInTheGivenWidthAndOrder() throws {
        let check = "{ utf8: \"123456789\" }"
        #expect(try bytes("{ uint16be: { crc: CRC-16/CCITT-FALSE, of: \(check) } }").hexString == "29b1")
        #expect(try bytes("{ uint16le: { crc: CRC-16/CCITT-FALSE, of: \(check) } }").hexString == "b129")
        #expect(try bytes("{ uint16le: { crc: crc-16/modbus, of: \(check) } }").hexString == "374b")
        #expect(try bytes("{ uint16be: { crc: CRC-16/XMODEM, of: \(check) } }").hexString == "31c3")
        #expect(try bytes("{ uint32le: { crc: CRC-32/ISO-HDLC, of: \(check) } }").hexString == "2639f4cb")
        #expect(try bytes("{ uint32be: { crc: CRC-32/ISO-HDLC, of: \(check) } }").hexString == "cbf43926")
        // A 16-bit CRC in a wider integer is that number.
        #expect(try bytes("{ uint32be: { crc: CRC-16/CCITT-FALSE, of: \(check) } }").hexString == "000029b1")
        // Over a list of parts: the CRC of the parts joined.
        #expect(try bytes("{ uint16be: { crc: CRC-16/CCITT-FALSE, of: [{ utf8: \"1234\" }, { hex: \"3536373839\" }] } }").hexString == "29b1")
    }

    @Test func theThermostatConfigurationInOneValue() throws {
        let value = """
            [{ hex: "01" }, { uint32le: "${interval_s}" }, { utf8: "${room}", length: 16 },
             { uint16be: { crc: CRC-16/CCITT-FALSE, of: [{ uint32le: "${interval_s}" }, { utf8: "${room}", length: 16 }] } }]
            """
        let out = try bytes(value, ["interval_s": "300", "room": "Kitchen"])
        let body: [UInt8] = [0x2C, 0x01, 0x00, 0x00] + Array("Kitchen".utf8) + [UInt8](repeating: 0, count: 9)
        let crc = CRCAlgorithm.crc16CCITTFalse.checksum(body)
        #expect(out == [0x01] + body + [UInt8(crc >> 8), UInt8(crc & 0xFF)])
        #expect(out.count == 23)
    }

    // MARK: In a workflow

    private static let header = """
        name: t
        vars:
          interval_s: uint32le
          room: { utf8: [1, 16] }
          key: { hex: 16 }
        steps:
          - connect: {}

        """

    private func parse(_ steps: String) -> (workflow: Workflow?, diagnostics: [Diagnostic]) {
        WorkflowParser().parse(bytes: Array((Self.header + steps).utf8), path: "w.yaml")
    }

    @Test func theIssuesSetOfAListOfPartsIsAccepted() throws {
        // Refused before as "must be a single value, not a list".
        let (workflow, diagnostics) = parse("""
              - set: { id: crc, crc: CRC-16/CCITT-FALSE, of: [{ uint32le: "${interval_s}" }, { utf8: "${room}" }] }
              - write: { service: FFD0, characteristic: FFD1, value: [{ uint32le: "${interval_s}" }, { utf8: "${room}" }, { uint16le: "${crc}" }] }
            """)
        #expect(diagnostics.isEmpty, "\(diagnostics)")
        let w = try #require(workflow)
        guard case .derive(let d) = w.steps[1].kind else { Issue.record("not a set"); return }
        #expect(d.resultType == .integer(signed: false))
        let value = try d.value(typed: { _ in nil }, text: { ["interval_s": "300", "room": "Hall"][$0] }, baseDirectory: "")
        let expected = CRCAlgorithm.crc16CCITTFalse.checksum([0x2C, 0x01, 0, 0] + Array("Hall".utf8))
        #expect(value == .integer(Int64(expected), signed: false))
        #expect(w.captureTypes["crc"] == .integer(signed: false))
    }

    @Test func concatTakesPartsAndBytesAndMakesBytes() throws {
        let (workflow, diagnostics) = parse("""
              - set: { id: config, concat: [{ uint32le: "${interval_s}" }, { utf8: "${room}", length: 16 }] }
              - set: { id: framed, concat: ["01", "${config}", { uint16be: { crc: CRC-16/CCITT-FALSE, of: { bytes: "${config}" } } }] }
            """)
        #expect(diagnostics.isEmpty, "\(diagnostics)")
        let w = try #require(workflow)
        #expect(w.captureTypes["config"] == .bytes)
        #expect(w.captureTypes["framed"] == .bytes)
        guard case .derive(let config) = w.steps[1].kind, case .derive(let framed) = w.steps[2].kind else { Issue.record("not sets"); return }
        let text = ["interval_s": "60", "room": "Hall"]
        let c = try config.value(typed: { _ in nil }, text: { text[$0] }, baseDirectory: "")
        guard case .bytes(let body) = c else { Issue.record("not bytes"); return }
        #expect(body.count == 20)
        let f = try framed.value(typed: { $0 == "config" ? c : nil }, text: { $0 == "config" ? c.description : text[$0] }, baseDirectory: "")
        let crc = CRCAlgorithm.crc16CCITTFalse.checksum(body)
        #expect(f == .bytes([0x01] + body + [UInt8(crc >> 8), UInt8(crc & 0xFF)]))
    }

    @Test func verifyComparesBytesWithABuiltValue() throws {
        let (workflow, diagnostics) = parse("""
              - read: { id: stored, service: FFD0, characteristic: FFD4, as: hex }
              - verify: { value: "${stored}", equals: [{ uint32le: "${interval_s}" }, { utf8: "${room}", length: 16 }] }
              - verify: { value: "${stored}", in: [[{ uint32le: 60 }, { utf8: Hall, length: 16 }], { hex: "00" }] }
            """)
        #expect(diagnostics.isEmpty, "\(diagnostics)")
        let w = try #require(workflow)
        guard case .verify(let v) = w.steps[2].kind, case .verify(let list) = w.steps[3].kind else { Issue.record("not verifies"); return }
        let expected: [UInt8] = [60, 0, 0, 0] + Array("Hall".utf8) + [UInt8](repeating: 0, count: 12)
        let limits = try v.limits.resolve(valueType: .bytes, typed: { _ in nil }, text: { ["interval_s": "60", "room": "Hall"][$0] })
        #expect(limits.equals == .bytes(expected))
        #expect(limits.check(.bytes(expected), name: "stored", unit: nil).passed)
        #expect(!limits.check(.bytes(expected.dropLast() + [1]), name: "stored", unit: nil).passed)
        let oneOf = try list.limits.resolve(valueType: .bytes, typed: { _ in nil }, text: { _ in nil })
        #expect(oneOf.oneOf == [.bytes(expected), .bytes([0])])
        // The parts' references count as the step's templates (validation checks them for every device).
        #expect(w.steps[2].templates.map(\.source) == ["${stored}", "${interval_s}", "${room}"])
        #expect(w.steps[2].valueSpecs.count == 1)
    }

    @Test func triggersAndAwaitEqualsTakeTheSameParts() throws {
        let (workflow, diagnostics) = parse("""
              - subscribe: { id: acks, service: FFD0, characteristic: FFD2 }
              - await:
                  subscription: acks
                  trigger: { service: FFD0, characteristic: FFD1, value: [{ hex: "01" }, { bytes: "${key}" }, { uint16be: { crc: CRC-16/XMODEM, of: { bytes: "${key}" } } }] }
                  equals: [{ uint8: 1 }, { uint8: 0 }]
            """)
        #expect(diagnostics.isEmpty, "\(diagnostics)")
        let w = try #require(workflow)
        guard case .await(let a) = w.steps[2].kind, let trigger = a.trigger else { Issue.record("not an await"); return }
        let key = "000102030405060708090a0b0c0d0e0f"
        let sent = try trigger.value.bytes(variables: { $0 == "key" ? key : nil }, baseDirectory: "")
        let crc = CRCAlgorithm.crc16XModem.checksum(Array(0...15))
        #expect(sent == [0x01] + Array(0...15) + [UInt8(crc >> 8), UInt8(crc & 0xFF)])
        #expect(try a.matcher.resolve(variables: { _ in nil }, baseDirectory: "") == .equalsBytes([1, 0]))
    }

    @Test func aCRCOverAFileIsChecksummedFromTheFileRoot() throws {
        let dir = try TemporaryDirectory()
        try dir.write("blob.bin", Array("123456789".utf8))
        let s = try spec("[{ uint32le: { length_of: blob.bin } }, { uint32be: { crc: CRC-32/ISO-HDLC, of: { file: blob.bin } } }]")
        #expect(try s.bytes(variables: { _ in nil }, baseDirectory: dir.path).hexString == "09000000cbf43926")
        #expect(s.fileTemplates.map(\.source) == ["blob.bin", "blob.bin"])
    }

    @Test func derivedFromASecretPartIsSecret() throws {
        let text = """
            name: t
            vars:
              key: { hex: 16, secret: true }
            steps:
              - set: { id: key_check, crc: CRC-16/CCITT-FALSE, of: [{ hex: "01" }, { bytes: "${key}" }] }
            """
        let (workflow, diagnostics) = WorkflowParser().parse(bytes: Array(text.utf8), path: "w.yaml")
        #expect(diagnostics.isEmpty, "\(diagnostics)")
        #expect(workflow?.secretNames == ["key", "key_check"])
    }
}
