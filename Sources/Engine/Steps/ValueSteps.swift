import Workflow

/// The value family: `verify` (a measurement against its limits), `set` (a value derived from others)
/// and `sleep`. No radio.
struct ValueSteps: StepExecutor {
    func run(_ step: Step, in context: StepContext) async throws -> StepOutput {
        switch step.kind {
        case .verify(let v):
            try verify(v, context)
        case .derive(let d):
            return try derive(d, context)
        case .sleep(let s):
            try await Task.sleep(for: s.duration)
        default:
            throw DeviceFailure(.invalidInput, "`\(step.kind.keyword)` is not a value step")
        }
        return .none
    }

    /// Checks a verify's value against its limits for this device and records the measurement, passed
    /// or failed; a failed one fails the step (`verify_failed`) with the measurement's message.
    private func verify(_ v: Step.Verify, _ context: StepContext) throws {
        let value: TypedValue?
        if let name = v.value.loneReference {
            value = context.value(name)
        } else {
            value = (try? context.render(v.value)).map { .text($0) }
        }
        var result: MeasurementResult
        do {
            let limits = try v.limits.resolve(valueType: v.valueType, typed: context.value, text: context.text)
            result = limits.check(value, name: v.measurementName, unit: v.unit)
        } catch {
            result = MeasurementResult(name: v.measurementName, value: value, limits: MeasurementLimits(), unit: v.unit, outcome: .fail,
                                       message: "\(v.measurementName): the limits cannot be made for this device: \(error.message)")
        }
        let secrets = context.secretNames
        let redactor = context.redactor
        let secret = v.value.referencedNames.contains(where: secrets.contains)
            || v.limits.templates.contains { $0.referencedNames.contains(where: secrets.contains) }
        var record = MeasurementRecord(step: context.index, result: result)
        if secret || Self.revealsSecret(result, redactor) {
            record.redacted = true
            record.result.value = nil
            record.result.limits = Self.hidingSecrets(result.limits, all: secret, redactor)
            // Every rendering of a secret is known to the redactor but one too short to match safely.
            let short = secret && (value?.description.count ?? 0) < 2
            record.result.message = short ? "\(v.measurementName) *** \(result.outcome == .pass ? "passes" : "fails")" : redactor.redact(result.message)
        }
        context.measured(record)
        if !result.passed { throw DeviceFailure(.verifyFailed, record.result.message) }
    }

    private static func revealsSecret(_ r: MeasurementResult, _ redactor: Redactor) -> Bool {
        guard !redactor.isEmpty else { return false }
        let texts = [r.message, r.value?.description ?? "", r.limits.description(unit: r.unit)]
        return texts.contains { redactor.redact($0) != $0 }
    }

    /// The limits without those that show a secret (all of them when the value is secret).
    private static func hidingSecrets(_ l: MeasurementLimits, all: Bool, _ redactor: Redactor) -> MeasurementLimits {
        guard !all else { return MeasurementLimits() }
        func keep(_ v: TypedValue?) -> TypedValue? { v.flatMap { redactor.redact($0.description) == $0.description ? $0 : nil } }
        var out = l
        out.min = keep(l.min)
        out.max = keep(l.max)
        out.equals = keep(l.equals)
        out.oneOf = l.oneOf.map { $0.compactMap(keep) }
        return out
    }

    /// `set:`: derives the value from typed inputs (`Step.Derive.value` says how).
    private func derive(_ d: Step.Derive, _ context: StepContext) throws -> StepOutput {
        do {
            return .captured(d.id, try d.value(typed: context.value, text: context.text, baseDirectory: context.baseDirectory))
        } catch {
            throw DeviceFailure(.invalidInput, "`set \(d.id)`: \(error.message)")
        }
    }
}
