import Testing
import YAML
@testable import Workflow

/// Template references in a workflow keep their position in the file.
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
