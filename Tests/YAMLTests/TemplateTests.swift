import Testing
@testable import YAML

/// The one template language (workflow values, inventory paths, simulator models).
@Suite struct TemplateTests {
    @Test func referencesAreParsedWithMarks() throws {
        let t = try Template(parsing: "01${config}-${id}", at: SourceMark(line: 3, column: 10))
        #expect(t.referencedNames == ["config", "id"])
        #expect(t.references.map(\.mark) == [SourceMark(line: 3, column: 12), SourceMark(line: 3, column: 22)])
    }

    @Test func renderSubstitutesValues() throws {
        let t = try Template(parsing: "01${config}")
        #expect(try t.render { $0 == "config" ? "0a0b" : nil } == "010a0b")
    }

    @Test func doubleDollarEscapesAReference() throws {
        let t = try Template(parsing: "cost $${price} and $5")
        #expect(t.isLiteral)
        #expect(try t.render { _ in nil } == "cost ${price} and $5")
    }

    @Test func missingValueThrowsWithTheName() throws {
        let t = try Template(parsing: "${nope}")
        #expect(throws: Template.TemplateError.self) { try t.render { _ in nil } }
    }

    @Test func unterminatedReferenceIsAnError() {
        #expect(throws: Template.TemplateError.self) { try Template(parsing: "${abc") }
    }

    @Test func invalidNamesAreRejected() {
        #expect(throws: Template.TemplateError.self) { try Template(parsing: "${}") }
        #expect(throws: Template.TemplateError.self) { try Template(parsing: "${9x}") }
        #expect(throws: Template.TemplateError.self) { try Template(parsing: "${a b}") }
    }

    @Test func dottedAndDashedNamesAreValid() throws {
        #expect(try Template(parsing: "${blob.path}${my-var}").referencedNames == ["blob.path", "my-var"])
    }

    @Test func aMissingNameIsSaidInTheWordsOfWhereTheTemplateComesFrom() throws {
        let t = try Template(parsing: "a ${nope} b")
        #expect(throws: Template.TemplateError(message: "`${nope}` has no value", mark: SourceMark(line: 1, column: 3))) {
            try t.render { _ in nil }
        }
        #expect(throws: Template.TemplateError(message: "unknown variable `${nope}`; define it under `defaults:` or per device",
                                               mark: SourceMark(line: 1, column: 3))) {
            try t.render({ _ in nil }, missing: .undefinedVariable)
        }
    }

    @Test func textAroundReferencesIsKeptAsWrittenWhateverItHolds() throws {
        let vars = ["id": "SN-1", "fw": "2.4.1", "e": "é💡"]
        func render(_ text: String) throws -> String { try Template(parsing: text).render { vars[$0] } }
        #expect(try render("plain text, no variables") == "plain text, no variables")
        #expect(try render("") == "")
        #expect(try render("${id}") == "SN-1")
        #expect(try render("sensor ${id} runs ${fw}.") == "sensor SN-1 runs 2.4.1.")
        #expect(try render("${id}${fw}") == "SN-12.4.1")
        #expect(try render("über ${e} ✓ $ {id} $$ ${id}$") == "über é💡 ✓ $ {id} $$ SN-1$")
    }

    @Test func anUnterminatedReferenceSaysWhereItStarts() {
        #expect(throws: Template.TemplateError(message: "unterminated `${` in \"${id} and ${\"", mark: SourceMark(line: 1, column: 11))) {
            try Template(parsing: "${id} and ${")
        }
    }
}
