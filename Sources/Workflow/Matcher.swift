import BLE
import Synchronization
import YAML

/// A concrete test on the bytes of a notification, an indication or a `confirm` read: what `await`
/// checks, after templates are rendered. (`verify` checks typed values with `MeasurementLimits`.)
///
/// `equals` compares bytes; a regex matches the lower-case hex string (`hexPattern`) or the UTF-8
/// text (`textPattern`).
public enum Matcher: Sendable, Equatable, CustomStringConvertible {
    case equalsBytes([UInt8])
    case hexPattern(String)
    case textPattern(String)

    public func matches(_ bytes: [UInt8]) -> Bool {
        switch self {
        case .equalsBytes(let expected): return bytes == expected
        case .hexPattern(let pattern): return Self.search(pattern, in: bytes.hexString)
        case .textPattern(let pattern):
            guard let text = String(validating: bytes, as: UTF8.self) else { return false }
            return Self.search(pattern, in: text)
        }
    }

    public var description: String {
        switch self {
        case .equalsBytes(let b): return "equals \(b.hexString)"
        case .hexPattern(let p): return "matches hex /\(p)/"
        case .textPattern(let p): return "matches /\(p)/"
        }
    }

    /// Whether `pattern` compiles as a regular expression; the error text when it does not.
    public static func regexError(_ pattern: String) -> String? {
        do {
            _ = try Regex(pattern)
            return nil
        } catch {
            return "\(error)"
        }
    }

    static func search(_ pattern: String, in text: String) -> Bool {
        guard let regex = RegexCache.shared.regex(pattern) else { return false }
        return (try? regex.firstMatch(in: text)) != nil
    }
}

/// Compiled patterns, by source text: a run matches the same few workflow patterns thousands of times,
/// and compiling one costs far more than matching it.
final class RegexCache: Sendable {
    static let shared = RegexCache()

    private struct Compiled: @unchecked Sendable {  // reason: Regex is not Sendable; a compiled one is only read once stored
        let regex: Regex<AnyRegexOutput>?
    }

    private let compiled = Mutex<[String: Compiled]>([:])
    /// Workflows hold few patterns; a bound keeps hostile input from growing the cache without end.
    private let limit = 1024

    /// The compiled pattern, or nil when it does not compile (such a pattern matches nothing).
    func regex(_ pattern: String) -> Regex<AnyRegexOutput>? {
        if let c = compiled.withLock({ $0[pattern] }) { return c.regex }
        let c = Compiled(regex: try? Regex(pattern))
        compiled.withLock { cache in
            if cache.count >= limit { cache.removeAll(keepingCapacity: true) }
            cache[pattern] = c
        }
        return c.regex
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
