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

    /// A tag used to vanish: `!!binary aGk=` was read as the text "aGk=" and `!x` was dropped.
    @Test func tagsAreRefusedWithTheirPosition() {
        let cases: [(String, String, SourceMark)] = [
            ("a: !!binary aGk=\n", "!!binary", SourceMark(line: 1, column: 4)),
            ("a: 1\nb: !x text\n", "!x", SourceMark(line: 2, column: 4)),
            ("a: !!str 1\n", "!!str", SourceMark(line: 1, column: 4)),
            ("a:\n  - !<tag:example.com,2024:k> v\n", "tag:example.com,2024:k", SourceMark(line: 2, column: 5)),
            ("a: !!map { b: 1 }\n", "!!map", SourceMark(line: 1, column: 4)),
            ("a: !!seq [1]\n", "!!seq", SourceMark(line: 1, column: 4)),
            ("!x\na: 1\n", "!x", SourceMark(line: 1, column: 1)),
        ]
        for (text, tag, mark) in cases {
            do {
                _ = try parser.parse(text)
                Issue.record("accepted \(text.debugDescription)")
            } catch {
                #expect(error.message == "YAML tags such as `\(tag)` are not supported", "\(text.debugDescription)")
                #expect(error.mark == mark, "\(text.debugDescription)")
            }
        }
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

@Suite struct YAMLDocumentModelTests {
    let parser = YAMLParser()

    @Test func flowCollectionsKeepMarksOfEveryNode() throws {
        let root = try #require(try parser.parse("steps:\n  - read: { service: 180A, id: fw }\n"))
        let step = try #require(root["steps"]?.sequence?.first)
        #expect(step.mark == SourceMark(line: 2, column: 5))
        let options = try #require(step["read"])
        #expect(options.mark == SourceMark(line: 2, column: 11))
        #expect(options["service"]?.mark == SourceMark(line: 2, column: 22))
        #expect(options["id"]?.scalar == "fw")
        #expect(options.mapping?.map { $0.key.mark.column } == [13, 28])
    }

    @Test func scalarsKeepTheirStyleAndAreNeverGuessed() throws {
        let root = try #require(try parser.parse("a: yes\nb: \"yes\"\nc: ~\nd: |\n  x\n"))
        #expect(root["a"]?.kind == .scalar("yes", .plain))
        #expect(root["b"]?.kind == .scalar("yes", .doubleQuoted))
        #expect(root["c"]?.isNull == true)
        #expect(root["b"]?.isNull == false)
        #expect(root["d"]?.kind == .scalar("x\n", .literal))
    }

    @Test func aLongSequenceKeepsEveryItemInOrder() throws {
        var text = "devices:\n"
        for i in 0..<20_000 { text += "  - { id: D\(i) }\n" }
        let root = try #require(try parser.parse(text))
        let items = try #require(root["devices"]?.sequence)
        #expect(items.count == 20_000)
        #expect(items[19_999]["id"]?.scalar == "D19999")
        #expect(items[19_999].mark == SourceMark(line: 20_001, column: 5))
    }

    @Test func validateEncodingIsSharedWithOtherFormats() {
        #expect(throws: YAMLError("NUL byte in text (is this a binary file?)", at: SourceMark(line: 2, column: 3))) {
            try YAMLParser.validateEncoding([0x61, 0x0A, 0x62, 0x63, 0x00])
        }
        #expect(throws: Never.self) { try YAMLParser.validateEncoding(Array("héllo\n".utf8)) }
    }

    @Test func nonScalarKeysAreRefused() {
        do {
            _ = try parser.parse("? [a, b]\n: 1\n")
            Issue.record("expected an error")
        } catch {
            #expect(error.mark == SourceMark(line: 1, column: 3))
            #expect(error.message == "a mapping key must be a plain value, not a list")
        }
    }

    @Test func byteOrderMarkIsAccepted() throws {
        let root = try #require(try parser.parse([0xEF, 0xBB, 0xBF] + Array("a: 1\n".utf8)))
        #expect(root["a"]?.scalar == "1")
    }
}

@Suite struct YAMLColumnTests {
    @Test func columnsCountCharactersNotBytes() throws {
        let root = try #require(try YAMLParser().parse("é: [ä, b]\n"))
        let items = try #require(root["é"]?.sequence)
        #expect(items[1].mark == SourceMark(line: 1, column: 8))
    }
}

@Suite struct YAMLErrorHintTests {
    @Test func anUnclosedFlowMappingGetsAHint() {
        do {
            _ = try YAMLParser().parse("name: t\nsteps: { a: 1\n")
            Issue.record("expected an error")
        } catch {
            #expect(error.mark == SourceMark(line: 3, column: 1))
            #expect(error.message == "did not find expected ',' or '}' while parsing a flow mapping (started at 2:8)")
            #expect(error.hint == "a `{` mapping is not closed, or a `,` is missing")
        }
    }

    @Test func aBadEscapeGetsAHint() {
        do {
            _ = try YAMLParser().parse(#"name: "a\qb""# + "\n")
            Issue.record("expected an error")
        } catch {
            #expect(error.mark == SourceMark(line: 1, column: 9))
            #expect(error.hint == #"check the quotes on this value (inside double quotes, write `\\` for a backslash or use single quotes)"#)
        }
    }
}
