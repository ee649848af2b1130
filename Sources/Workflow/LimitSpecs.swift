import BLE
import YAML

/// The limits of a `verify` as the workflow writes them: literals, already read as the value's type
/// when the workflow was parsed, or templates (`min: "${min_battery}"`) resolved for each device into
/// the `MeasurementLimits` the value is checked against.
public struct LimitSpecs: Sendable, Equatable {
    /// One limit as written.
    public enum Limit: Sendable, Equatable {
        case value(TypedValue)
        case template(Template)
        /// Bytes built from typed parts (`equals: [{ uint32le: "${interval_s}" }, { utf8: "${room}", length: 16 }]`),
        /// for a value that is bytes. No part reads a file (validation refuses one).
        case encoded(ValueSpec)
    }

    /// How a limit's text is read: `min`/`max` as numbers, `equals`/`in` as the value's type,
    /// `version_*` as versions.
    public enum Kind: Sendable, Equatable {
        case number, sameAsValue, version
    }

    public var min: Limit?
    public var max: Limit?
    public var equals: Limit?
    /// `in:` (alias `one_of:`): the value must equal one of these.
    public var oneOf: [Limit]?
    /// `matches:`: a regular expression (literal, never a template).
    public var matches: String?
    public var versionAtLeast: Limit?
    public var versionBelow: Limit?

    public init(min: Limit? = nil, max: Limit? = nil, equals: Limit? = nil, oneOf: [Limit]? = nil, matches: String? = nil,
                versionAtLeast: Limit? = nil, versionBelow: Limit? = nil) {
        self.min = min
        self.max = max
        self.equals = equals
        self.oneOf = oneOf
        self.matches = matches
        self.versionAtLeast = versionAtLeast
        self.versionBelow = versionBelow
    }

    /// Every limit with its workflow key and how it is read, in `MeasurementLimits.keys` order.
    public var all: [(key: String, kind: Kind, limit: Limit)] {
        var out: [(String, Kind, Limit)] = []
        if let min { out.append(("min", .number, min)) }
        if let max { out.append(("max", .number, max)) }
        if let equals { out.append(("equals", .sameAsValue, equals)) }
        for item in oneOf ?? [] { out.append(("in", .sameAsValue, item)) }
        if let versionAtLeast { out.append(("version_at_least", .version, versionAtLeast)) }
        if let versionBelow { out.append(("version_below", .version, versionBelow)) }
        return out
    }

    /// Every template among the limits (those inside built values too).
    public var templates: [Template] {
        all.flatMap { item -> [Template] in
            switch item.limit {
            case .template(let t): return [t]
            case .encoded(let spec): return spec.templates
            case .value: return []
            }
        }
    }

    /// The limits built from typed parts.
    public var encoded: [ValueSpec] {
        all.compactMap { if case .encoded(let spec) = $0.limit { return spec } else { return nil } }
    }

    /// Reads a limit's text: a number for `min`/`max` (an integer when it is one, else a real), the
    /// value's type for `equals`/`in`, a version for `version_*`.
    public static func read(_ text: String, _ kind: Kind, valueType: ValueType) throws(ValueError) -> TypedValue {
        switch kind {
        case .number:
            if let n = YAMLReader.integer(text) {
                if case .integer(let signed) = valueType { return .integer(n, signed: signed || n < 0) }
                return .integer(n, signed: true)
            }
            do {
                return try TypedValue(text: text, as: .real)
            } catch {
                throw ValueError("\"\(TypedValue.quoted(text))\" is not a number")
            }
        case .sameAsValue:
            return try TypedValue(text: text, as: valueType)
        case .version:
            return .version(try SemanticVersion(parsing: text))
        }
    }

    /// The limits for one device. A template that is a lone `${name}` with a typed value (`typed`: a
    /// capture or a declared variable) keeps that value; any other template is rendered (`text`) and
    /// read as `read(_:_:valueType:)` does.
    public func resolve(valueType: ValueType, typed: (String) -> TypedValue?,
                        text: (String) -> String?) throws(ValueError) -> MeasurementLimits {
        func one(_ limit: Limit?, _ kind: Kind) throws(ValueError) -> TypedValue? {
            guard let limit else { return nil }
            switch limit {
            case .value(let v):
                return v
            case .template(let t):
                if let name = t.loneReference, let v = typed(name), v.type != .text { return v }
                let rendered: String
                do { rendered = try t.render(text) } catch { throw ValueError(error.message) }
                return try Self.read(rendered, kind, valueType: valueType)
            case .encoded(let spec):
                return .bytes(try spec.bytes(variables: text, baseDirectory: ""))
            }
        }
        var items: [TypedValue]?
        if let oneOf {
            var list: [TypedValue] = []
            for item in oneOf { if let v = try one(item, .sameAsValue) { list.append(v) } }
            items = list
        }
        func version(_ limit: Limit?) throws(ValueError) -> SemanticVersion? {
            guard let v = try one(limit, .version) else { return nil }
            guard case .version(let version) = v else { throw ValueError("\(v.quotedForMessage) is not a version") }
            return version
        }
        return MeasurementLimits(min: try one(min, .number), max: try one(max, .number), equals: try one(equals, .sameAsValue),
                                 oneOf: items, matches: matches, versionAtLeast: try version(versionAtLeast),
                                 versionBelow: try version(versionBelow))
    }
}

extension Template {
    /// The name when the template is exactly one reference (`"${battery}"`), else nil.
    public var loneReference: String? {
        guard parts.count == 1, case .reference(let name, _) = parts[0] else { return nil }
        return name
    }
}
