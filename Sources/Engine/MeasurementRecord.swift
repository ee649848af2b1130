import Workflow

/// One `verify` of one device in the report (`devices[].measurements[]`): the measurement as OpenHTF
/// records one (`MeasurementResult`: name, value and its type, unit, limits, outcome, message) and
/// the index of the step that made it in `devices[].steps`.
///
/// ```json
/// {"limits":{"max":100,"min":20},"message":"battery 19 % is below min 20 %","name":"battery level",
///  "outcome":"fail","step":7,"type":"uint","unit":"%","value":19}
/// ```
public struct MeasurementRecord: Codable, Sendable, Equatable {
    /// The index of the `verify` step in the workflow (and in `devices[].steps`), from 0.
    public var step: Int
    public var result: MeasurementResult
    /// True when the value or a limit showed a secret: those are left out and the message shows `***`.
    public var redacted: Bool?

    public init(step: Int, result: MeasurementResult, redacted: Bool? = nil) {
        self.step = step
        self.result = result
        self.redacted = redacted
    }

    private enum CodingKeys: String, CodingKey {
        case redacted, step
    }

    /// The result's members and `step` (and `redacted`) in one object.
    public func encode(to encoder: any Encoder) throws {
        try result.encode(to: encoder)
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(redacted, forKey: .redacted)
        try c.encode(step, forKey: .step)
    }

    public init(from decoder: any Decoder) throws {
        result = try MeasurementResult(from: decoder)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        step = try c.decode(Int.self, forKey: .step)
        redacted = try c.decodeIfPresent(Bool.self, forKey: .redacted)
    }
}
