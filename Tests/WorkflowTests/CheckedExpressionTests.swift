import Testing
@testable import Workflow

@Suite struct CheckedExpressionTests {
    static let fields: [String: FieldType] = [
        "battery": FieldType(.integer(signed: false)),
        "captured.battery": FieldType(.integer(signed: false)),
        "offset": FieldType(.integer(signed: true)),
        "temperature": FieldType(.real),
        "firmware": FieldType(.version),
        "model": FieldType(.text),
        "config": FieldType(.bytes),
        "locked": FieldType(.boolean),
        "outcome": .enumeration(["succeeded", "failed", "skipped", "interrupted"]),
    ]

    private func checked(_ text: String) throws -> CheckedExpression {
        try Expression(parsing: text).check(fields: Self.fields)
    }

    /// The errors of a type check (empty when it passes).
    private func errors(_ text: String) throws -> [ExpressionError] {
        do {
            _ = try checked(text)
            return []
        } catch let e as ExpressionErrors {
            return e.errors
        }
    }

    private func v(_ text: String) throws -> TypedValue {
        .version(try SemanticVersion(parsing: text))
    }

    private func evaluate(_ text: String, _ values: [String: TypedValue]) throws -> Bool? {
        try checked(text).evaluate { values[$0] }
    }

    /// An enumeration has no order: `outcome < succeeded` compared the words as text and selected the
    /// failed devices. Every ordering operator, on either side, is refused at the field's column.
    @Test func orderingAnEnumerationIsAnError() throws {
        for text in ["outcome < succeeded", "outcome >= failed", "succeeded > outcome", "outcome <= \"failed\""] {
            let e = try errors(text)
            #expect(e.count == 1, "\(text)")
            #expect(e.first?.message.contains("`outcome` is one of succeeded, failed, skipped, interrupted: it has no order") == true, "\(text)")
            #expect(e.first?.column == (text.hasPrefix("outcome") ? 1 : 13), "\(text)")
        }
        #expect(try errors("outcome == failed or outcome in [skipped, interrupted] or outcome != succeeded").isEmpty)
    }

    /// A number that a double cannot hold is an error, too large or too small: `battery < 1e-400` read
    /// as `battery < 0` missed a battery of 0.
    @Test func numbersBeyondADoubleEitherWayAreErrors() throws {
        for (text, word) in [("battery < 1e-400", "too small"), ("temperature > -2.5e-320", "too small"), ("battery < 1e400", "too large")] {
            do {
                _ = try checked(text)
                Issue.record("\(text) was accepted")
            } catch let e as ExpressionError {
                #expect(e.message.contains(word), "\(text): \(e.message)")
                #expect(e.column == text.firstIndex(where: { $0.isNumber || $0 == "-" }).map { text.distance(from: text.startIndex, to: $0) + 1 }, "\(text)")
            }
        }
        #expect(try evaluate("temperature > 0.0e-999", ["temperature": .real(1)]) == true, "zero written as zero is zero")
        #expect(try evaluate("temperature > 2.3e-308", ["temperature": .real(1)]) == true)
    }

    @Test func numbersCompareNumerically() throws {
        #expect(try evaluate("battery < 20", ["battery": .integer(19, signed: false)]) == true)
        #expect(try evaluate("battery < 20", ["battery": .integer(25, signed: false)]) == false)
        #expect(try evaluate("battery > 19.5", ["battery": .integer(20, signed: false)]) == true)
        #expect(try evaluate("temperature >= 36.5", ["temperature": .real(36.6)]) == true)
        #expect(try evaluate("offset == -3", ["offset": .integer(-3, signed: true)]) == true)
        #expect(try evaluate("captured.battery <= 20", ["captured.battery": .integer(20, signed: false)]) == true)
        #expect(try evaluate("20 > battery", ["battery": .integer(19, signed: false)]) == true)
    }

    @Test func versionsCompareInSemanticOrderWhateverTheirSpelling() throws {
        #expect(try evaluate("firmware < 2.0.0", ["firmware": v("10.0.0")]) == false)
        #expect(try evaluate("firmware < 2.0.0", ["firmware": v("1.9.0")]) == true)
        #expect(try evaluate("firmware < 2.0.0", ["firmware": v("2.0.0-rc1")]) == true)
        #expect(try evaluate("firmware == 2.0", ["firmware": v("2.0.0")]) == true)
        #expect(try evaluate("firmware >= 2", ["firmware": v("v2.0.1")]) == true)
        #expect(try evaluate("firmware < \"2.1\"", ["firmware": v("2.0.9")]) == true)
        #expect(try evaluate("firmware in [2.0, 2.1.0]", ["firmware": v("2.1")]) == true)
        #expect(try evaluate("firmware > v1.9", ["firmware": v("1.10")]) == true)
    }

    @Test func literalsAloneTakeTheirOwnTypes() throws {
        #expect(try evaluate("2.0 < 10.0.0", [:]) == true)
        #expect(try evaluate("1 < 2", [:]) == true)
        #expect(try evaluate("\"a\" == \"a\"", [:]) == true)
        #expect(try evaluate("true", [:]) == true)
        #expect(try errors("\"a\" == 1").map(\.message) == ["cannot compare text with an integer"])
    }

    @Test func bareValuesOfAnEnumeratedField() throws {
        #expect(try evaluate("outcome == failed", ["outcome": .text("failed")]) == true)
        #expect(try evaluate("outcome == \"failed\"", ["outcome": .text("succeeded")]) == false)
        #expect(try evaluate("outcome in [failed, interrupted]", ["outcome": .text("interrupted")]) == true)
        #expect(try evaluate("outcome not in [failed, interrupted]", ["outcome": .text("interrupted")]) == false)
        #expect(try evaluate("failed == outcome", ["outcome": .text("failed")]) == true)
    }

    @Test func textAndBytesAndBooleans() throws {
        #expect(try evaluate("model == \"SL-2\"", ["model": .text("SL-2")]) == true)
        #expect(try evaluate("model != 'SL-2'", ["model": .text("SL-3")]) == true)
        #expect(try evaluate("config == \"01ff\"", ["config": .bytes([0x01, 0xFF])]) == true)
        #expect(try evaluate("config != \"01:FF\"", ["config": .bytes([0x01, 0xFF])]) == false)
        #expect(try evaluate("locked", ["locked": .boolean(true)]) == true)
        #expect(try evaluate("not locked and battery < 20", ["locked": .boolean(false), "battery": .integer(5, signed: false)]) == true)
        #expect(try evaluate("locked == false", ["locked": .boolean(false)]) == true)
    }

    @Test func aMissingValueMakesAComparisonUnknownNotAnError() throws {
        #expect(try evaluate("battery < 20", [:]) == nil)
        #expect(try evaluate("not (battery < 20)", [:]) == nil)
        #expect(try evaluate("battery in [1, 2]", [:]) == nil)
        #expect(try evaluate("locked", [:]) == nil)
        // Three-valued logic: a known answer wins where it decides.
        #expect(try evaluate("battery < 20 or locked", ["locked": .boolean(true)]) == true)
        #expect(try evaluate("battery < 20 or locked", ["locked": .boolean(false)]) == nil)
        #expect(try evaluate("battery < 20 and locked", ["locked": .boolean(false)]) == false)
        #expect(try evaluate("locked and battery < 20", ["locked": .boolean(true)]) == nil)
    }

    @Test func nullAsksWhetherAValueIsPresent() throws {
        #expect(try evaluate("battery == null", [:]) == true)
        #expect(try evaluate("battery == null", ["battery": .integer(1, signed: false)]) == false)
        #expect(try evaluate("null != firmware", ["firmware": v("1.0")]) == true)
        #expect(try evaluate("battery == null or battery < 20", [:]) == true)
        #expect(try evaluate("null == null", [:]) == true)
        #expect(try evaluate("1 == null", [:]) == false)
        #expect(try errors("battery < null").map(\.message) == ["null can only be compared with == or !="])
        #expect(try errors("battery in [null]").map(\.message) == ["null cannot be in a list"])
    }

    @Test func aNumberAgainstTextIsATypeErrorWithAHint() throws {
        let e = try errors("battery == \"20\"")
        #expect(e.map(\.message) == ["cannot compare `battery` (an unsigned integer) with the text \"20\""])
        #expect(e.map(\.column) == [12])
        #expect(e.first?.hint == "write a number without quotes, or read `battery` as a number")
        let t = try errors("model == 20")
        #expect(t.map(\.message) == ["cannot compare `model` (text) with the number 20"])
        #expect(t.first?.hint == "write text in quotes: \"20\"")
    }

    @Test func mismatchedFieldsAreErrorsAtTheOperator() throws {
        let e = try errors("battery < firmware")
        #expect(e.map(\.message) == ["cannot compare an unsigned integer with a version: `battery` is an unsigned integer, `firmware` is a version"])
        #expect(e.map(\.column) == [9])
        #expect(try errors("config < \"01\"").map(\.message) == ["bytes can only be compared with == and !=, not <"])
        #expect(try errors("locked > true").map(\.message) == ["a boolean can only be compared with == and !=, not >"])
        #expect(try errors("firmware < \"latest\"").first?.message.hasPrefix("\"latest\" is not a version") == true)
        #expect(try errors("firmware < \"latest\"").first?.column == 12)
        #expect(try errors("firmware == true").map(\.message) == ["cannot compare a version with a boolean: `firmware` (a version) and true"])
        #expect(try errors("config == \"xyz\"").map(\.message) == ["\"xyz\" is not valid hex (pairs of 0-9, a-f), but `config` (bytes) holds bytes"])
        #expect(try errors("battery < 2.0.0").map(\.message) == ["cannot compare an unsigned integer with a version: `battery` (an unsigned integer) and 2.0.0"])
    }

    @Test func unknownNamesGetADidYouMeanHint() throws {
        let e = try errors("batery < 20")
        #expect(e.map(\.message) == ["unknown name `batery`"])
        #expect(e.map(\.column) == [1])
        #expect(e.first?.hint == "did you mean `battery`?")
        #expect(try errors("outcome == faild").first?.message == "`faild` is neither a known name nor a value of `outcome`")
        #expect(try errors("outcome == faild").first?.hint == "did you mean `failed`?")
        #expect(try errors("outcome == \"faild\"").first?.message == "\"faild\" is not a value of `outcome`")
        #expect(try errors("outcome == \"faild\"").first?.hint == "did you mean `failed`?")
        #expect(try errors("model == SL2").first?.hint == "to compare with the text, write it in quotes: \"SL2\"")
        #expect(try errors("zzz").first?.message == "unknown name `zzz`")
        #expect(try errors("zzz").first?.hint == nil)
    }

    @Test func everyErrorIsReportedInColumnOrder() throws {
        let e = try errors("model == 5 and batery < 20 or firmware < \"x\"")
        #expect(e.map(\.column) == [10, 16, 42])
    }

    @Test func onlyConditionsJoinWithAndOrNot() throws {
        #expect(try errors("battery").first?.message == "`battery` is an unsigned integer, not a condition")
        #expect(try errors("battery").first?.hint == "compare it, for example `battery == …`")
        #expect(try errors("20 and locked").first?.message == "20 is not a condition")
        #expect(try errors("(battery < 20) == true").first?.message == "a condition cannot be compared")
        #expect(try errors("battery in [battery]").first?.message == "list items must be values, and `battery` is a field")
        #expect(try errors("battery in [1, \"x\"]").map(\.column) == [16])
    }

    @Test func aValueOfTheWrongTypeAtRunTimeIsAnErrorWithTheColumn() throws {
        do {
            _ = try evaluate("locked and battery < 20", ["locked": .boolean(true), "battery": .text("19")])
            Issue.record("no error")
        } catch let error as ExpressionError {
            #expect(error.column == 20)
            #expect(error.message == "cannot compare text with an integer (\"19\" < 20)")
        }
        #expect(throws: ExpressionError.self) { try evaluate("locked", ["locked": .integer(1, signed: false)]) }
    }

    @Test func theCheckedExpressionNamesTheFieldsItReads() throws {
        #expect(try checked("outcome == failed and battery < 20 or firmware == null").names == ["outcome", "battery", "firmware"])
    }
}
