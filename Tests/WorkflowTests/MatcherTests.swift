import Testing
@testable import Workflow
import YAML

@Suite struct MatcherTests {
    @Test func equalsComparesBytes() throws {
        #expect(try Matcher.equalsBytes([1, 0]).matches([1, 0]))
        #expect(try !Matcher.equalsBytes([1, 0]).matches([1, 1]))
    }

    @Test func hexPatternMatchesTheLowercaseHexString() throws {
        #expect(try Matcher.hexPattern("^4f4b").matches([0x4F, 0x4B, 0x21]))
        #expect(try !Matcher.hexPattern("^4F4B$").matches([0x4F, 0x4B]))
    }

    @Test func textPatternMatchesTheUTF8Text() throws {
        #expect(try Matcher.textPattern(#"^2\.[0-9]+\.[0-9]+$"#).matches(Array("2.4.1".utf8)))
        #expect(try !Matcher.textPattern(#"^2\."#).matches(Array("1.9.0".utf8)))
        #expect(try !Matcher.textPattern(".").matches([0xC3, 0x28]))
    }

    @Test func specsResolvePerDevice() throws {
        let text = MatcherSpec.equalsValue(.utf8(try Template(parsing: "${id}")))
        #expect(try text.resolve(variables: { $0 == "id" ? "SN-1" : nil }, baseDirectory: "") == .equalsBytes(Array("SN-1".utf8)))
        let bytes = MatcherSpec.equalsValue(.hex(Template(literal: "0100")))
        #expect(try bytes.resolve(variables: { _ in nil }, baseDirectory: "") == .equalsBytes([1, 0]))
    }
}
