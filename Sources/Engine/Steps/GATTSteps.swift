import BLE
import Workflow

/// The GATT family: `read`, `write`, `write_blob`, through the device's session.
struct GATTSteps: StepExecutor {
    func run(_ step: Step, in context: StepContext) async throws -> StepOutput {
        switch step.kind {
        case .read(let r):
            let s = try context.session()
            let bytes = try await readValue(r, context, on: s)
            let value: TypedValue
            do {
                value = try r.format.decode(bytes)
            } catch {
                throw DeviceFailure(.protocolError, "the value read cannot be decoded as \(r.format): \(error.message)")
            }
            return r.id.map { .captured($0, value) } ?? .none
        case .write(let w):
            try await Self.write(w, irreversible: step.irreversible, context, on: try context.session())
        case .writeBlob(let w):
            let s = try context.session()
            let data = try context.bytes(w.value)
            let timeout = context.timeout
            if let chunk = w.chunkSize, chunk > 0, chunk < data.count {
                var offset = 0
                let deadline = ContinuousClock.now + timeout
                while offset < data.count {
                    let end = min(data.count, offset + chunk)
                    try await s.writeBlob(service: w.target.service, characteristic: w.target.characteristic,
                                          data: Array(data[offset..<end]), timeout: max(.zero, deadline - .now))
                    offset = end
                }
            } else {
                try await s.writeBlob(service: w.target.service, characteristic: w.target.characteristic, data: data, timeout: timeout)
            }
        default:
            throw DeviceFailure(.invalidInput, "`\(step.kind.keyword)` is not a GATT step")
        }
        return .none
    }

    /// Values of read steps fetched together with the read step before them, by step index.
    final class ReadAhead {
        var values: [Int: Result<[UInt8], BLEError>] = [:]
    }

    /// A read step's value. A read step directly followed by more read steps fetches theirs with it, in
    /// one request where the device answers Read Multiple Variable Length; each of those steps still runs,
    /// takes its own value (or error) and is recorded as itself. A retried step reads again.
    private func readValue(_ r: Step.Read, _ context: StepContext, on s: Session) async throws -> [UInt8] {
        let ahead = context.deviceState(ReadAhead.self) { ReadAhead() }
        if let ready = ahead.values.removeValue(forKey: context.index) { return try ready.get() }
        let steps = context.steps
        var batch: [(index: Int, target: CharacteristicRef)] = [(context.index, r.target)]
        for i in steps.indices.dropFirst(context.index + 1) {
            guard case .read(let next) = steps[i].kind else { break }
            batch.append((i, next.target))
        }
        guard batch.count > 1 else {
            return try await s.read(service: r.target.service, characteristic: r.target.characteristic, timeout: context.timeout)
        }
        let results = try await s.read(batch.map(\.target), timeout: context.timeout)
        ahead.values = [:]
        for (b, result) in zip(batch, results).dropFirst() { ahead.values[b.index] = result }
        guard let first = results.first else { throw DeviceFailure(.protocolError, "no value came back for `\(context.step.name)`") }
        return try first.get()
    }

    /// A write (a `write` step, or an `await`'s trigger). An irreversible one goes out only after its
    /// intent is durable; an answer that shows it was not executed says so.
    static func write(_ w: Step.Write, irreversible: Bool, _ context: StepContext, on s: Session) async throws {
        let data = try context.bytes(w.value)
        if irreversible { try await context.recordIntent() }
        do {
            try await s.write(service: w.target.service, characteristic: w.target.characteristic, value: data,
                              withResponse: w.withResponse, timeout: context.timeout)
        } catch let e as BLEError {
            switch e {
            case .att, .attributeNotFound, .unsupportedProperty:
                // Refused by the device (an Error Response) or never sent (no such characteristic, or it
                // does not allow the write): it did not take effect.
                if irreversible { context.refused() }
            default:
                break
            }
            throw e
        }
    }
}
