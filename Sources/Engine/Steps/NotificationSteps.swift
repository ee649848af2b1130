import BLE
import Workflow

/// The notification family: `subscribe`, `unsubscribe`, and `await` (a value on a subscription,
/// optionally after writing its trigger, with resends, busy and failure answers, and `confirm`).
struct NotificationSteps: StepExecutor {
    func run(_ step: Step, in context: StepContext) async throws -> StepOutput {
        let link = context.agent.link
        switch step.kind {
        case .subscribe(let sub):
            let s = try context.session()
            if let old = link.subscriptions.removeValue(forKey: sub.id) { await old.close() }
            let stream = try await s.notifications(service: sub.target.service, characteristic: sub.target.characteristic,
                                                   indicate: sub.mode == .indicate, timeout: context.timeout)
            link.subscriptions[sub.id] = Mailbox(stream: stream)
        case .unsubscribe(let u):
            if let m = link.subscriptions.removeValue(forKey: u.id) { await m.close() }
        case .await(let a):
            return try await awaitValue(a, step: step, context)
        default:
            throw DeviceFailure(.invalidInput, "`\(step.kind.keyword)` is not a notification step")
        }
        return .none
    }

    private func awaitValue(_ a: Step.Await, step: Step, _ context: StepContext) async throws -> StepOutput {
        if context.confirmOnly {
            // A resumed device in doubt: ask it, send nothing.
            guard a.confirm != nil else { throw DeviceFailure(.invalidInput, "step `\(step.name)` has no `confirm` read") }
            _ = try await confirmed(a, context)
            return .none
        }
        guard let mailbox = context.agent.link.subscriptions[a.subscription] else {
            throw DeviceFailure(.invalidInput, "no active subscription `\(a.subscription)` (it must be subscribed first)")
        }
        let timeout = context.timeout
        let matcher = try context.matcher(a.matcher)
        let busy = try a.busy.map(context.matcher)
        let failsOn = try a.failsOn.map(context.matcher)
        // An earlier attempt's trigger may have taken effect: look before sending it again.
        if context.confirmFirst, a.confirm != nil, try await confirmed(a, context) { return .none }
        let waits = 1 + (a.trigger == nil ? 0 : a.resend.count)
        for i in 0..<waits {
            if i > 0 { try await Task.sleep(for: a.resend[i - 1]) }
            if let trigger = a.trigger {
                let s = try context.session()
                // Listen first: values already buffered belong to earlier commands.
                mailbox.discardBuffered()
                try await GATTSteps.write(trigger, irreversible: step.irreversible, context, on: s)
            }
            switch try await mailbox.next(matching: matcher, busy: busy, failsOn: failsOn, timeout: timeout) {
            case .matched(let value):
                guard let c = a.capture else { return .none }
                do {
                    return .captured(c.id, try c.value(of: value))
                } catch {
                    throw DeviceFailure(.protocolError, "the value that matched (\(value.hexString)) cannot be captured as \(c.format): \(error.message)")
                }
            case .busy(let value):
                // A busy device did not execute the command (unless an earlier send of this attempt did).
                context.refused()
                throw DeviceFailure(.busy, "device answered busy (\(value.hexString))")
            case .failed(let value):
                context.refused()
                throw DeviceFailure(.verifyFailed, "device answered \(value.hexString), which `fails_on` rejects")
            case .timedOut(let lastSeen):
                // The answer may be lost while the command took effect: ask the device.
                if a.confirm != nil, a.trigger != nil, try await confirmed(a, context) { return .none }
                if i == waits - 1 {
                    let seen = lastSeen.map { "; last value seen: \($0.hexString)" } ?? "; nothing arrived"
                    throw DeviceFailure(.timeout, "no value on `\(a.subscription)` that \(matcher) within \(timeout)"
                                        + (waits > 1 ? " (sent \(waits) times)" : "") + seen
                                        + (a.confirm != nil ? "; `confirm` shows it did not take effect" : ""))
                }
            }
        }
        return .none
    }

    /// Reads the `confirm` characteristic: true when the trigger took effect. False clears the doubt
    /// about an irreversible write (the device shows it did not happen).
    private func confirmed(_ a: Step.Await, _ context: StepContext) async throws -> Bool {
        guard let c = a.confirm else { return false }
        let s = try context.session()
        let expected = try context.matcher(c.matcher)
        let value = try await s.read(service: c.target.service, characteristic: c.target.characteristic, timeout: context.timeout)
        let done = try expected.matches(value)
        context.confirmed(tookEffect: done)
        return done
    }
}
