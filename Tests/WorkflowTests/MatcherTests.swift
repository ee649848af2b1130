import Testing
@testable import Workflow

@Suite struct MatcherTests {
    @Test func equalsComparesBytes() {
        #expect(Matcher.equalsBytes([1, 0]).matches([1, 0]))
        #expect(!Matcher.equalsBytes([1, 0]).matches([1, 1]))
    }

    @Test func hexPatternMatchesTheLowercaseHexString() {
        #expect(Matcher.hexPattern("^4f4b").matches([0x4F, 0x4B, 0x21]))
        #expect(!Matcher.hexPattern("^4F4B$").matches([0x4F, 0x4B]))
    }

    @Test func textPatternOnVerify() {
        #expect(Matcher.textPattern(#"^2\.[0-9]+\.[0-9]+$"#).matches("2.4.1"))
        #expect(!Matcher.textPattern(#"^2\."#).matches("1.9.0"))
    }

    @Test func numericRangeIsInclusive() {
        #expect(Matcher.range(0, 100).matches("100"))
        #expect(Matcher.range(0, 100).matches("0"))
        #expect(!Matcher.range(0, 100).matches("101"))
        #expect(!Matcher.range(0, 100).matches("abc"))
        #expect(Matcher.range(-1.5, 1.5).matches("0.25"))
    }

    @Test func oneOfAndEqualsText() {
        #expect(Matcher.oneOf(["a", "b"]).matches("b"))
        #expect(!Matcher.oneOf(["a", "b"]).matches("c"))
        #expect(Matcher.equalsText("SN-0001").matches("SN-0001"))
    }

    @Test func specsResolvePerDevice() throws {
        let spec = MatcherSpec.equalsText(try Template(parsing: "${id}"))
        #expect(try spec.resolve(variables: { $0 == "id" ? "SN-1" : nil }, baseDirectory: "") == .equalsText("SN-1"))
        let bytes = MatcherSpec.equalsValue(.hex(Template(literal: "0100")))
        #expect(try bytes.resolve(variables: { _ in nil }, baseDirectory: "") == .equalsBytes([1, 0]))
    }
}
