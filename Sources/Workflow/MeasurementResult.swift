/// One checked measurement, passed or failed: the record an auditor reads (as OpenHTF records a
/// measurement: name, value, unit, limits, outcome).
///
/// JSON (keys as written by an encoder with sorted keys; absent fields are left out):
/// ```json
/// {
///   "limits": { "max": 100, "min": 20 },
///   "message": "battery 19 % is below min 20 %",
///   "name": "battery",
///   "outcome": "fail",
///   "type": "uint",
///   "unit": "%",
///   "value": 19
/// }
/// ```
/// `value` is the typed value's JSON (`TypedValue.jsonScalar`) and `type` its `ValueType.name`, so a
/// reader gets the value back exactly; both are absent when the value was missing. Limits are read
/// back with the value's type (`min`/`max` as JSON has them when they do not fit it). `limits` uses the
/// workflow's keys (`min`, `max`, `equals`, `in`, `matches`, `version_at_least`, `version_below`).
public struct MeasurementResult: Sendable, Equatable, Codable {
    public enum Outcome: String, Sendable, Codable {
        case pass, fail
    }

    public var name: String
    public var value: TypedValue?
    public var limits: MeasurementLimits
    public var unit: String?
    public var outcome: Outcome
    /// `battery 19 % is below min 20 %`, `battery 45 % passes min 20 %, max 100 %`.
    public var message: String

    public init(name: String, value: TypedValue?, limits: MeasurementLimits, unit: String?, outcome: Outcome, message: String) {
        self.name = name
        self.value = value
        self.limits = limits
        self.unit = unit
        self.outcome = outcome
        self.message = message
    }

    public var passed: Bool { outcome == .pass }

    private enum CodingKeys: String, CodingKey {
        case name, value, type, unit, limits, outcome, message
    }

    private struct LimitKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ s: String) { stringValue = s }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encodeIfPresent(value, forKey: .value)
        try c.encodeIfPresent(value?.type.name, forKey: .type)
        try c.encodeIfPresent(unit, forKey: .unit)
        var l = c.nestedContainer(keyedBy: LimitKey.self, forKey: .limits)
        try l.encodeIfPresent(limits.min, forKey: LimitKey("min"))
        try l.encodeIfPresent(limits.max, forKey: LimitKey("max"))
        try l.encodeIfPresent(limits.equals, forKey: LimitKey("equals"))
        try l.encodeIfPresent(limits.oneOf, forKey: LimitKey("in"))
        try l.encodeIfPresent(limits.matches, forKey: LimitKey("matches"))
        try l.encodeIfPresent(limits.versionAtLeast?.text, forKey: LimitKey("version_at_least"))
        try l.encodeIfPresent(limits.versionBelow?.text, forKey: LimitKey("version_below"))
        try c.encode(outcome, forKey: .outcome)
        try c.encode(message, forKey: .message)
    }

    /// Reads a record written by `encode(to:)`. The value is read with its `type`; `equals` and `in`
    /// with the same type (their natural JSON type when the value is absent).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        unit = try c.decodeIfPresent(String.self, forKey: .unit)
        outcome = try c.decode(Outcome.self, forKey: .outcome)
        message = try c.decode(String.self, forKey: .message)
        let typeName = try c.decodeIfPresent(String.self, forKey: .type)
        var type: ValueType?
        if let typeName {
            guard let t = ValueType(name: typeName) else {
                throw DecodingError.dataCorruptedError(forKey: .type, in: c, debugDescription: "unknown value type \"\(typeName)\"")
            }
            type = t
        }
        func typed(_ scalar: JSONScalar, as t: ValueType?, key: CodingKeys) throws -> TypedValue {
            do {
                if let t { return try TypedValue(json: scalar, as: t) }
                return try Self.natural(scalar)
            } catch {
                throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: error.message)
            }
        }
        if let scalar = try c.decodeIfPresent(JSONScalar.self, forKey: .value), scalar != .null {
            guard type != nil else {
                throw DecodingError.dataCorruptedError(forKey: .value, in: c, debugDescription: "a value needs its type")
            }
            value = try typed(scalar, as: type, key: .value)
        } else {
            value = nil
        }
        let l = try c.nestedContainer(keyedBy: LimitKey.self, forKey: .limits)
        func scalar(_ key: String) throws -> JSONScalar? { try l.decodeIfPresent(JSONScalar.self, forKey: LimitKey(key)) }
        // A decoder that converts keys from snake_case (the engine's report and journal) shows
        // `version_at_least` as `versionAtLeast`.
        func version(_ key: String, _ converted: String) throws -> SemanticVersion? {
            guard let text = try l.decodeIfPresent(String.self, forKey: LimitKey(key))
                    ?? l.decodeIfPresent(String.self, forKey: LimitKey(converted)) else { return nil }
            do {
                return try SemanticVersion(parsing: text)
            } catch {
                throw DecodingError.dataCorruptedError(forKey: .limits, in: c, debugDescription: error.message)
            }
        }
        // min and max are numbers: of the value's type when it is numeric and they fit it (a limit
        // is written in the value's type), else as JSON has them (a real limit on an integer value).
        func bound(_ key: String) throws -> TypedValue? {
            guard let s = try scalar(key) else { return nil }
            if let type, type.isNumeric, let v = try? TypedValue(json: s, as: type) { return v }
            return try typed(s, as: nil, key: .limits)
        }
        limits = MeasurementLimits(
            min: try bound("min"),
            max: try bound("max"),
            equals: try scalar("equals").map { try typed($0, as: type, key: .limits) },
            oneOf: try l.decodeIfPresent([JSONScalar].self, forKey: LimitKey("in")).map { try $0.map { try typed($0, as: type, key: .limits) } },
            matches: try l.decodeIfPresent(String.self, forKey: LimitKey("matches")),
            versionAtLeast: try version("version_at_least", "versionAtLeast"),
            versionBelow: try version("version_below", "versionBelow"))
    }

    /// A JSON scalar on its own terms: integers signed, reals, strings as text, booleans.
    private static func natural(_ scalar: JSONScalar) throws(ValueError) -> TypedValue {
        switch scalar {
        case .integer(let n): return .integer(n, signed: true)
        case .real(let d): return .real(d)
        case .string(let s): return .text(s)
        case .boolean(let b): return .boolean(b)
        case .null: throw ValueError("null is not a value")
        }
    }
}
