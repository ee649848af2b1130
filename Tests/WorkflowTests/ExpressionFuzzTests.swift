import Testing
@testable import Workflow

/// 10,000 generated and mutated expressions through the parser, the type checker and the evaluator:
/// nothing may trap or hang, every error must point inside the expression, and what the grammar
/// generates must parse.
@Suite struct ExpressionFuzzTests {
    private static let names = ["battery", "firmware", "model", "outcome", "locked", "temperature", "config", "captured.battery", "batery", "x"]
    private static let literals = ["20", "-3", "0x1F", "36.6", "2.0", "2.0.0", "1.9.0-rc1", "v2.1", "\"SL-2\"", "'01ff'", "true",
                                   "false", "null", "failed", "\"2.0\"", "1e3", "-0.5"]
    private static let operators = ["==", "!=", "<", "<=", ">", ">="]
    /// Comparisons that type-check, so that many generated expressions reach the evaluator.
    private static let wellTyped = ["battery < 20", "firmware >= 2.0", "model == \"SL-2\"", "outcome == failed", "locked",
                                    "temperature > 36.5", "config != '01ff'", "firmware in [1.9.0-rc1, v2.1]", "battery == null",
                                    "outcome not in [failed, skipped]", "battery >= -3"]

    /// A syntactically valid expression from the grammar, at most `depth` levels deep.
    private static func generate(_ g: inout SplitMix, depth: Int) -> String {
        func pick(_ items: [String]) -> String { items[Int(g.next() % UInt64(items.count))] }
        func operand() -> String { g.next() % 2 == 0 ? pick(names) : pick(literals) }
        let choice = depth <= 0 ? g.next() % 4 : g.next() % 8
        switch choice {
        case 0: return "\(operand()) \(pick(operators)) \(operand())"
        case 1:
            let count = Int(g.next() % 4)
            let items = (0..<count).map { _ in pick(literals) }.joined(separator: ", ")
            return "\(pick(names)) \(g.next() % 2 == 0 ? "in" : "not in") [\(items)]"
        case 2: return pick(names)
        case 3: return pick(wellTyped)
        case 7: return "not \(generate(&g, depth: depth - 1))"
        case 4: return "(\(generate(&g, depth: depth - 1)))"
        case 5: return "\(generate(&g, depth: depth - 1)) and \(generate(&g, depth: depth - 1))"
        default: return "\(generate(&g, depth: depth - 1)) or \(generate(&g, depth: depth - 1))"
        }
    }

    /// `text` with a few random edits: characters inserted, deleted, replaced or duplicated, drawn from
    /// the language's own alphabet and from hostile extras (quotes, backslashes, NUL, emoji, combining marks).
    private static func mutate(_ text: String, _ g: inout SplitMix) -> String {
        let alphabet: [String] = ["(", ")", "[", "]", ",", "=", "!", "<", ">", "\"", "'", "\\", "-", "+", ".", "0", "9", "x", "v",
                                  " ", "\t", "\n", "\0", "é", "\u{301}", "🔋", "名", "and", "or", "not", "in", "null", "&", "|", "@", "e"]
        var scalars = Array(text.unicodeScalars)
        let edits = 1 + Int(g.next() % 4)
        for _ in 0..<edits {
            let at = scalars.isEmpty ? 0 : Int(g.next() % UInt64(scalars.count + 1))
            let piece = Array(alphabet[Int(g.next() % UInt64(alphabet.count))].unicodeScalars)
            switch g.next() % 4 {
            case 0: scalars.insert(contentsOf: piece, at: at)
            case 1: if at < scalars.count { scalars.remove(at: at) }
            case 2: if at < scalars.count { scalars.replaceSubrange(at...at, with: piece) }
            default:
                if at < scalars.count {
                    let end = min(scalars.count, at + Int(g.next() % 8))
                    scalars.insert(contentsOf: scalars[at..<end], at: at)
                }
            }
        }
        return String(String.UnicodeScalarView(scalars))
    }

    @Test func tenThousandExpressionsNeverTrap() throws {
        var g = SplitMix(state: 0x5EED)
        let fields = CheckedExpressionTests.fields
        var parsed = 0, parseErrors = 0, checkedCount = 0, checkErrors = 0, evaluated = 0
        let values: [String: TypedValue] = [
            "battery": .integer(19, signed: false), "firmware": .version(try SemanticVersion(parsing: "2.0.0")),
            "model": .text("SL-2"), "outcome": .text("failed"), "locked": .boolean(true), "temperature": .real(36.6),
            "config": .bytes([1, 0xFF]),
        ]
        for i in 0..<10_000 {
            let valid = Self.generate(&g, depth: Int(g.next() % 5))
            let text = i % 2 == 0 ? valid : Self.mutate(valid, &g)
            let length = text.unicodeScalars.count
            let expression: Expression
            do {
                expression = try Expression(parsing: text)
                parsed += 1
            } catch {
                parseErrors += 1
                #expect(error.column >= 1 && error.column <= length + 1, "\(text): \(error)")
                #expect(i % 2 == 1, "a generated expression did not parse: \(text): \(error)")
                continue
            }
            let checked: CheckedExpression
            do {
                checked = try expression.check(fields: fields)
                checkedCount += 1
            } catch {
                checkErrors += 1
                #expect(!error.errors.isEmpty)
                for e in error.errors { #expect(e.column >= 1 && e.column <= length + 1, "\(text): \(e)") }
                continue
            }
            // Half the time every field is present, half the time a random subset is missing.
            let present = i % 4 < 2 ? values : values.filter { _ in g.next() % 2 == 0 }
            do {
                _ = try checked.evaluate { present[$0] }
                evaluated += 1
            } catch {
                Issue.record("a checked expression failed on values of its declared types: \(text): \(error)")
            }
        }
        #expect(parsed + parseErrors == 10_000)
        // The corpus exercises every path: parse errors, type errors, and evaluations.
        #expect(parseErrors > 500)
        #expect(checkErrors > 500)
        #expect(evaluated > 1000)
    }

    @Test func randomBytesNeverTrapTheLexer() {
        var g = SplitMix(state: 7)
        for _ in 0..<2_000 {
            let count = Int(g.next() % 64)
            let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: g.next()) }
            let text = String(decoding: bytes, as: UTF8.self)
            if let e = (try? Expression(parsing: text)) == nil ? Self.error(text) : nil {
                #expect(e.column >= 1 && e.column <= text.unicodeScalars.count + 1)
            }
        }
    }

    private static func error(_ text: String) -> ExpressionError? {
        do {
            _ = try Expression(parsing: text)
            return nil
        } catch {
            return error
        }
    }
}
