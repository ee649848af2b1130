import BLE
import Workflow
import YAML

/// What a step executor gets for one attempt of one step: the step and its deadline, the device's
/// values and secrets, its session, the journal for irreversible actions, and the run's events. Made by
/// the device agent for each attempt and valid only while `StepExecutor.run` runs (it belongs to the
/// device's task: never hand it to another task).
public final class StepContext {
    /// The step being run, its index in the workflow and which attempt this is (from 1).
    public let step: Step
    public let index: Int
    public let attempt: Int
    /// An earlier attempt's irreversible action may have reached the device: check (`confirm`) before
    /// sending it again.
    public let confirmFirst: Bool
    /// Only read the step's `confirm` (a resumed device whose irreversible action an earlier run may have
    /// sent, `StepSupervisor` reconciling): nothing is sent; `confirmed(tookEffect:)` says what it showed.
    public let confirmOnly: Bool
    /// When the attempt started, and when it must be over (`step.effectiveTimeout` after the start).
    public let started: ContinuousClock.Instant
    public let deadline: ContinuousClock.Instant
    unowned let agent: DeviceAgent

    init(step: Step, index: Int, attempt: Int, confirmFirst: Bool, confirmOnly: Bool = false, agent: DeviceAgent) {
        self.step = step
        self.index = index
        self.attempt = attempt
        self.confirmFirst = confirmFirst
        self.confirmOnly = confirmOnly
        self.agent = agent
        started = .now
        deadline = started + step.effectiveTimeout
    }

    // MARK: The step and the device

    /// The step's timeout (the whole attempt's budget).
    public var timeout: Duration { step.effectiveTimeout }
    /// What is left of the attempt's budget (zero once the deadline passed).
    public var remaining: Duration { max(.zero, deadline - .now) }
    /// The device, as the inventory lists it.
    public var device: InventoryDevice { agent.device }
    /// Every step of the workflow (for a step that looks ahead, like a read fetching the next ones with it).
    public var steps: [Step] { agent.run.workflow.steps }
    /// The directory file values (`file:`) resolve in.
    public var baseDirectory: String { agent.run.inventory.baseDirectory }

    // MARK: Values and secrets

    /// A name's typed value: a capture, a declared variable, else the inventory's text.
    public func value(_ name: String) -> TypedValue? { agent.machine.values.typed(name) }

    /// A name's text as templates show it (`${name}`).
    public func text(_ name: String) -> String? { agent.machine.values.text(name) }

    /// A template rendered with the device's values.
    public func render(_ template: Template) throws -> String { try template.render(text) }

    /// The bytes a value spec makes for this device. Bytes made from a secret are learned as secret,
    /// so that no message shows them in any form.
    public func bytes(_ spec: ValueSpec) throws -> [UInt8] {
        let data = try spec.bytes(variables: text, baseDirectory: baseDirectory)
        let secrets = agent.machine.plan.secretNames
        if !secrets.isEmpty, spec.templates.contains(where: { $0.referencedNames.contains(where: secrets.contains) }) {
            agent.note(.learned(secretBytes: data))
        }
        return data
    }

    /// A matcher resolved with the device's values.
    public func matcher(_ spec: MatcherSpec) throws -> Matcher {
        try spec.resolve(variables: text, baseDirectory: baseDirectory)
    }

    /// Names whose values are secret.
    public var secretNames: Set<String> { agent.machine.plan.secretNames }

    /// The text with this device's secrets hidden.
    public func redact(_ text: String) -> String { agent.machine.values.redactor.redact(text) }

    /// The device's redactor as it is now (for checks such as "does this text show a secret").
    public var redactor: Redactor { agent.machine.values.redactor }

    /// A measurement for the report (`devices[].measurements`), replacing an earlier attempt's.
    public func measured(_ m: MeasurementRecord) { agent.note(.measured(m)) }

    // MARK: The link

    /// The device's session; a step that needs one before any `connect` fails with `invalid_input`.
    public func session() throws -> Session {
        guard let s = agent.link.session else {
            throw DeviceFailure(.invalidInput, "step `\(step.name)` needs a connection (add a connect step before it)")
        }
        return s
    }

    /// After the device reset itself (a firmware update's reboot): waits until the session is ready
    /// again — its own reconnect (the connect step's policy) restores the link and the subscriptions —
    /// or connects it again when that policy gave up. Within the session's connect timeout.
    public func reconnect() async throws {
        try await session().connect()
    }

    // MARK: Irreversible actions

    /// Records the intent of this step's irreversible action and returns when it is durable; only then
    /// may the action go out. From then on it counts as having reached the device until the device
    /// shows otherwise (`refused()`, `confirmed(tookEffect: false)`). Throws (and nothing may be sent)
    /// when the intent cannot be recorded.
    public func recordIntent() async throws {
        do {
            try await agent.run.journal.intent(device: device.id, step: step.name, stepIndex: index)
        } catch {
            // Named by its store (`r.journal`, or `line … run …`): on a line it is the line that failed.
            throw DeviceFailure(.interrupted, "not sent: the intent of the irreversible step `\(step.name)` could not be recorded in \(agent.run.journal.store.location)",
                                causes: ["\(error)"])
        }
        agent.note(.irreversible(.sent))
    }

    /// For a step that checks its irreversible actions on the device (a `dfu`: `Step.checksItsIrreversibleActions`):
    /// records the intent of one of them, named (`test`, `reset`, `confirm`), and returns when it is
    /// durable. The step reads the device's state before and after each, so the attempt is never in
    /// doubt; a resumed run hands the actions journaled so far back to the step (`journaledActions`).
    public func recordIntent(action: String) async throws {
        try await intentRecorder(action)
    }

    /// `recordIntent(action:)` as a `@Sendable` closure, for a step family whose driver takes one (it
    /// runs in this attempt's task all the same).
    public var intentRecorder: @Sendable (String) async throws -> Void {
        let journal = agent.run.journal, device = self.device.id, name = step.name, index = self.index
        return { action in
            do {
                try await journal.intent(device: device, step: name, stepIndex: index, action: action)
            } catch {
                throw DeviceFailure(.interrupted, "not sent: the journal could not record the intent to \(action) (step `\(name)`)",
                                    causes: ["\(error)"])
            }
        }
    }

    /// The actions of this step whose intents an earlier run journaled, with no final outcome after them.
    public var journaledActions: Set<String> { agent.run.journaledActions[device.id]?[index] ?? [] }

    /// `progress(bytes:of:)` as a `@Sendable` closure (for a transfer driven by a family's own engine).
    public var progressSink: @Sendable (Int, Int?) -> Void {
        let events = agent.run.events, device = self.device.id, name = step.name, attempt = self.attempt, started = self.started
        return { bytes, total in
            let elapsed = ContinuousClock.now - started
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let rate = seconds > 0 ? Double(bytes) / 1024 / seconds : 0
            events.emit(.stepProgress(RunEvent.StepProgress(device: device, step: name, attempt: attempt, bytes: bytes,
                                                            bytesTotal: total, kibPerSecond: (rate * 10).rounded() / 10)))
        }
    }

    /// The device showed that the last irreversible action sent was not executed (an error response,
    /// a busy answer).
    public func refused() { agent.note(.irreversible(.refused)) }

    /// A check of the device (`confirm`): whether the irreversible action took effect.
    public func confirmed(tookEffect: Bool) { agent.note(.irreversible(.confirmed(tookEffect: tookEffect))) }

    // MARK: Progress and state

    /// A long transfer's progress (a `step_progress` event: bytes so far, the rate since the attempt began).
    public func progress(bytes: Int, of total: Int? = nil) {
        progressSink(bytes, total)
    }

    /// What a step family keeps for this device across its steps (made by `make` on first use, kept
    /// until the device is done), one instance per type.
    public func deviceState<T: AnyObject>(_ type: T.Type, make: () -> T) -> T {
        agent.state(type, make: make)
    }
}
