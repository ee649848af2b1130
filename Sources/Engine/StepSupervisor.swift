import Support
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
///
/// When a step has given up (out of attempts, a class its policy does not retry, a blocked restart),
/// its `OnFailure` decides:
/// - `stop` (the default): the device fails with the step's failure; later steps are `skipped`.
/// - `optional`: the step is recorded `failed` and the device goes on with the next step; the failure
///   does not fail the device (a device whose only failures are optional steps succeeds).
/// - `continueOnError`: the step is recorded `failed` and the device goes on; when the last step is done
///   the device fails with the first such failure (the others are its causes). A later step that stops
///   the device fails it with its own failure, the earlier continued ones added as causes.
/// Two failures always stop the device whatever the step says: `interrupted` (the run is stopping) and
/// an irreversible write in doubt (`needs_review`); validation refuses `optional` and
/// `continue_on_error` on irreversible steps.
///
/// A step whose `when:` is false or unknown is reported by the agent as `skippedByCondition`: it is
/// recorded `skipped_by_condition` (no attempt) and the next step runs.
///
/// Reconciling (a resume of a device whose irreversible step `r`, declaring `confirm`, was announced by
/// an earlier run that never learned its outcome): the device is asked before anything is sent again.
/// - Steps before `r` that send to the device (`write`, `write_blob`, `await`) are not run (recorded
///   `skipped`): on a device the earlier run already committed, repeating the set-up could undo it.
///   The others (scan, connect, pair, discover, read, verify, subscribe, set, sleep) run as usual.
/// - At `r` the agent only reads `confirm` (`confirm`, answered by `confirmed`): took effect → `r`
///   succeeded (nothing sent) and the steps after it run; did not → the doubt is cleared and the device
///   runs the skipped steps and `r` as a first run would (its intent is journaled again before it goes
///   out).
/// - While the doubt stands, a device that fails (the confirm read cannot be made, the device is not
///   found...) fails `needs_review`: the earlier write may be on the device. Cut while stopping, it stays
///   `interrupted` (the earlier intent still has no final outcome, so the next resume asks again).
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
        /// What the step's final failure does to the device (`optional`, `continue_on_error`).
        var onFailure: Step.OnFailure
        /// The step sends something to the device's application (`write`, `write_blob`, `await`): not
        /// run before a reconciling device's confirm read.
        var sends: Bool

        init(name: String, retry: RetryPolicy, retryFrom: Int? = nil, isConnect: Bool = false, irreversible: Bool = false,
             idempotent: Bool = false, confirms: Bool = false, onFailure: Step.OnFailure = .stop, sends: Bool = false) {
            self.name = name
            self.retry = retry
            self.retryFrom = retryFrom
            self.isConnect = isConnect
            self.irreversible = irreversible
            self.idempotent = idempotent
            self.confirms = confirms
            self.onFailure = onFailure
            self.sends = sends
        }

        init(_ step: Step, index: Int) {
            var isConnect = false
            if case .connect = step.kind { isConnect = true }
            var confirms = false
            var sends = false
            switch step.kind {
            case .await(let a):
                confirms = a.confirm != nil
                sends = true
            case .write, .writeBlob:
                sends = true
            default:
                break
            }
            self.init(name: step.name, retry: step.effectiveRetry, retryFrom: step.retryFromIndex, isConnect: isConnect,
                      irreversible: step.irreversible, idempotent: step.idempotent, confirms: confirms, onFailure: step.onFailure,
                      sends: sends)
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
        /// The current step was not run: its `when:` is false or unknown (`reason` says which).
        case skippedByCondition(reason: String, at: Duration)
        /// The backoff before a retry is over; `sessionLost`: the session's reconnect gave up.
        case backoffEnded(sessionLost: Bool, at: Duration)
        /// The backoff was cut (the run is stopping).
        case backoffCancelled(at: Duration)
        /// The `confirm` read of a reconciling device's step: whether its trigger took effect.
        case confirmed(tookEffect: Bool, at: Duration)
    }

    /// What to do.
    enum Action: Sendable, Equatable {
        /// Run step `step` (its `attempt`-th time). `confirmFirst`: its irreversible write may already
        /// have reached the device: check (`confirm`) before sending again.
        case execute(step: Int, attempt: Int, confirmFirst: Bool)
        /// Read step `step`'s `confirm` only (a reconciling device); report `confirmed` (or `failed`).
        case confirm(step: Int, attempt: Int)
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
        /// Why the step was skipped by its condition.
        var skipReason: String?
        /// Its irreversible write may have reached the device (and was not confirmed since).
        var inDoubt = false
    }

    let steps: [StepInfo]
    private(set) var progress: [Progress]
    private(set) var current = 0
    private var attemptStart: Duration = .zero
    /// The step a pending retry belongs to.
    private var retrying: Int?
    /// The irreversible step an earlier run may have sent, while its `confirm` read has not answered.
    private(set) var reconciling: Int?
    /// What the confirm read of a reconciling device found (nil: not reconciling, or not read yet).
    private(set) var reconciled: Bool?
    private(set) var failure: DeviceFailure?
    /// The step whose failure is the device's (nil when it succeeded).
    private(set) var failedStep: Int?
    private(set) var done = false
    private var random: SplitMix64

    /// `reconcile`: the irreversible step an earlier run announced without learning its outcome (it
    /// must declare `confirm`): the device is asked before anything is sent again.
    init(steps: [StepInfo], seed: UInt64, reconcile: Int? = nil) {
        self.steps = steps
        progress = Array(repeating: Progress(), count: steps.count)
        random = SplitMix64(seed: seed)
        if let r = reconcile, steps.indices.contains(r), steps[r].confirms {
            reconciling = r
            progress[r].inDoubt = true
        }
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
            progress[i].skipReason = nil
            let finished = Action.stepFinished(step: i, outcome: .succeeded, attempt: progress[i].attempts, duration: progress[i].spent, failure: nil)
            return [finished] + start(i + 1, at: at)
        case .skippedByCondition(let reason, let at):
            guard current < steps.count else { return [] }
            let i = current
            progress[i].spent += at - attemptStart
            progress[i].attempts -= 1
            progress[i].outcome = .skippedByCondition
            progress[i].skipReason = reason
            progress[i].failure = nil
            let finished = Action.stepFinished(step: i, outcome: .skippedByCondition, attempt: progress[i].attempts,
                                               duration: progress[i].spent, failure: nil)
            return [finished] + start(i + 1, at: at)
        case .failed(let f, let sent, let at):
            guard current < steps.count else { return [] }
            return failed(f, sent: sent, at: at)
        case .backoffEnded(let sessionLost, let at):
            guard let i = retrying else { return [] }
            retrying = nil
            return restart(after: i, sessionLost: sessionLost, at: at)
        case .confirmed(let tookEffect, let at):
            guard let r = reconciling, current == r else { return [] }
            return confirmed(r, tookEffect: tookEffect, at: at)
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
            // The device reached the end: it fails for its first failed `continue_on_error` step.
            let continued = continuedFailures(before: steps.count)
            guard let first = continued.first, let f = progress[first].failure else { return [.finish(nil)] }
            failedStep = first
            failure = DeviceFailure(f.kind, f.message, causes: f.causes + continued.dropFirst().map(alsoFailed))
            return [.finish(failure)]
        }
        if let r = reconciling, i < r, steps[i].sends {
            progress[i].outcome = .skipped
            return [.stepFinished(step: i, outcome: .skipped, attempt: progress[i].attempts, duration: progress[i].spent, failure: nil)]
                + start(i + 1, at: at)
        }
        current = i
        attemptStart = at
        if progress[i].firstStart == nil { progress[i].firstStart = at }
        progress[i].attempts += 1
        if let r = reconciling, i == r { return [.confirm(step: i, attempt: progress[i].attempts)] }
        return [.execute(step: i, attempt: progress[i].attempts, confirmFirst: progress[i].inDoubt)]
    }

    /// The reconciling device's confirm read answered: the step took effect (it succeeded, nothing was
    /// sent) or it did not (the doubt is gone: run what was skipped, then the step, as a first run).
    private mutating func confirmed(_ r: Int, tookEffect: Bool, at: Duration) -> [Action] {
        progress[r].spent += at - attemptStart
        progress[r].inDoubt = false
        reconciling = nil
        reconciled = tookEffect
        if tookEffect {
            progress[r].outcome = .succeeded
            progress[r].failure = nil
            return [.stepFinished(step: r, outcome: .succeeded, attempt: progress[r].attempts, duration: progress[r].spent, failure: nil)]
                + start(r + 1, at: at)
        }
        // The confirm read is not a send: the step's attempts count what goes out from here.
        progress[r].attempts -= 1
        let first = (0..<r).first { steps[$0].sends && progress[$0].outcome == .skipped } ?? r
        return start(first, at: at)
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
        guard retryable else { return giveUp(i, f, at: at) }
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
                return giveUp(i, DeviceFailure(f.kind, f.message,
                                               causes: f.causes + ["not restarted at `\(steps[from].name)`: that would repeat the irreversible step `\(steps[blocker].name)`"]),
                              at: at)
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

    /// The step has given up: its `OnFailure` decides whether the device stops or goes on.
    private mutating func giveUp(_ i: Int, _ f: DeviceFailure, at: Duration) -> [Action] {
        guard steps[i].onFailure != .stop else { return fail(i, f) }
        progress[i].outcome = .failed
        progress[i].failure = f
        progress[i].inDoubt = false
        let finished = Action.stepFinished(step: i, outcome: .failed, attempt: progress[i].attempts, duration: progress[i].spent, failure: f)
        return [finished] + start(i + 1, at: at)
    }

    /// The device stops at step `i` with `f` (earlier `continue_on_error` failures become its causes).
    /// While a reconciling device's doubt stands, it needs review (unless it is being cut).
    private mutating func fail(_ i: Int, _ cause: DeviceFailure) -> [Action] {
        var f = cause
        if let r = reconciling, f.kind != .interrupted, f.kind != .needsReview {
            f = DeviceFailure(.needsReview,
                              "an earlier run sent the irreversible step `\(steps[r].name)` without learning its outcome, and its `confirm` read could not be made (\(f.message)): check the device",
                              causes: f.causes)
        }
        progress[i].outcome = .failed
        progress[i].failure = f
        failure = DeviceFailure(f.kind, f.message, causes: f.causes + continuedFailures(before: i).map(alsoFailed))
        failedStep = i
        done = true
        return [.stepFinished(step: i, outcome: .failed, attempt: progress[i].attempts, duration: progress[i].spent, failure: f),
                .finish(failure)]
    }

    /// The `continue_on_error` steps before `end` that failed, in order.
    private func continuedFailures(before end: Int) -> [Int] {
        (0..<end).filter { steps[$0].onFailure == .continueOnError && progress[$0].outcome == .failed }
    }

    private func alsoFailed(_ i: Int) -> String {
        "step `\(steps[i].name)` also failed (continue_on_error): \(progress[i].failure?.description ?? "failed")"
    }

    /// How the device ended, from its failure (nil: succeeded).
    var outcome: DeviceOutcome {
        guard let failure else { return done ? .succeeded : .interrupted }
        return failure.kind == .interrupted ? .interrupted : .failed
    }
}
