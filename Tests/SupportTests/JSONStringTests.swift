import Foundation
import Testing
@testable import Support

@Suite struct JSONStringTests {
    @Test func plainTextIsOnlyQuoted() {
        #expect(JSONString.quoted("") == #""""#)
        #expect(JSONString.quoted("SN-0001 sensor/v2") == #""SN-0001 sensor/v2""#)
    }

    @Test func quotesAndBackslashesAreEscaped() {
        #expect(JSONString.quoted(#"say "hi" \ bye"#) == #""say \"hi\" \\ bye""#)
    }

    @Test func controlCharactersUseShortEscapesOrLowerCaseHex() {
        #expect(JSONString.quoted("a\nb\rc\td") == #""a\nb\rc\td""#)
        #expect(JSONString.quoted("\u{8}\u{C}") == #""\b\f""#)
        #expect(JSONString.quoted("\u{0}\u{1}\u{1B}\u{1F}") == #""\u0000\u0001\u001b\u001f""#)
        #expect(JSONString.quoted("a\"b\\\n\u{1}") == #""a\"b\\\n\u0001""#)
    }

    @Test func nonASCIIAndDeleteAreWrittenAsTheyAre() {
        #expect(JSONString.quoted("Prüfstand ✓ 🔧") == "\"Prüfstand ✓ 🔧\"")
        #expect(JSONString.quoted("\u{7F}\u{2028}\u{202E}") == "\"\u{7F}\u{2028}\u{202E}\"")
    }

    @Test func appendWritesTheSameBytesAfterWhatIsThere() {
        var out = Array("x:".utf8)
        JSONString.append("q\"\u{2}é", to: &out)
        #expect(out == Array("x:".utf8) + Array(JSONString.quoted("q\"\u{2}é").utf8))
        #expect(String(decoding: out, as: UTF8.self) == #"x:"q\"\u0002é""#)
    }

    @Test func everyASCIICharacterIsEscapedAsJSONEncoderEscapesIt() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        let samples = (0..<0x80).compactMap(Unicode.Scalar.init).map { String($0) } + ["é", "\u{2028}", "🔧", "a\u{0}b\"c\\d/e"]
        for s in samples {
            let expected = String(decoding: try encoder.encode(s), as: UTF8.self)
            #expect(JSONString.quoted(s) == expected, "scalar \(s.unicodeScalars.map(\.value))")
        }
    }

    @Test func whatItWritesDecodesBackToTheSameString() throws {
        let s = (0..<0x80).compactMap(Unicode.Scalar.init).map { String($0) }.joined() + "Ünïcødé \u{2028} 🔧"
        let decoded = try JSONDecoder().decode(String.self, from: Data(JSONString.quoted(s).utf8))
        #expect(decoded == s)
    }
}
