import BLE
import Synchronization

/// A concrete test on a value: what `verify` and `await` check, after templates are rendered.
///
/// For bytes (notifications): `equals` compares bytes; a regex matches the lower-case hex string
/// (`hexPattern`) or the UTF-8 text (`textPattern`). For text (`verify`): `equals`, a regex, a numeric
/// `in` range (inclusive), or `one_of`.
public enum Matcher: Sendable, Equatable, CustomStringConvertible {
    case equalsBytes([UInt8])
    case hexPattern(String)
    case textPattern(String)
    case equalsText(String)
    case range(Double, Double)
    case oneOf([String])

    /// For notifications and indications.
    public func matches(_ bytes: [UInt8]) -> Bool {
        switch self {
        case .equalsBytes(let expected): return bytes == expected
        case .hexPattern(let pattern): return Self.search(pattern, in: bytes.hexString)
        case .textPattern(let pattern):
            guard let text = String(validating: bytes, as: UTF8.self) else { return false }
            return Self.search(pattern, in: text)
        case .equalsText(let text): return String(validating: bytes, as: UTF8.self) == text
        case .range, .oneOf:
            return matches(bytes.hexString)
        }
    }

    /// For captured values (`verify`).
    public func matches(_ value: String) -> Bool {
        switch self {
        case .equalsText(let text): return value == text
        case .equalsBytes(let expected): return [UInt8](hex: value) == expected
        case .hexPattern(let pattern), .textPattern(let pattern): return Self.search(pattern, in: value)
        case .range(let low, let high):
            guard let number = Double(value.trimmingSpaces) else { return false }
            return number >= low && number <= high
        case .oneOf(let options): return options.contains(value)
        }
    }

    public var description: String {
        switch self {
        case .equalsBytes(let b): return "equals \(b.hexString)"
        case .hexPattern(let p): return "matches hex /\(p)/"
        case .textPattern(let p): return "matches /\(p)/"
        case .equalsText(let t): return "equals \"\(t)\""
        case .range(let a, let b): return "in [\(Self.number(a)), \(Self.number(b))]"
        case .oneOf(let options): return "one of [\(options.joined(separator: ", "))]"
        }
    }

    static func number(_ d: Double) -> String {
        d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
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
    /// `equals:` on a verify: the rendered text must be equal.
    case equalsText(Template)
    /// `equals:` on an await: the bytes must be equal.
    case equalsValue(ValueSpec)
    /// `matches:` — a regex on text (verify), or `{ hex: regex }` / `{ utf8: regex }` on an await.
    case matches(pattern: String, hex: Bool)
    /// `in: [min, max]`, inclusive, numeric.
    case range(Double, Double)
    /// `one_of: [a, b]`.
    case oneOf([Template])

    /// Every template inside.
    public var templates: [Template] {
        switch self {
        case .equalsText(let t): return [t]
        case .equalsValue(let v): return v.templates
        case .oneOf(let ts): return ts
        case .matches, .range: return []
        }
    }

    /// Renders templates into a concrete matcher.
    public func resolve(variables lookup: (String) -> String?, baseDirectory: String) throws(ValueError) -> Matcher {
        switch self {
        case .equalsText(let t):
            do { return .equalsText(try t.render(lookup)) } catch { throw ValueError(error.message) }
        case .equalsValue(let v):
            return .equalsBytes(try v.bytes(variables: lookup, baseDirectory: baseDirectory))
        case .matches(let pattern, let hex):
            return hex ? .hexPattern(pattern) : .textPattern(pattern)
        case .range(let a, let b):
            return .range(a, b)
        case .oneOf(let ts):
            var out: [String] = []
            for t in ts {
                do { out.append(try t.render(lookup)) } catch { throw ValueError(error.message) }
            }
            return .oneOf(out)
        }
    }
}
