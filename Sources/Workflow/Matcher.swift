import BLE
import Synchronization
import YAML

/// A concrete test on the bytes of a notification, an indication or a `confirm` read: what `await`
/// checks, after templates are rendered. (`verify` checks typed values with `MeasurementLimits`.)
///
/// `equals` compares bytes; a regex matches the lower-case hex string (`hexPattern`) or the UTF-8
/// text (`textPattern`), bounded in time (`BoundedRegex`).
public enum Matcher: Sendable, Equatable, CustomStringConvertible {
    case equalsBytes([UInt8])
    case hexPattern(String)
    case textPattern(String)

    /// Whether `bytes` match. A regex that gives up on them (it backtracks too much), passes
    /// `deadline` (`timeout` is the step's, for the message) or is cancelled throws the error a step
    /// reports (`BoundedRegex.MatchError.stepError`).
    public func matches(_ bytes: [UInt8], deadline: ContinuousClock.Instant? = nil, timeout: Duration? = nil) throws -> Bool {
        switch self {
        case .equalsBytes(let expected): return bytes == expected
        case .hexPattern(let pattern): return try Self.search(pattern, in: bytes.hexString, deadline: deadline, timeout: timeout)
        case .textPattern(let pattern):
            guard let text = String(validating: bytes, as: UTF8.self) else { return false }
            return try Self.search(pattern, in: text, deadline: deadline, timeout: timeout)
        }
    }

    public var description: String {
        switch self {
        case .equalsBytes(let b): return "equals \(b.hexString)"
        case .hexPattern(let p): return "matches hex /\(p)/"
        case .textPattern(let p): return "matches /\(p)/"
        }
    }

    /// Whether `pattern` compiles as a regular expression (PCRE2); the error, with the character it
    /// is at, when it does not.
    public static func regexError(_ pattern: String) -> String? {
        switch BoundedRegex.compile(pattern) {
        case .success: return nil
        case .failure(let e): return e.description
        }
    }

    static func search(_ pattern: String, in text: String, deadline: ContinuousClock.Instant?, timeout: Duration?) throws -> Bool {
        // Validation refused a pattern that does not compile; one that still does not matches nothing.
        guard case .success(let regex) = BoundedRegex.compile(pattern) else { return false }
        do {
            return try regex.matches(text, deadline: deadline)
        } catch {
            throw error.stepError(pattern: pattern, value: text, timeout: timeout)
        }
    }
}

/// A matcher as written in the workflow, possibly with templates; rendered per device into a `Matcher`.
public enum MatcherSpec: Sendable, Equatable {
    /// `equals:` on an await or a confirm: the bytes must be equal.
    case equalsValue(ValueSpec)
    /// `matches:` — `{ hex: regex }` / `{ utf8: regex }`.
    case matches(pattern: String, hex: Bool)

    /// Every template inside.
    public var templates: [Template] {
        switch self {
        case .equalsValue(let v): return v.templates
        case .matches: return []
        }
    }

    /// Renders templates into a concrete matcher.
    public func resolve(variables lookup: (String) -> String?, baseDirectory: String) throws(ValueError) -> Matcher {
        switch self {
        case .equalsValue(let v):
            return .equalsBytes(try v.bytes(variables: lookup, baseDirectory: baseDirectory))
        case .matches(let pattern, let hex):
            return hex ? .hexPattern(pattern) : .textPattern(pattern)
        }
    }
}
