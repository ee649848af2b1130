import Testing
@testable import Workflow

/// Regexes on devices' values are bounded (PCRE2 with limits and a callout): a pattern that would
/// backtrack for minutes gives up, a passed deadline and a cancelled task end a match, and a pattern
/// that does not compile says at which character.
@Suite struct BoundedRegexTests {
    static func regex(_ p: String) throws -> BoundedRegex { try BoundedRegex.compile(p).get() }

    @Test func matchesAsAWorkflowExpects() throws {
        let cases: [(String, String, Bool)] = [
            (#"^2\.[0-9]+\.[0-9]+$"#, "2.4.1", true), (#"^2\."#, "1.9.0", false), ("^4f4b", "4f4b21", true), ("", "", true),
            ("é+$", "caféé", true), ("^.$", "é", true), (#"\d{3}"#, "ab123", true), ("(?i)^ok$", "OK", true), ("^a|b$", "xb", true),
        ]
        for (p, text, expected) in cases {
            #expect(try Self.regex(p).matches(text) == expected, "/\(p)/ on \(text)")
        }
        #expect(try Matcher.hexPattern("^4f4b").matches([0x4F, 0x4B, 0x21]))
        #expect(try !Matcher.textPattern(".").matches([0xC3, 0x28]), "invalid UTF-8 is not text")
    }

    @Test func aCatastrophicPatternGivesUpInsteadOfRunningForMinutes() throws {
        let text = String(repeating: "a", count: 24) + "!"
        #expect(throws: BoundedRegex.MatchError.self) { try Self.regex("^(a+)+$").matches(text) }
        let runaway = try Self.regex("^(a+)+$")
        do throws(BoundedRegex.MatchError) {
            _ = try runaway.matches(String(repeating: "a", count: 40) + "!")
        } catch {
            guard case .gaveUp(let why) = error else { Issue.record("\(error)"); return }
            #expect(why.contains("backtracking"))
        }
        // Through the matcher an await uses: the error a step reports, an input problem.
        #expect(throws: ValueError.self) { try Matcher.textPattern("^(a+)+$").matches(Array(text.utf8)) }
        // Through verify: the measurement fails and says why.
        let r = MeasurementLimits(matches: "^(a+)+$").check(.text(text), name: "fw")
        #expect(!r.passed)
        #expect(r.message.contains("gave up on the value"), "\(r.message)")
    }

    @Test func aPassedDeadlineEndsAMatch() throws {
        let text = String(repeating: "a", count: 30) + "!"
        let slow = try Self.regex("^(a|aa)+$")
        do throws(BoundedRegex.MatchError) {
            _ = try slow.matches(text, deadline: .now - .seconds(1))
            Issue.record("matched")
        } catch {
            #expect(error == .deadline)
        }
        let r = MeasurementLimits(matches: "^(a|aa)+$").check(.text(text), name: "fw", deadline: .now - .seconds(1))
        #expect(r.message.contains("did not finish before the step's deadline"), "\(r.message)")
    }

    /// A cancelled task (Ctrl-C, SIGTERM cutting a device) stops the match from inside: the callout
    /// looks at the task every few thousand steps.
    @Test func aCancelledTaskEndsAMatch() async throws {
        let text = String(repeating: "a", count: 30) + "!"
        let slow = try Self.regex("^(a|aa)+$")
        let outcome = await Task { () -> BoundedRegex.MatchError? in
            withUnsafeCurrentTask { $0?.cancel() }
            do throws(BoundedRegex.MatchError) {
                _ = try slow.matches(text)
                return nil
            } catch {
                return error
            }
        }.value
        #expect(outcome == .cancelled)
    }

    @Test func aPatternThatDoesNotCompileSaysWhere() {
        #expect(Matcher.regexError("^2\\.[0-9") == "missing terminating ] for character class at character 9")
        #expect(Matcher.regexError("a(b") == "missing closing parenthesis at character 4")
        #expect(Matcher.regexError("é(") == "missing closing parenthesis at character 3", "characters, not bytes")
        #expect(Matcher.regexError("^ok$") == nil)
    }
}
