import Testing
@testable import Workflow

@Suite struct ExpressionTests {
    private func parse(_ text: String) throws -> Expression.Node { try Expression(parsing: text).root }

    private func failure(_ text: String) -> ExpressionError? {
        do {
            _ = try Expression(parsing: text)
            return nil
        } catch {
            return error
        }
    }

    @Test func aComparisonKeepsTheColumnsOfItsParts() throws {
        #expect(try parse("battery < 20") == .comparison(.name("battery", column: 1), .less,
                                                          .literal(.integer(20, text: "20"), column: 11), column: 9))
        #expect(try parse("  captured.battery>=-3") == .comparison(.name("captured.battery", column: 3), .greaterOrEqual,
                                                                    .literal(.integer(-3, text: "-3"), column: 21), column: 19))
    }

    @Test func andBindsTighterThanOrAndNotTighterThanBoth() throws {
        let a = Expression.Node.comparison(.name("a", column: 1), .equal, .literal(.integer(1, text: "1"), column: 6), column: 3)
        let b = Expression.Node.comparison(.name("b", column: 11), .equal, .literal(.integer(2, text: "2"), column: 16), column: 13)
        let c = Expression.Node.comparison(.name("c", column: 22), .equal, .literal(.integer(3, text: "3"), column: 27), column: 24)
        #expect(try parse("a == 1 or b == 2 and c == 3") == .or(a, .and(b, c)))
        #expect(try parse("not a == 1") == .not(.comparison(.name("a", column: 5), .equal, .literal(.integer(1, text: "1"), column: 10), column: 7), column: 1))
        #expect(try parse("(a == 1 or b == 2) and c == 3").column == 2)
        #expect(try parse("a and b or c") == .or(.and(.name("a", column: 1), .name("b", column: 7)), .name("c", column: 12)))
        #expect(try parse("not not a") == .not(.not(.name("a", column: 9), column: 5), column: 1))
    }

    @Test func literalsOfEveryKind() throws {
        func right(_ text: String) throws -> Expression.Literal? {
            guard case .comparison(_, _, .literal(let l, _), _) = try parse("x == \(text)") else { return nil }
            return l
        }
        #expect(try right("0x1F") == .integer(31, text: "0x1F"))
        #expect(try right("-9223372036854775808") == .integer(Int64.min, text: "-9223372036854775808"))
        #expect(try right("-0x8000000000000000") == .integer(Int64.min, text: "-0x8000000000000000"))
        #expect(try right("36.6") == .real(36.6, text: "36.6"))
        #expect(try right("-0.5") == .real(-0.5, text: "-0.5"))
        #expect(try right("1.5e-3") == .real(0.0015, text: "1.5e-3"))
        #expect(try right("2.0.0") == .version(SemanticVersion(parsing: "2.0.0")))
        #expect(try right("1.9.0-rc1") == .version(SemanticVersion(parsing: "1.9.0-rc1")))
        #expect(try right("2.4.1+build.7") == .version(SemanticVersion(parsing: "2.4.1")))
        #expect(try right("v2.1") == .version(SemanticVersion(parsing: "2.1")))
        #expect(try right("\"a \\\"b\\\" \\\\ \\n\"") == .string("a \"b\" \\ \n"))
        #expect(try right("'it\\'s'") == .string("it's"))
        #expect(try right("\"\"") == .string(""))
        #expect(try right("true") == .boolean(true))
        #expect(try right("false") == .boolean(false))
        #expect(try right("null") == .null)
    }

    @Test func membershipListsAndNotIn() throws {
        #expect(try parse("outcome in [failed, interrupted]") == .membership(
            .name("outcome", column: 1), [.name("failed", column: 13), .name("interrupted", column: 21)], negated: false, column: 9))
        #expect(try parse("x not in []") == .membership(.name("x", column: 1), [], negated: true, column: 3))
        #expect(try parse("not x in [1]") == .not(.membership(.name("x", column: 5), [.literal(.integer(1, text: "1"), column: 11)], negated: false, column: 7), column: 1))
    }

    @Test func namesAreListedInOrder() throws {
        let e = try Expression(parsing: "battery < 20 and outcome in [failed] or fw == null")
        #expect(e.names.map(\.name) == ["battery", "outcome", "failed", "fw"])
        #expect(e.names.map(\.column) == [1, 18, 30, 41])
    }

    @Test(arguments: [
        ("", 1, "the expression is empty"),
        ("   ", 4, "the expression is empty"),
        ("battery <", 10, "the expression ends where a value or a name was expected"),
        ("battery = 20", 9, "`=` is not an operator"),
        ("a && b", 3, "`&` is not an operator"),
        ("a || b", 3, "`|` is not an operator"),
        ("!a", 1, "`!` is not an operator"),
        ("(a == 1", 8, "missing `)` to close the `(` at column 1"),
        ("(a == 1]", 8, "expected `)` to close the `(` at column 1, found `]`"),
        ("x == \"abc", 6, "string not closed: the \" here has no partner"),
        ("x == 'abc\\'", 6, "string not closed: the ' here has no partner"),
        ("x == \"a\\qb\"", 8, "unknown escape `\\q` in a string"),
        ("a == 1 b", 8, "unexpected `b` after a complete condition"),
        ("a < b < c", 7, "unexpected `<` after a complete condition"),
        ("fw < 2.x.1", 6, "`2.x.1` is not a number or a version"),
        ("n == 99999999999999999999", 6, "`99999999999999999999` is too large for an integer"),
        ("n == 0x", 6, "`0x` is not an integer"),
        ("n == -0x8000000000000001", 6, "`-0x8000000000000001` is not an integer"),
        ("n == -2.0.0", 6, "`-2.0.0` is not a number or a version"),
        ("n == 1e999", 6, "`1e999` is too large for a number"),
        ("x in 1", 6, "expected `[` after `in`, found `1`"),
        ("x in [1 2]", 9, "expected `,` or `]` in the list, found `2`"),
        ("x in [1,", 9, "the expression ends where a value or a name was expected"),
        ("x in [1", 8, "missing `]` to close the `[` at column 6"),
        ("and", 1, "expected a value, a name or `(`, found `and`"),
        ("x == )", 6, "expected a value, a name or `(`, found `)`"),
        ("x - 1", 3, "unexpected `-`"),
        ("\"日本\" = 1", 6, "`=` is not an operator"),
        ("x == @", 6, "unexpected character `@`"),
        ("名前 == 1", 1, "unexpected character `名`"),
    ])
    func errorsCarryTheirColumn(text: String, column: Int, message: String) {
        let e = failure(text)
        #expect(e?.column == column, "\(text): \(e?.description ?? "parsed")")
        #expect(e?.message.hasPrefix(message) == true, "\(text): \(e?.message ?? "parsed")")
    }

    @Test func hintsSayWhatToWriteInstead() {
        #expect(failure("battery = 20")?.hint == "compare with `==`")
        #expect(failure("a && b")?.hint == "join conditions with `and`")
        #expect(failure("a < b < c")?.hint == "comparisons cannot be chained: join them with `and`")
    }

    @Test func deepNestingIsAnErrorNotACrash() {
        let deep = String(repeating: "(", count: 1000) + "a" + String(repeating: ")", count: 1000)
        #expect(failure(deep)?.message == "the expression nests more than 64 levels deep")
        #expect(failure(deep)?.column == 65)
        let nots = String(repeating: "not ", count: 1000) + "a"
        #expect(failure(nots)?.message == "the expression nests more than 64 levels deep")
        let fine = String(repeating: "(", count: 64) + "a" + String(repeating: ")", count: 64)
        #expect(failure(fine) == nil)
    }

    @Test func aHugeExpressionIsRefusedUpFront() {
        let long = Array(repeating: "a == 1", count: 1000).joined(separator: " and ")
        #expect(failure(long)?.message == "the expression is longer than 4096 characters")
        let longest = Array(repeating: "a", count: 700).joined(separator: " or ")  // 3496 characters
        #expect(failure(longest) == nil)
    }

    @Test func aLongBadTokenGivesAShortMessage() {
        let e = failure("x == " + String(repeating: "9", count: 3000) + ".x")
        #expect((e?.message.count ?? 0) < 200)
    }
}
