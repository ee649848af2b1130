import Testing
@testable import Workflow

@Suite struct VariableDeclarationTests {
    @Test func aKeyOfTheWrongLengthIsAnErrorThatDoesNotShowTheSecret() throws {
        let key = try VariableDeclaration(format: .hex, length: 16...16, secret: true)
        #expect(key.type == .bytes)
        let good = String(repeating: "ab", count: 16)
        #expect(try key.value(fromText: good, name: "device_key") == .bytes([UInt8](repeating: 0xAB, count: 16)))
        let short = String(repeating: "ab", count: 8)
        let text = message { try key.value(fromText: short, name: "device_key") }
        #expect(text == "device_key is 8 bytes, but 16 are needed")
        #expect(text?.contains("abab") == false)
        #expect(message { try key.value(fromText: "zz", name: "device_key") } == "device_key is not valid hex (pairs of 0-9, a-f) (the value is secret and not shown)")
    }

    @Test func aLengthRangeAndPublicValuesAreQuoted() throws {
        let config = try VariableDeclaration(format: .hex, length: 1...200)
        #expect(try config.value(fromText: "01", name: "config") == .bytes([1]))
        #expect(message { try config.value(fromText: "", name: "config") } == "config is 0 bytes (\"\"), but 1 to 200 are needed")
        #expect(message { try config.value(fromText: "0g", name: "config") } == "config: \"0g\" is not valid hex (pairs of 0-9, a-f)")
        let label = try VariableDeclaration(format: .utf8, length: 1...4)
        #expect(message { try label.value(fromText: "héllo", name: "label") } == "label is 6 bytes (\"héllo\"), but 1 to 4 are needed")
    }

    @Test func integersMustFitTheirWidth() throws {
        let battery = try VariableDeclaration(format: .uint8)
        #expect(battery.type == .integer(signed: false))
        #expect(try battery.value(fromText: "20", name: "battery") == .integer(20, signed: false))
        #expect(message { try battery.value(fromText: "300", name: "battery") } == "battery: 300 does not fit in uint8 (0...255)")
        #expect(message { try battery.value(fromText: "-1", name: "battery") } == "battery: -1 is negative, but the value is an unsigned integer")
        #expect(message { try battery.value(fromText: "twenty", name: "battery") } == "battery: \"twenty\" is not an integer")
        let secret = try VariableDeclaration(format: .uint16le, secret: true)
        #expect(message { try secret.value(fromText: "70000", name: "pin") } == "pin: the value does not fit in uint16le")
    }

    @Test func versionsAndReals() throws {
        #expect(try VariableDeclaration(format: .version).value(fromText: "2.0", name: "fw") == .version(SemanticVersion(parsing: "2.0.0")))
        #expect(try VariableDeclaration(format: .sfloat).value(fromText: "36.6", name: "t") == .real(36.6))
    }

    @Test func aLengthOnlyAppliesToHexAndUTF8() {
        #expect(message { try VariableDeclaration(format: .uint8, length: 1...1) } == "a length applies to hex and utf8 values, not to uint8")
        #expect(message { try VariableDeclaration(format: .hex, length: -1...2) } == "a length cannot be negative")
    }
}
