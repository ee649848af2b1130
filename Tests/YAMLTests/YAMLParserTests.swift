import Testing
@testable import YAML

@Suite struct YAMLParserTests {
    let parser = YAMLParser()

    @Test func parsesNestedMappingWithMarks() throws {
        let root = try #require(try parser.parse("a: 1\nb:\n  - x\n  - 'y'\n"))
        #expect(root.mark == SourceMark(line: 1, column: 1))
        #expect(root["a"]?.scalar == "1")
        let list = try #require(root["b"]?.sequence)
        #expect(list.count == 2)
        #expect(list[1].mark == SourceMark(line: 4, column: 5))
        #expect(list[1].kind == .scalar("y", .singleQuoted))
    }

    @Test func emptyFileIsNil() throws {
        #expect(try parser.parse("") == nil)
        #expect(try parser.parse("# only a comment\n") == nil)
    }

    @Test func duplicateKeyIsRefusedAtSecondKey() {
        #expect(throws: YAMLError("duplicate key `a` (first defined at 1:1)", at: SourceMark(line: 3, column: 1), hint: "remove one of the two")) {
            try parser.parse("a: 1\nb: 2\na: 3\n")
        }
    }

    @Test func tabIndentationIsRefused() {
        do {
            _ = try parser.parse("a:\n\tb: 1\n")
            Issue.record("expected an error")
        } catch {
            #expect(error.mark == SourceMark(line: 2, column: 1))
            #expect(error.message.contains("tab"))
        }
    }

    @Test func invalidUTF8IsRefusedWithPosition() {
        do {
            _ = try parser.parse([0x61, 0x3A, 0x20, 0x0A, 0x62, 0x3A, 0x20, 0xFF, 0x0A])
            Issue.record("expected an error")
        } catch {
            #expect(error.mark == SourceMark(line: 2, column: 4))
        }
    }

    @Test func aliasesAndSecondDocumentsAreRefused() {
        #expect(throws: YAMLError.self) { try parser.parse("a: &x 1\nb: *x\n") }
        do {
            _ = try parser.parse("a: 1\n---\nb: 2\n")
            Issue.record("expected an error")
        } catch {
            #expect(error.mark.line == 2)
        }
    }

    @Test func deepNestingIsRefused() {
        let deep = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
        #expect(throws: YAMLError.self) { try parser.parse(deep) }
    }

    @Test func hugeFileIsRefused() {
        let big = [UInt8](repeating: 0x20, count: 10 * 1024 * 1024 + 1)
        #expect(throws: YAMLError.self) { try parser.parse(big) }
    }

    @Test func libyamlErrorsCarryPosition() {
        do {
            _ = try parser.parse("a: [1, 2\nb: 3\n")
            Issue.record("expected an error")
        } catch {
            #expect(error.mark.line >= 1)
            #expect(!error.message.isEmpty)
        }
    }
}
