import BLE

/// The limits of a measurement: what `verify` checks a typed value against.
///
/// | limit              | value types                 | passes when                                        |
/// |--------------------|-----------------------------|----------------------------------------------------|
/// | `min`              | integer, real               | value >= min (inclusive)                           |
/// | `max`              | integer, real               | value <= max (inclusive)                           |
/// | `equals`           | any                         | value == equals (as `TypedValue.compare`)          |
/// | `in`               | any                         | value equals one of the list                       |
/// | `matches`          | text, bytes (hex), version  | the regex finds a match in the text / lower-case hex / version as written |
/// | `version_at_least` | version                     | value >= the version (semantic order)              |
/// | `version_below`    | version                     | value < the version                                |
///
/// `min` and `max` may be given alone or together. Every limit given must hold. `typeProblems(for:)`
/// finds at validation time what cannot work at run time (`min` on text, a regex that does not
/// compile, `min` above `max`); `check` never traps, whatever value comes.
public struct MeasurementLimits: Sendable, Equatable {
    public var min: TypedValue?
    public var max: TypedValue?
    public var equals: TypedValue?
    /// `in:`: the value must equal one of these.
    public var oneOf: [TypedValue]?
    /// `matches:`: a regular expression (PCRE2 syntax, matched within bounds: `BoundedRegex`).
    public var matches: String?
    public var versionAtLeast: SemanticVersion?
    public var versionBelow: SemanticVersion?

    public init(min: TypedValue? = nil, max: TypedValue? = nil, equals: TypedValue? = nil, oneOf: [TypedValue]? = nil,
                matches: String? = nil, versionAtLeast: SemanticVersion? = nil, versionBelow: SemanticVersion? = nil) {
        self.min = min
        self.max = max
        self.equals = equals
        self.oneOf = oneOf
        self.matches = matches
        self.versionAtLeast = versionAtLeast
        self.versionBelow = versionBelow
    }

    /// The workflow keys, in the order limits are checked and shown.
    public static let keys = ["min", "max", "equals", "in", "matches", "version_at_least", "version_below"]

    /// True when no limit is given.
    public var isEmpty: Bool {
        min == nil && max == nil && equals == nil && oneOf == nil && matches == nil && versionAtLeast == nil && versionBelow == nil
    }

    // MARK: Validation

    /// A limit that cannot apply to a value: which key, and why.
    public struct Problem: Sendable, Equatable, CustomStringConvertible {
        /// The workflow key (`min`, `matches`, …) the problem is at; empty for the verify as a whole.
        public var key: String
        public var message: String
        public var hint: String?
        public var description: String { key.isEmpty ? message : "\(key): \(message)" }
    }

    /// What is wrong with these limits for a value of `type`, found before anything runs. Empty when
    /// the limits can be checked.
    public func typeProblems(for type: ValueType) -> [Problem] {
        var out: [Problem] = []
        if isEmpty {
            out.append(Problem(key: "", message: "a verify needs at least one limit", hint: "one of: \(Self.keys.joined(separator: ", "))"))
        }
        for (key, limit) in [("min", min), ("max", max)] {
            guard let limit else { continue }
            if !type.isNumeric {
                let hint = type == .version ? "for versions use version_at_least / version_below" : "min and max need a number (read the value as: uint8, sfloat, …)"
                out.append(Problem(key: key, message: "\(key) needs a number, but the value is \(type.phrase)", hint: hint))
            } else if !limit.type.isNumeric {
                out.append(Problem(key: key, message: "\(key) must be a number, not \(limit.type.phrase) (\(limit.quotedForMessage))"))
            }
        }
        if let lo = min, let hi = max, lo.type.isNumeric, hi.type.isNumeric, (try? TypedValue.compare(lo, .greater, hi)) == true {
            out.append(Problem(key: "min", message: "min \(lo) is above max \(hi): no value can pass"))
        }
        if let equals, let message = ValueType.comparisonError(type, .equal, equals.type) {
            out.append(Problem(key: "equals", message: "\(message) (\(equals.quotedForMessage))"))
        }
        if let oneOf {
            if oneOf.isEmpty { out.append(Problem(key: "in", message: "the list is empty: no value can pass")) }
            for item in oneOf {
                if let message = ValueType.comparisonError(type, .equal, item.type) {
                    out.append(Problem(key: "in", message: "\(message) (\(item.quotedForMessage))"))
                }
            }
        }
        if let matches {
            switch type {
            case .text, .bytes, .version: break
            default:
                out.append(Problem(key: "matches", message: "matches needs text, bytes or a version, but the value is \(type.phrase)",
                                   hint: "compare numbers with min, max, equals or in"))
            }
            if let error = Matcher.regexError(matches) {
                out.append(Problem(key: "matches", message: "the regular expression does not compile: \(error)"))
            }
        }
        for (key, limit) in [("version_at_least", versionAtLeast), ("version_below", versionBelow)] where limit != nil && type != .version {
            out.append(Problem(key: key, message: "\(key) needs a version, but the value is \(type.phrase)", hint: "read the value as: version"))
        }
        return out
    }

    // MARK: Checking

    /// Checks `value` (nil: it has no value, which fails) against every limit, in `keys` order; the
    /// message names the first limit that fails, or all of them when the value passes.
    ///
    /// A `matches` regex is matched within bounds (`BoundedRegex`): one that gives up on the value,
    /// passes `deadline` or is cancelled fails the measurement and says so (the caller checks for
    /// cancellation after: a cut device is interrupted, not failed).
    public func check(_ value: TypedValue?, name: String, unit: String? = nil, deadline: ContinuousClock.Instant? = nil) -> MeasurementResult {
        func result(_ outcome: MeasurementResult.Outcome, _ message: String) -> MeasurementResult {
            MeasurementResult(name: name, value: value, limits: self, unit: unit, outcome: outcome, message: message)
        }
        guard let value else { return result(.fail, "\(name) has no value") }
        let shown = "\(name) \(Self.show(value, unit))"
        do throws(ValueError) {
            if let min, try TypedValue.compare(value, .less, min) {
                return result(.fail, "\(shown) is below min \(Self.show(min, unit))")
            }
            if let max, try TypedValue.compare(value, .greater, max) {
                return result(.fail, "\(shown) is above max \(Self.show(max, unit))")
            }
            if let equals, try !TypedValue.compare(value, .equal, equals) {
                return result(.fail, "\(shown) does not equal \(Self.show(equals, unit))")
            }
            if let oneOf {
                var found = false
                for item in oneOf where try TypedValue.compare(value, .equal, item) {
                    found = true
                    break
                }
                if !found { return result(.fail, "\(shown) is not in \(Self.list(oneOf, unit))") }
            }
            if let matches {
                let text: String
                switch value {
                case .text(let s): text = s
                case .bytes(let b): text = b.hexString
                case .version(let v): text = v.text
                default: throw ValueError("matches needs text, bytes or a version, not \(value.type.phrase)")
                }
                // The compiled pattern is cached: a run checks the same few patterns on every device.
                guard case .success(let regex) = BoundedRegex.compile(matches) else {
                    throw ValueError("the regular expression /\(matches)/ does not compile")
                }
                let found: Bool
                do {
                    found = try regex.matches(text, deadline: deadline)
                } catch {
                    switch error {
                    case .gaveUp(let why):
                        throw ValueError("the regular expression /\(matches)/ gave up on the value: \(why); write it so that it cannot backtrack this much")
                    case .deadline:
                        throw ValueError("the regular expression /\(matches)/ did not finish before the step's deadline")
                    case .cancelled:
                        throw ValueError("interrupted while matching /\(matches)/")
                    }
                }
                if !found { return result(.fail, "\(shown) does not match /\(matches)/") }
            }
            if let versionAtLeast, try TypedValue.compare(value, .less, .version(versionAtLeast)) {
                return result(.fail, "\(shown) is below version_at_least \(versionAtLeast.text)")
            }
            if let versionBelow, try !TypedValue.compare(value, .less, .version(versionBelow)) {
                return result(.fail, "\(shown) is not below version_below \(versionBelow.text)")
            }
        } catch {
            return result(.fail, "\(name): \(error.message)")
        }
        return result(.pass, "\(shown) passes \(description(unit: unit))")
    }

    /// `min 20 %, max 100 %`: the limits as a message shows them.
    public func description(unit: String?) -> String {
        var parts: [String] = []
        if let min { parts.append("min \(Self.show(min, unit))") }
        if let max { parts.append("max \(Self.show(max, unit))") }
        if let equals { parts.append("equals \(Self.show(equals, unit))") }
        if let oneOf { parts.append("in \(Self.list(oneOf, unit))") }
        if let matches { parts.append("matches /\(matches)/") }
        if let versionAtLeast { parts.append("version_at_least \(versionAtLeast.text)") }
        if let versionBelow { parts.append("version_below \(versionBelow.text)") }
        return parts.joined(separator: ", ")
    }

    /// A value in a message: numbers with the unit after a space (`19 %`), text quoted.
    private static func show(_ value: TypedValue, _ unit: String?) -> String {
        if let unit, !unit.isEmpty, value.type.isNumeric { return "\(value) \(unit)" }
        return value.quotedForMessage
    }

    private static func list(_ values: [TypedValue], _ unit: String?) -> String {
        let items = values.prefix(20).map(\.quotedForMessage).joined(separator: ", ") + (values.count > 20 ? ", …" : "")
        if let unit, !unit.isEmpty, values.allSatisfy(\.type.isNumeric) { return "[\(items)] \(unit)" }
        return "[\(items)]"
    }
}
