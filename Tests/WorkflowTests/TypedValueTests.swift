import Foundation
import Testing
@testable import Workflow

@Suite struct TypedValueTests {
    private func version(_ text: String) throws -> TypedValue { .version(try SemanticVersion(parsing: text)) }

    @Test func jsonRenderingIsExact() throws {
        #expect(TypedValue.integer(19, signed: false).json == "19")
        #expect(TypedValue.integer(-40, signed: true).json == "-40")
        #expect(TypedValue.integer(Int64.min, signed: true).json == "-9223372036854775808")
        #expect(TypedValue.real(36.4).json == "36.4")
        #expect(TypedValue.real(2).json == "2")
        #expect(TypedValue.real(-0.1).json == "-0.1")
        #expect(TypedValue.real(1e-8).json == "1e-08")
        #expect(TypedValue.real(.infinity).json == "\"Infinity\"")
        #expect(TypedValue.real(-.infinity).json == "\"-Infinity\"")
        #expect(TypedValue.text("say \"hi\"\n").json == "\"say \\\"hi\\\"\\n\"")
        #expect(TypedValue.bytes([0x0A, 0xFF]).json == "\"0aff\"")
        #expect(try version("v2.4.1").json == "\"v2.4.1\"")
        #expect(TypedValue.boolean(true).json == "true")
    }

    @Test func jsonEncoderWritesTheSameText() throws {
        let values: [TypedValue] = [.integer(19, signed: false), .real(36.4), .real(1e-8), .real(.infinity), .text("a/b"),
                                    .bytes([1, 2]), try version("1.9.0-rc1"), .boolean(false)]
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        for v in values {
            let text = String(decoding: try encoder.encode(v), as: UTF8.self)
            #expect(text == v.json, "\(v)")
        }
    }

    @Test func jsonRoundTripsWithTheDeclaredType() throws {
        let values: [TypedValue] = [.integer(19, signed: false), .integer(-5, signed: true), .integer(Int64.max, signed: false),
                                    .real(36.4), .real(-.infinity), .real(0.1), .text("2.0"), .text(""), .bytes([0xDE, 0xAD]),
                                    try version("2.0"), .boolean(true)]
        for v in values {
            #expect(try TypedValue(jsonText: v.json, as: v.type) == v, "\(v)")
        }
        // The same JSON means different things under different declared types.
        #expect(try TypedValue(jsonText: "\"2.0\"", as: .version) == version("2.0.0"))
        #expect(try TypedValue(jsonText: "\"2.0\"", as: .text) == .text("2.0"))
        #expect(try TypedValue(jsonText: "20", as: .real) == .real(20))
        #expect(try TypedValue(jsonText: "20.0", as: .integer(signed: false)) == .integer(20, signed: false))
    }

    @Test func jsonOfTheWrongShapeIsAnErrorNamingTheType() {
        #expect(message { try TypedValue(jsonText: "\"19\"", as: .integer(signed: false)) } == "JSON \"19\" is not an unsigned integer")
        #expect(message { try TypedValue(jsonText: "19.5", as: .integer(signed: true)) } == "19.5 is not an integer")
        #expect(message { try TypedValue(jsonText: "-1", as: .integer(signed: false)) } == "-1 is negative, but the value is an unsigned integer")
        #expect(message { try TypedValue(jsonText: "19", as: .text) } == "JSON 19 is not text")
        #expect(message { try TypedValue(jsonText: "\"zz\"", as: .bytes) } == "\"zz\" is not valid hex (pairs of 0-9, a-f)")
        #expect(message { try TypedValue(jsonText: "\"latest\"", as: .version) }?.hasPrefix("\"latest\" is not a version") == true)
        #expect(message { try TypedValue(jsonText: "null", as: .boolean) } == "JSON null is not a boolean")
        #expect(message { try TypedValue(jsonText: "\"NaN\"", as: .real) } == "JSON \"NaN\" is not a real number")
        #expect(message { try TypedValue(jsonText: "{", as: .real) } == "\"{\" is not a JSON scalar")
        #expect(message { try TypedValue(jsonText: "1e300", as: .integer(signed: true)) } == "1e+300 is not an integer")
    }

    @Test func jsonScalarsDecodeToTheirShape() throws {
        let decoded = try JSONDecoder().decode([JSONScalar].self, from: Data(#"[null, true, 19, -3, 36.4, "x", 9223372036854775807]"#.utf8))
        #expect(decoded == [.null, .boolean(true), .integer(19), .integer(-3), .real(36.4), .string("x"), .integer(Int64.max)])
    }

    @Test func textLiteralsReadWithTheDeclaredType() throws {
        #expect(try TypedValue(text: "20", as: .integer(signed: false)) == .integer(20, signed: false))
        #expect(try TypedValue(text: "0x1F", as: .integer(signed: false)) == .integer(31, signed: false))
        #expect(try TypedValue(text: "-3", as: .integer(signed: true)) == .integer(-3, signed: true))
        #expect(try TypedValue(text: "36.4", as: .real) == .real(36.4))
        #expect(try TypedValue(text: "-Infinity", as: .real) == .real(-.infinity))
        #expect(try TypedValue(text: "0102", as: .bytes) == .bytes([1, 2]))
        #expect(try TypedValue(text: "true", as: .boolean) == .boolean(true))
        #expect(message { try TypedValue(text: "-3", as: .integer(signed: false)) } == "-3 is negative, but the value is an unsigned integer")
        #expect(message { try TypedValue(text: "nan", as: .real) } == "\"nan\" is not a number")
        #expect(message { try TypedValue(text: "0x1p3", as: .real) } == "\"0x1p3\" is not a number")
        #expect(message { try TypedValue(text: "1e999", as: .real) } == "\"1e999\" is not a number")
        #expect(message { try TypedValue(text: "yes", as: .boolean) } == "\"yes\" is not a boolean (true or false)")
    }

    @Test func numbersCompareExactlyAcrossIntegersAndReals() throws {
        let nineteen = TypedValue.integer(19, signed: false)
        #expect(try TypedValue.compare(nineteen, .less, .integer(20, signed: true)))
        #expect(try TypedValue.compare(nineteen, .equal, .real(19)))
        #expect(try TypedValue.compare(nineteen, .less, .real(19.5)))
        #expect(try TypedValue.compare(.real(19.5), .greater, nineteen))
        #expect(try TypedValue.compare(.integer(-3, signed: true), .greater, .real(-3.5)))
        #expect(try TypedValue.compare(nineteen, .less, .real(.infinity)))
        #expect(try TypedValue.compare(nineteen, .greater, .real(-.infinity)))
        // 2^53 + 1 is not a Double; converting it would make it equal to 2^53.
        let big = TypedValue.integer(9_007_199_254_740_993, signed: false)
        #expect(try TypedValue.compare(big, .greater, .real(9_007_199_254_740_992)))
        #expect(try TypedValue.compare(big, .notEqual, .real(9_007_199_254_740_992)))
        #expect(try TypedValue.compare(.integer(Int64.max, signed: false), .less, .real(9.223372036854775808e18)))
        #expect(try !TypedValue.compare(.real(.nan), .equal, .real(.nan)))
        #expect(try TypedValue.compare(.real(.nan), .notEqual, .integer(1, signed: true)))
    }

    @Test func versionsCompareInSemanticOrder() throws {
        #expect(try TypedValue.compare(version("10.0.0"), .greater, version("2.0")))
        #expect(try TypedValue.compare(version("2.0"), .equal, version("2.0.0")))
        #expect(try TypedValue.compare(version("1.9.0-rc1"), .less, version("1.9.0")))
        #expect(try TypedValue.compare(version("2.0.0"), .greaterOrEqual, version("v2")))
    }

    @Test func textComparesExactlyByItsBytes() throws {
        #expect(try TypedValue.compare(.text("abc"), .equal, .text("abc")))
        #expect(try TypedValue.compare(.text("abc"), .notEqual, .text("ABC")))
        // Precomposed and decomposed é are canonically equivalent in Swift, but not the same bytes.
        #expect(try TypedValue.compare(.text("\u{E9}"), .notEqual, .text("e\u{301}")))
        #expect(try TypedValue.compare(.text("D10"), .less, .text("D9")))
        #expect(try TypedValue.compare(.bytes([1, 2]), .equal, .bytes([1, 2])))
        #expect(try TypedValue.compare(.boolean(true), .notEqual, .boolean(false)))
    }

    @Test func comparingDifferentKindsIsATypeErrorNotFalse() {
        #expect(message { try TypedValue.compare(.integer(19, signed: false), .equal, .text("19")) }
            == "cannot compare an unsigned integer with text (19 == \"19\")")
        #expect(message { try TypedValue.compare(.text("2.0"), .less, version("2.0.0")) }?
            .hasPrefix("cannot compare text with a version") == true)
        #expect(message { try TypedValue.compare(.bytes([1]), .less, .bytes([2])) }
            == "bytes can only be compared with == and !=, not < (01 < 02)")
        #expect(message { try TypedValue.compare(.boolean(true), .greater, .boolean(false)) }?.contains("only be compared with ==") == true)
    }

    @Test func typeNamesReadBack() {
        for t in ValueType.allCases {
            #expect(ValueType(name: t.name) == t)
        }
        #expect(ValueType(name: "float") == nil)
        #expect(ValueType.comparisonError(.integer(signed: true), .less, .real) == nil)
        #expect(ValueType.comparisonError(.version, .greaterOrEqual, .version) == nil)
        #expect(ValueType.comparisonError(.text, .equal, .bytes) == "cannot compare text with bytes")
    }
}
