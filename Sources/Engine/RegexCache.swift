import BLE
import Synchronization
import Workflow

/// Compiled regular expressions of a run's matchers, shared by every device agent.
///
/// `Matcher.matches` compiles its pattern on every call (about 5 % of the engine's CPU at 2,000
/// devices/s, two or three `await`/`verify` checks per device); the patterns come from the workflow and
/// are few, so the run compiles each once. Semantics are `Matcher`'s: a hex pattern is searched in the
/// lower-case hex of the bytes, a text pattern in their UTF-8 text (no match when not valid UTF-8), a
/// pattern that does not compile matches nothing; every other matcher is `Matcher`'s own.
final class RegexCache: Sendable {
    // Regex does not declare Sendable, but it is only read here and its lazily compiled program is published atomically.
    private struct Compiled: @unchecked Sendable {
        let regex: Regex<AnyRegexOutput>?
    }

    private let compiled = Mutex<[String: Compiled]>([:])

    private func regex(_ pattern: String) -> Regex<AnyRegexOutput>? {
        if let c = compiled.withLock({ $0[pattern] }) { return c.regex }
        let c = Compiled(regex: try? Regex(pattern))
        compiled.withLock { $0[pattern] = c }
        return c.regex
    }

    private func search(_ pattern: String, in text: String) -> Bool {
        guard let regex = regex(pattern) else { return false }
        return (try? regex.firstMatch(in: text)) != nil
    }

    /// `matcher.matches(bytes)` (notifications, indications).
    func matches(_ matcher: Matcher, _ bytes: [UInt8]) -> Bool {
        switch matcher {
        case .hexPattern(let pattern): return search(pattern, in: bytes.hexString)
        case .textPattern(let pattern):
            guard let text = String(validating: bytes, as: UTF8.self) else { return false }
            return search(pattern, in: text)
        default: return matcher.matches(bytes)
        }
    }

    /// `matcher.matches(value)` (captured values).
    func matches(_ matcher: Matcher, _ value: String) -> Bool {
        switch matcher {
        case .hexPattern(let pattern), .textPattern(let pattern): return search(pattern, in: value)
        default: return matcher.matches(value)
        }
    }
}
