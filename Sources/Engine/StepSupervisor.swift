import Workflow

/// The supervisor of one device's workflow: which step runs next, whether a failure is retried, where
/// the retry restarts (`retry_from`, or the `connect` step when the session gave up), and when an
/// irreversible step must not be sent again. A value with no clock and no radio: `DeviceAgent` tells it
/// what happened (`handle(_:)`), with times as offsets from the device's start, and does what it
/// answers.
///
/// Rules, on a step failure:
/// - Cancellation (`interrupted`) fails the device as interrupted; classes the step's `retry.on` does not name fail the device;
///   so does a step out of attempts (`retry.attempts`, counted across restarts).
/// - An irreversible step whose write may have reached the device (it was sent, and no answer said it
///   was not executed) is "in doubt". Unless it is `idempotent`, it is never sent again blindly: with
///   `confirm` it is retried and the agent checks the device before sending; without, the device
///   fails as `needs_review`.
/// - A retry waits the policy's backoff, then restarts at `retry_from` (else the failed step). If the
///   session's own reconnect gave up, it restarts at the last `connect` before the step (subscriptions
///   are made again). A restart never goes back over an irreversible step that went out or is in
///   doubt: a blocked `connect` restart retries the failed step itself; a blocked `retry_from` fails
///   the device (validation refuses such workflows).
struct StepSupervisor: Sendable {
    /// What the supervisor needs to know of a step.
    struct StepInfo: Sendable, Equatable {
        var name: String
        var retry: RetryPolicy
        var retryFrom: Int?
        var isConnect: Bool
        var irreversible: Bool
        var idempotent: Bool
        /// The step can check on the device whether its write took effect (`confirm`).
        var confirms: Bool

        init(name: String, retry: RetryPolicy, retryFrom: Int? = nil, isConnect: Bool = false, irreversible: Bool = false,
             idempotent: Bool = false, confirms: Bool = false) {
            self.name = name
            self.retry = retry
            self.retryFrom = retryFrom
            self.isConnect = isConnect
            self.irreversible = irreversible
            self.idempotent = idempotent
            self.confirms = confirms
        }

        init(_ step: Step, index: Int) {
            var isConnect = false
            if case .connect = step.kind { isConnect = true }
            var confirms = false
            if case .await(let a) = step.kind { confirms = a.confirm != nil }
            self.init(name: step.name, retry: step.effectiveRetry, retryFrom: step.retryFromIndex, isConnect: isConnect,
                      irreversible: step.irreversible, idempotent: step.idempotent, confirms: confirms)
        }

    }

    /// What happened.
    enum Event: Sendable, Equatable {
        /// The device starts.
        case begin(at: Duration)
        /// The current step succeeded.
        case succeeded(at: Duration)
        /// The current step failed. `sent`: an irreversible write of this attempt may have reached the
        /// device (it went out and no answer said it was not executed).
        case failed(DeviceFailure, sent: Bool, at: Duration)
        /// The backoff before a retry is over; `sessionLost`: the session's reconnect gave up.
        case backoffEnded(sessionLost: Bool, at: Duration)
        /// The backoff was cut (the run is stopping).
        case backoffCancelled(at: Duration)
    }

    /// What to do.
    enum Action: Sendable, Equatable {
        /// Run step `step` (its `attempt`-th time). `confirmFirst`: its irreversible write may already
        /// have reached the device: check (`confirm`) before sending again.
        case execute(step: Int, attempt: Int, confirmFirst: Bool)
        /// Tell the world the step ended (the `step_finished` event).
        case stepFinished(step: Int, outcome: StepOutcome, attempt: Int, duration: Duration, failure: DeviceFailure?)
        /// Tell the world a retry is coming; before it, prefer another adapter if the step is a
        /// connect; then wait `delay` and report `backoffEnded` (or `backoffCancelled`).
        case retry(step: Int, attempt: Int, delay: Duration, failure: DeviceFailure)
        /// Close the session: the retry restarts at a connect step.
        case closeSession
        /// The device is done.
        case finish(DeviceFailure?)
    }

    /// One step's record so far.
    struct Progress: Sendable, Equatable {
        var attempts = 0
        var firstStart: Duration?
        var spent: Duration = .zero
        var outcome: StepOutcome = .skipped
        var failure: DeviceFailure?
        /// Its irreversible write may have reached the device (and was not confirmed since).
        var inDoubt = false
    }

    let steps: [StepInfo]
    private(set) var progress: [Progress]
    private(set) var current = 0
    private var attemptStart: Duration = .zero
    /// The step a pending retry belongs to.
    private var retrying: Int?
    private(set) var failure: DeviceFailure?
    private(set) var done = false
    private var random: SplitMix64

    init(steps: [StepInfo], seed: UInt64) {
        self.steps = steps
        progress = Array(repeating: Progress(), count: steps.count)
        random = SplitMix64(seed: seed)
    }

    mutating func handle(_ event: Event) -> [Action] {
        guard !done else { return [] }
        switch event {
        case .begin(let at):
            return start(0, at: at)
        case .succeeded(let at):
            guard current < steps.count else { return [] }
            let i = current
            progress[i].spent += at - attemptStart
            progress[i].outcome = .succeeded
            progress[i].inDoubt = false
            progress[i].failure = nil
            let finished = Action.stepFinished(step: i, outcome: .succeeded, attempt: progress[i].attempts, duration: progress[i].spent, failure: nil)
            return [finished] + start(i + 1, at: at)
        case .failed(let f, let sent, let at):
            guard current < steps.count else { return [] }
            return failed(f, sent: sent, at: at)
        case .backoffEnded(let sessionLost, let at):
            guard let i = retrying else { return [] }
            retrying = nil
            return restart(after: i, sessionLost: sessionLost, at: at)
        case .backoffCancelled:
            guard let i = retrying else { return [] }
            retrying = nil
            let cause = progress[i].failure.map { [$0.description] } ?? []
            return fail(i, DeviceFailure(.interrupted, "cut while stopping", causes: cause))
        }
    }

    private mutating func start(_ i: Int, at: Duration) -> [Action] {
        guard i < steps.count else {
            done = true
            current = steps.count
            return [.finish(nil)]
        }
        current = i
        attemptStart = at
        if progress[i].firstStart == nil { progress[i].firstStart = at }
        progress[i].attempts += 1
        return [.execute(step: i, attempt: progress[i].attempts, confirmFirst: progress[i].inDoubt)]
    }

    private mutating func failed(_ f: DeviceFailure, sent: Bool, at: Duration) -> [Action] {
        let i = current
        let step = steps[i]
        progress[i].spent += at - attemptStart
        if sent && step.irreversible { progress[i].inDoubt = true }
        // Cut while stopping: the device is interrupted (a write in doubt stays in doubt in the journal,
        // where its intent has no final outcome, and a resume makes it `needs_review`).
        if f.kind == .interrupted { return fail(i, f) }
        let attempts = progress[i].attempts
        let retryable = f.kind.errorClass.map { step.retry.shouldRetry($0, afterAttempt: attempts) } ?? false
        if progress[i].inDoubt && !step.idempotent && !(retryable && step.confirms) {
            return fail(i, DeviceFailure(.needsReview,
                                         "the irreversible step `\(step.name)` was sent and its outcome is unknown (\(f.message)); it is not sent again because it is not `idempotent`: check the device",
                                         causes: f.causes))
        }
        guard retryable else { return fail(i, f) }
        progress[i].failure = f
        retrying = i
        let delay = step.retry.delay(beforeAttempt: attempts + 1, random: &random)
        return [.retry(step: i, attempt: attempts, delay: delay, failure: f)]
    }

    private mutating func restart(after i: Int, sessionLost: Bool, at: Duration) -> [Action] {
        var target = i
        if let from = steps[i].retryFrom {
            if let blocker = (from...i).first(where: { wentOut($0) }) {
                let f = progress[i].failure ?? DeviceFailure(.protocolError, "step failed")
                return fail(i, DeviceFailure(f.kind, f.message,
                                             causes: f.causes + ["not restarted at `\(steps[from].name)`: that would repeat the irreversible step `\(steps[blocker].name)`"]))
            }
            target = from
        }
        var actions: [Action] = []
        if sessionLost, let c = steps[..<i].lastIndex(where: \.isConnect), !(c...i).contains(where: { wentOut($0) }) {
            actions.append(.closeSession)
            target = min(target, c)
        }
        return actions + start(target, at: at)
    }

    /// An irreversible step that went out (or may have): a restart must not run it, or the steps that
    /// prepare it, again — even an idempotent one (re-running the set-up before it could change a
    /// device it already committed).
    private func wentOut(_ i: Int) -> Bool {
        steps[i].irreversible && (progress[i].outcome == .succeeded || progress[i].inDoubt)
    }

    private mutating func fail(_ i: Int, _ f: DeviceFailure) -> [Action] {
        progress[i].outcome = .failed
        progress[i].failure = f
        failure = f
        done = true
        return [.stepFinished(step: i, outcome: .failed, attempt: progress[i].attempts, duration: progress[i].spent, failure: f),
                .finish(f)]
    }

    /// How the device ended, from its failure (nil: succeeded).
    var outcome: DeviceOutcome {
        guard let failure else { return done ? .succeeded : .interrupted }
        return failure.kind == .interrupted ? .interrupted : .failed
    }

    /// The index of the failed step, if any.
    var failedStep: Int? { progress.firstIndex { $0.outcome == .failed } }
}

/// A small, fast PRNG (SplitMix64) for jitter, seeded per device so runs are reproducible.
struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E3779B97F4A7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58476D1CE4E5B9
        z = (z ^ (z >> 27)) &* 0x94D049BB133111EB
        return z ^ (z >> 31)
    }
}
