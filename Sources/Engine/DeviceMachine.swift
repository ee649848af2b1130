import BLE
import Support
import Workflow

/// One device's run as a value: which step runs next and how often (`StepSupervisor`), what is known
/// of the device (`DeviceValues`), where its link is (`LinkLease`), and whether an irreversible action
/// of the current attempt may have reached it (`Delivery`). It has no clock, no radio and no task:
/// `DeviceAgent` tells it what happened (`handle(_:)`, with times as offsets from the device's start)
/// and carries out the actions it answers, in order. Tested event by event in `DeviceMachineTests`.
///
/// The order of a device's life:
/// 1. `begin` → `run` the first step (a step whose `when:` is false or unknown is recorded skipped
///    here, without running).
/// 2. While a step runs, the executor's facts come in as events (`irreversible`, `learned`,
///    `measured`, `link`); they change the machine and answer only immediate actions (`emit`,
///    `releaseSlot`, `markAdapterFailed`, `followSlots`), never another step.
/// 3. `stepEnded` → the supervisor's answer: the next step, a retry (`emit` the retry, maybe
///    `lookElsewhere`, then `wait`; `timerFired` or `stop` ends the wait), a restart at `connect`
///    (`closeLink` first), or the end.
/// 4. At the end the machine asks to `closeLink`; the `closed` link event that answers it brings
///    `finish(record)`, the device's record with every secret hidden.
struct DeviceMachine: Sendable {
    /// What every device of a run shares: the workflow's steps and what the machine needs of them.
    struct Plan: Sendable {
        let steps: [Step]
        let stepInfos: [StepSupervisor.StepInfo]
        /// Names whose values are secret (the inventory's, the workflow's and their captures).
        let secretNames: Set<String>
        let variables: [String: VariableDeclaration]
        /// The workflow asks for link security somewhere (then every record carries `security`).
        let securityAsked: Bool
        /// Adapters in the run (a retry looks elsewhere only when there are several).
        let adapterCount: Int
        let seed: UInt64
        /// Someone listens to the run's events (a display, `--events`): without, none is made.
        let emits: Bool

        init(workflow: Workflow, secretNames: Set<String>, adapterCount: Int, seed: UInt64, emits: Bool = true) {
            steps = workflow.steps
            stepInfos = workflow.steps.enumerated().map { StepSupervisor.StepInfo($1, index: $0) }
            self.secretNames = secretNames
            variables = workflow.variables
            securityAsked = workflow.steps.contains { $0.security.map { $0.level != .none } ?? false }
            self.adapterCount = adapterCount
            self.seed = seed
            self.emits = emits
        }
    }

    /// How one step attempt ended.
    enum StepEnd: Sendable, Equatable {
        case succeeded(captures: [Capture])
        case failed(DeviceFailure)
        /// The device was cut (its task cancelled) while the step ran; `cause`: what the step saw.
        case cut(cause: String)
    }

    /// A value a step captured, by name.
    struct Capture: Sendable, Equatable {
        var name: String
        var value: TypedValue
    }

    enum Event: Sendable, Equatable {
        /// The device starts (its wall-clock start for the record).
        case begin(at: Duration, wall: WallTime)
        /// The step the machine asked to run ended.
        case stepEnded(StepEnd, at: Duration)
        /// The running step's irreversible action: sent after its durable intent, refused, confirmed.
        case irreversible(Delivery.Event)
        /// The running step sent bytes made from a secret: they are secret in every message too.
        case learned(secretBytes: [UInt8])
        /// The running step (a `verify`) made a measurement.
        case measured(MeasurementRecord)
        /// Something happened to the device's link (a scan heard it, a slot was taken, a connect failed...).
        case link(LinkLease.Event)
        /// The device's link closed: what securing it reached, and its ATT round trips.
        case linkClosed(security: SecurityOutcome?, roundTrips: Int, link: LinkRecord? = nil, at: Duration)
        /// A session failed to come up after securing something (counted in the record's security).
        case secured(SecurityOutcome)
        /// The wait before a retry is over; `sessionLost`: the session's own reconnect gave up.
        case timerFired(sessionLost: Bool, at: Duration)
        /// The wait before a retry was cut (the run is stopping).
        case stop(at: Duration)
        /// This station lost its claim on the device (a line lease): it is being cut, and its record says why.
        case claimLost(reason: String)
    }

    enum Action: Sendable, Equatable {
        /// Run one attempt of step `step`. `confirmFirst`: an earlier attempt's irreversible write may
        /// have reached the device (check with `confirm` before sending again).
        case run(step: Int, attempt: Int, confirmFirst: Bool)
        /// Only read step `step`'s `confirm` (a resumed device in doubt, `StepSupervisor` reconciling);
        /// report `irreversible(.confirmed)`, then `stepEnded`.
        case confirm(step: Int, attempt: Int)
        /// Tell the world (the progress display, `--events`).
        case emit(RunEvent.Kind)
        /// Wait `delay`, then report `timerFired` (or `stop` when cut).
        case wait(Duration)
        /// Before the retry: look for the device on another adapter than those to `avoid` (report
        /// `link(.heardElsewhere)` if it is heard).
        case lookElsewhere(address: BluetoothAddress, avoid: Set<String>)
        /// Close the device's link (subscriptions, held link, session); report `linkClosed`.
        case closeLink
        case releaseSlot(adapter: String)
        case followSlots(adapter: String)
        case markAdapterFailed(adapter: String, why: String)
        /// The device is done: its record.
        case finish(DeviceRecord)
    }

    let plan: Plan
    let attemptNumber: Int
    let resumed: Bool
    private(set) var supervisor: StepSupervisor
    private(set) var values: DeviceValues
    private(set) var lease = LinkLease()
    private(set) var delivery = Delivery.none
    private var security: SecurityOutcome?
    /// What the device's last link got from the radio (for the report).
    private var linkRecord: LinkRecord?
    private var roundTrips = 0
    private var cutReason: String?
    private var wall = WallTime(millisecondsSince1970: 0)
    /// When the supervisor finished (the end of the steps' timeline), once it has.
    private var endedAt: Duration?
    /// The running step only reads `confirm` (reconciling); what the read showed, once it has.
    private var confirming = false
    private var confirmation: Bool?
    private var device: InventoryDevice { values.device }

    /// `reconcile`: the irreversible step an earlier run announced for this device without learning its
    /// outcome, which declares `confirm` (the device is asked before anything is sent).
    init(plan: Plan, device: InventoryDevice, redactor: Redactor, attemptNumber: Int, resumed: Bool, reconcile: Int? = nil) {
        self.plan = plan
        self.attemptNumber = attemptNumber
        self.resumed = resumed
        supervisor = StepSupervisor(steps: plan.stepInfos, seed: plan.seed ^ StableHash.fnv1a(device.id), reconcile: reconcile)
        values = DeviceValues(device: device, variables: plan.variables, redactor: redactor, secretNames: plan.secretNames)
    }

    mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .begin(let at, let wall):
            self.wall = wall
            return drive(supervisor.handle(.begin(at: at)), at: at)
        case .stepEnded(let end, let at):
            let sent = delivery.mayHaveReached
            delivery = .none
            if confirming {
                confirming = false
                if case .succeeded = end {
                    guard let tookEffect = confirmation else {
                        let f = DeviceFailure(.protocolError, "the `confirm` read did not answer")
                        return drive(supervisor.handle(.failed(f, sent: false, at: at)), at: at)
                    }
                    return drive(supervisor.handle(.confirmed(tookEffect: tookEffect, at: at)), at: at)
                }
            }
            switch end {
            case .succeeded(let captures):
                for c in captures { values.capture(c.name, c.value) }
                return drive(supervisor.handle(.succeeded(at: at)), at: at)
            case .failed(let f):
                return drive(supervisor.handle(.failed(values.redacted(f), sent: sent, at: at)), at: at)
            case .cut(let cause):
                let f = DeviceFailure(.interrupted, "cut while stopping", causes: [cause])
                return drive(supervisor.handle(.failed(values.redacted(f), sent: sent, at: at)), at: at)
            }
        case .irreversible(let e):
            if confirming, case .confirmed(let tookEffect) = e { confirmation = tookEffect }
            delivery.handle(e)
            return []
        case .learned(let bytes):
            values.learnSecret(bytes: bytes)
            return []
        case .measured(let m):
            values.record(m)
            return []
        case .link(let e):
            var out: [Action] = []
            for action in lease.handle(e) {
                switch action {
                case .releaseSlot(let a): out.append(.releaseSlot(adapter: a))
                case .followSlots(let a): out.append(.followSlots(adapter: a))
                case .adapterFailed(let a, let why):
                    out.append(.markAdapterFailed(adapter: a, why: why))
                    if plan.emits { out.append(.emit(.adapterFailed(device: device.id, adapter: a, message: why))) }
                }
            }
            return out
        case .secured(let outcome):
            security = security.map { $0.followed(by: outcome) } ?? outcome
            return []
        case .linkClosed(let outcome, let trips, let got, let at):
            if let got { linkRecord = got }
            if let outcome { security = security.map { $0.followed(by: outcome) } ?? outcome }
            roundTrips += trips
            var out = lease.handle(.closed).compactMap { action -> Action? in
                guard case .releaseSlot(let a) = action else { return nil }
                return .releaseSlot(adapter: a)
            }
            if let end = endedAt { out.append(.finish(record(end: end, duration: at))) }
            return out
        case .timerFired(let lost, let at):
            return drive(supervisor.handle(.backoffEnded(sessionLost: lost, at: at)), at: at)
        case .stop(let at):
            return drive(supervisor.handle(.backoffCancelled(at: at)), at: at)
        case .claimLost(let reason):
            cutReason = reason
            return []
        }
    }

    /// The supervisor's actions as the machine's: conditions evaluated, events described, retries
    /// prepared, the end turned into closing the link.
    private mutating func drive(_ first: [StepSupervisor.Action], at: Duration) -> [Action] {
        var out: [Action] = []
        var queue = first
        var next = 0
        while next < queue.count {
            let action = queue[next]
            next += 1
            switch action {
            case .execute(let i, let attempt, let confirmFirst):
                if let condition = plan.steps[i].condition, let skip = values.skipReason(condition) {
                    switch skip {
                    case .success(let reason):
                        queue += supervisor.handle(.skippedByCondition(reason: reason, at: at))
                    case .failure(let f):
                        queue += supervisor.handle(.failed(values.redacted(f), sent: false, at: at))
                    }
                    continue
                }
                delivery = .none
                out.append(.run(step: i, attempt: attempt, confirmFirst: confirmFirst))
            case .confirm(let i, let attempt):
                delivery = .none
                confirming = true
                confirmation = nil
                out.append(.confirm(step: i, attempt: attempt))
            case .stepFinished(let i, let outcome, let attempt, let duration, let f):
                guard plan.emits else { continue }
                let name = plan.steps[i].name
                out.append(.emit(.stepFinished(RunEvent.StepFinished(device: device.id, step: name, attempt: attempt, outcome: outcome,
                                                                     durationMs: duration.milliseconds,
                                                                     error: f.map { Self.record($0, step: name) }))))
            case .retry(let i, let attempt, let delay, let f):
                let name = plan.steps[i].name
                if plan.emits {
                    out.append(.emit(.stepRetry(RunEvent.StepRetry(device: device.id, step: name, attempt: attempt, delayMs: delay.milliseconds,
                                                                   error: Self.record(f, step: name)))))
                }
                if let look = lease.lookElsewhere(after: f, isConnect: plan.stepInfos[i].isConnect, adapterCount: plan.adapterCount) {
                    out.append(.lookElsewhere(address: look.address, avoid: look.avoid))
                }
                out.append(.wait(delay))
            case .closeSession:
                out.append(.closeLink)
            case .finish:
                endedAt = at
                out.append(.closeLink)
            }
        }
        return out
    }

    private static func record(_ f: DeviceFailure, step: String?) -> FailureRecord {
        FailureRecord(kind: f.kind, step: step, message: f.message, causes: f.causes)
    }

    /// The device's record: `end` closes the steps' timeline (a step never reached starts there),
    /// `duration` is the device's whole time, the link's closing included.
    private func record(end: Duration, duration: Duration) -> DeviceRecord {
        var steps: [StepRecord] = []
        steps.reserveCapacity(plan.steps.count)
        for (i, step) in plan.steps.enumerated() {
            let p = supervisor.progress[i]
            steps.append(StepRecord(name: step.name, kind: StepKind(step.kind), outcome: p.outcome, attempts: p.attempts,
                                    startMs: (p.firstStart ?? end).milliseconds.rounded(toPlaces: 3),
                                    durationMs: p.spent.milliseconds.rounded(toPlaces: 3),
                                    error: p.outcome == .failed ? p.failure.map { Self.record($0, step: step.name) } : nil,
                                    skipReason: p.outcome == .skippedByCondition ? p.skipReason : nil,
                                    optional: step.onFailure == .optional ? true : nil,
                                    continueOnError: step.onFailure == .continueOnError ? true : nil))
        }
        var failure = supervisor.failure
        // Cut on its own (a lost lease on a line), not by a stop: say why.
        if let f = failure, f.kind == .interrupted, let why = cutReason {
            failure = DeviceFailure(.interrupted, why, causes: [f.message] + f.causes)
        }
        let heard = lease.heard
        return DeviceRecord(
            id: device.id, address: (heard?.address ?? device.address)?.description, name: device.name ?? heard?.name,
            outcome: supervisor.outcome, attempts: attemptNumber, adapter: lease.adapter, rssi: heard?.rssi, started: wall,
            durationMs: duration.milliseconds.rounded(toPlaces: 3), captured: values.capturedForReport(), measurements: values.measurements,
            steps: steps, error: failure.map { Self.record($0, step: supervisor.failedStep.map { plan.steps[$0].name }) },
            resumed: resumed ? true : nil, attRoundTrips: roundTrips, security: securityRecord(), link: linkRecord)
    }

    /// The report's view of the device's security: what its links reached, how, and with which bond;
    /// nil when the workflow never asks for security and nothing was secured.
    private func securityRecord() -> SecurityRecord? {
        guard plan.securityAsked || security != nil else { return nil }
        let o = security ?? .none
        return SecurityRecord(level: o.security.level, method: o.method, bond: o.bond,
                              keySize: o.security.level == .none ? nil : o.security.keySize,
                              secureConnections: o.security.level == .none ? nil : o.security.secureConnections,
                              bondLost: o.bondWasLost ? true : nil)
    }
}
