import Testing
import YAML
@testable import Workflow

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
}

@Suite struct TemplateMarkTests {
    @Test func referenceMarksCountCharactersAfterNonASCIIText() throws {
        let text = "name: t\nsteps:\n  - verify: { value: \"ü${x}\", equals: a }\n"
        let (_, d) = WorkflowParser().parse(bytes: Array(text.utf8), path: "w.yaml")
        #expect(d.isEmpty)
        let result = try #require(WorkflowParser().parse(bytes: Array(text.utf8), path: "w.yaml").workflow)
        guard case .verify(let v) = result.steps[0].kind else { Issue.record("not a verify"); return }
        #expect(v.value.references.first?.mark == SourceMark(line: 3, column: 24))
    }
}
