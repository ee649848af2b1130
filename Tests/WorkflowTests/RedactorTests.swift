import Foundation
import Testing
@testable import Workflow

/// Redaction follows the value: every rendering of a secret shows as `***`.
@Suite struct RedactorTests {
    static func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }

    @Test func aHexSecretIsHiddenInEveryCaseSeparatorAndEncoding() {
        let r = Redactor(secrets: ["A1B2C3D4E5F6"])
        let bytes: [UInt8] = [0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0xF6]
        let shown = [
            "A1B2C3D4E5F6", "a1b2c3d4e5f6", "a1:b2:c3:d4:e5:f6", "A1 B2 C3 D4 E5 F6", "a1-b2-c3-d4-e5-f6", "a1_b2_c3_d4_e5_f6",
            Self.base64(bytes),
        ]
        for s in shown { #expect(r.redact("value \(s) seen") == "value *** seen", "\(s)") }
        // Inside a larger value: `01${key}` written as hex, and base64 of longer values at every alignment.
        #expect(r.redact("no value that equals 01a1b2c3d4e5f6 within 3s") == "no value that equals 01*** within 3s")
        for prefix in [[], [0x01], [0x01, 0x02]] as [[UInt8]] {
            let text = Self.base64(prefix + bytes + [0xFF, 0xEE])
            #expect(!r.redact(text).contains(String(Self.base64(bytes).prefix(6))), "\(prefix.count): \(r.redact(text))")
            #expect(r.redact(text).contains("***"), "\(prefix.count)")
        }
    }

    @Test func aTextSecretIsHiddenAsTextAsHexOfItsUTF8AndAsBase64() {
        let r = Redactor(secrets: ["hunter2-pass"])
        let utf8 = Array("hunter2-pass".utf8)
        for s in ["hunter2-pass", utf8.hexString, utf8.hexString.uppercased(), Self.base64(utf8)] {
            #expect(r.redact("[\(s)]") == "[***]", "\(s)")
        }
    }

    @Test func hexThatSpellsTextIsHiddenAsThatText() {
        // A secret written in hex that a device echoes and the workflow reads `as: utf8`.
        let r = Redactor(secrets: [Array("open sesame".utf8).hexString])
        #expect(r.redact("\"open sesame\" does not equal \"x\"") == "\"***\" does not equal \"x\"")
    }

    @Test func bytesActuallyWrittenAreHiddenInTheirForms() {
        // A PIN written as uint32le: nothing in its text gives away 40e20100.
        var r = Redactor(secrets: ["123456"])
        #expect(r.redact("wrote 40e20100") == "wrote 40e20100")
        r.add(bytes: [0x40, 0xE2, 0x01, 0x00])
        #expect(r.redact("wrote 40E20100 and 40:e2:01:00") == "wrote *** and ***")
    }

    @Test func textWithoutSecretsIsLeftAlone() {
        let r = Redactor(secrets: ["A1B2C3D4E5F6", "hunter2-pass"])
        let plain = "\"1.9.0\" does not match ^2\\.; last value seen: 0100; firmware 2.4.1, state 02"
        #expect(r.redact(plain) == plain)
        #expect(Redactor(secrets: []).isEmpty)
        #expect(Redactor(secrets: []).redact("A1B2C3D4E5F6") == "A1B2C3D4E5F6")
    }

    @Test func theInventoryRedactsThroughTheSameRules() throws {
        let r = InventoryParser().parse(bytes: Array("""
            secrets: [key]
            devices:
              - { id: SN-1, address: "C0:5E:00:00:00:01", vars: { key: "A1B2C3D4E5F6", config: "0a0b" } }
            """.utf8), path: "inv.yaml")
        let inventory = try #require(r.inventory)
        #expect(inventory.redact("read a1b2c3d4e5f6, config 0a0b", for: inventory.devices[0]) == "read ***, config 0a0b")
    }
}
