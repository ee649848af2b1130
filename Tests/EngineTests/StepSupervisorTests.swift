import Testing
import Workflow
@testable import Engine

/// The supervisor's retry, `retry_from`, reconnect and irreversible-write decisions, driven event by
/// event: no radio, no clock.
@Suite struct StepSupervisorTests {
    typealias Info = StepSupervisor.StepInfo

    static let transient = RetryPolicy(attempts: 3, backoff: .list([.seconds(1), .seconds(2)]), on: [.timeout, .disconnected, .busy])
    static let timeout = DeviceFailure(.timeout, "no ack")
    static let dropped = DeviceFailure(.disconnected, "link lost")

    /// scan, connect, subscribe, begin, stream (retry_from begin), commit (irreversible), read.
    static func line(commit: Info = Info(name: "commit", retry: transient, irreversible: true)) -> [Info] {
        [
            Info(name: "scan", retry: .none),
            Info(name: "connect", retry: transient, isConnect: true),
            Info(name: "subscribe", retry: transient),
            Info(name: "begin", retry: transient),
            Info(name: "stream", retry: transient, retryFrom: 3),
            commit,
            Info(name: "read", retry: transient),
        ]
    }

    /// Succeeds steps until `index` is the one to execute next; returns the actions of the last event.
    static func advance(_ s: inout StepSupervisor, to index: Int) -> [StepSupervisor.Action] {
        var actions = s.handle(.begin(at: .zero))
        while case .execute(let i, _, _)? = actions.last, i < index {
            actions = s.handle(.succeeded(at: .milliseconds(10)))
        }
        return actions
    }

    @Test func aCleanRunExecutesEveryStepOnceAndFinishes() {
        var s = StepSupervisor(steps: Self.line(), seed: 1)
        var executed: [Int] = []
        var actions = s.handle(.begin(at: .zero))
        var t = 0
        while let last = actions.last {
            if case .execute(let i, let attempt, let confirm) = last {
                #expect(attempt == 1 && !confirm)
                executed.append(i)
                t += 5
                actions = s.handle(.succeeded(at: .milliseconds(t)))
            } else {
                #expect(last == .finish(nil))
                break
            }
        }
        #expect(executed == Array(0..<7))
        #expect(s.outcome == .succeeded)
        #expect(s.progress.allSatisfy { $0.outcome == .succeeded && $0.attempts == 1 && $0.spent == .milliseconds(5) })
        #expect(s.progress[3].firstStart == .milliseconds(15))
    }

    @Test func aTransientFailureIsRetriedAfterThePolicysBackoff() {
        var s = StepSupervisor(steps: Self.line(), seed: 1)
        _ = Self.advance(&s, to: 2)
        #expect(s.handle(.failed(Self.timeout, sent: false, at: .seconds(1))) == [.retry(step: 2, attempt: 1, delay: .seconds(1), failure: Self.timeout)])
        #expect(s.handle(.backoffEnded(sessionLost: false, at: .seconds(2))) == [.execute(step: 2, attempt: 2, confirmFirst: false)])
        #expect(s.handle(.failed(Self.timeout, sent: false, at: .seconds(3))) == [.retry(step: 2, attempt: 2, delay: .seconds(2), failure: Self.timeout)])
        #expect(s.handle(.backoffEnded(sessionLost: false, at: .seconds(5))) == [.execute(step: 2, attempt: 3, confirmFirst: false)])
        // Out of attempts: the device fails with the step's failure.
        let actions = s.handle(.failed(Self.timeout, sent: false, at: .seconds(6)))
        #expect(actions.last == .finish(Self.timeout))
        #expect(actions.first == .stepFinished(step: 2, outcome: .failed, attempt: 3, duration: .milliseconds(2990), failure: Self.timeout))
        #expect(s.outcome == .failed && s.failedStep == 2)
        #expect(s.progress[3].outcome == .skipped && s.progress[3].attempts == 0)
    }

    @Test func aPermanentFailureFailsTheDeviceAtOnce() {
        var s = StepSupervisor(steps: Self.line(), seed: 1)
        _ = Self.advance(&s, to: 6)
        let mismatch = DeviceFailure(.verifyFailed, "state is 01")
        #expect(s.handle(.failed(mismatch, sent: false, at: .seconds(1))).last == .finish(mismatch))
        #expect(s.handle(.succeeded(at: .seconds(2))).isEmpty, "nothing happens after the end")
    }

    @Test func retryFromRestartsEarlierAndCountsTheRetryingStepsAttempts() {
        var s = StepSupervisor(steps: Self.line(), seed: 1)
        _ = Self.advance(&s, to: 4)
        #expect(s.handle(.failed(Self.dropped, sent: false, at: .seconds(1))).count == 1)
        #expect(s.handle(.backoffEnded(sessionLost: false, at: .seconds(2))) == [.execute(step: 3, attempt: 2, confirmFirst: false)])
        #expect(s.handle(.succeeded(at: .seconds(3))).last == .execute(step: 4, attempt: 2, confirmFirst: false))
        _ = s.handle(.failed(Self.dropped, sent: false, at: .seconds(4)))
        #expect(s.handle(.backoffEnded(sessionLost: false, at: .seconds(5))).last == .execute(step: 3, attempt: 3, confirmFirst: false))
        #expect(s.handle(.succeeded(at: .seconds(6))).last == .execute(step: 4, attempt: 3, confirmFirst: false))
        // The third failure of `stream` ends it (its own attempts), however often `begin` ran.
        #expect(s.handle(.failed(Self.dropped, sent: false, at: .seconds(7))).last == .finish(Self.dropped))
    }

    @Test func aLostSessionRestartsAtTheConnectStep() {
        var s = StepSupervisor(steps: Self.line(), seed: 1)
        _ = Self.advance(&s, to: 3)
        _ = s.handle(.failed(Self.dropped, sent: false, at: .seconds(1)))
        #expect(s.handle(.backoffEnded(sessionLost: true, at: .seconds(2))) == [.closeSession, .execute(step: 1, attempt: 2, confirmFirst: false)])
    }

    @Test func aLostSessionNeverRestartsOverACommitThatWentOut() {
        var s = StepSupervisor(steps: Self.line(), seed: 1)
        _ = Self.advance(&s, to: 6)
        _ = s.handle(.failed(Self.dropped, sent: false, at: .seconds(1)))
        // The commit succeeded: reconnecting would repeat set-up before it. The read is retried alone.
        #expect(s.handle(.backoffEnded(sessionLost: true, at: .seconds(2))) == [.execute(step: 6, attempt: 2, confirmFirst: false)])
    }

    @Test func anIrreversibleWriteInDoubtIsNeverResentUnlessConfirmedOrIdempotent() {
        // Not idempotent, no confirm: its ack was lost after it went out: needs review, at once.
        var plain = StepSupervisor(steps: Self.line(), seed: 1)
        _ = Self.advance(&plain, to: 5)
        let actions = plain.handle(.failed(Self.timeout, sent: true, at: .seconds(1)))
        guard case .finish(let f?)? = actions.last else {
            Issue.record("a commit in doubt was retried: \(actions)")
            return
        }
        #expect(f.kind == .needsReview)
        #expect(f.message.contains("`commit` was sent and its outcome is unknown"))
        #expect(plain.outcome == .failed)

        // With confirm: retried, and the agent checks the device before sending again.
        var confirmed = StepSupervisor(steps: Self.line(commit: Info(name: "commit", retry: Self.transient, irreversible: true, confirms: true)), seed: 1)
        _ = Self.advance(&confirmed, to: 5)
        #expect(confirmed.handle(.failed(Self.dropped, sent: true, at: .seconds(1))).count == 1)
        #expect(confirmed.handle(.backoffEnded(sessionLost: false, at: .seconds(2))) == [.execute(step: 5, attempt: 2, confirmFirst: true)])
        // A session lost meanwhile: no restart over the commit in doubt.
        _ = confirmed.handle(.failed(Self.dropped, sent: true, at: .seconds(3)))
        #expect(confirmed.handle(.backoffEnded(sessionLost: true, at: .seconds(4))) == [.execute(step: 5, attempt: 3, confirmFirst: true)])
        // Out of attempts while in doubt: needs review, not a plain timeout.
        guard case .finish(let last?)? = confirmed.handle(.failed(Self.timeout, sent: true, at: .seconds(5))).last else {
            Issue.record("no end")
            return
        }
        #expect(last.kind == .needsReview)

        // Idempotent: re-sending is harmless, so it is retried (checking first costs nothing).
        var idempotent = StepSupervisor(steps: Self.line(commit: Info(name: "commit", retry: Self.transient, irreversible: true, idempotent: true)), seed: 1)
        _ = Self.advance(&idempotent, to: 5)
        #expect(idempotent.handle(.failed(Self.timeout, sent: true, at: .seconds(1))).count == 1)
        #expect(idempotent.handle(.backoffEnded(sessionLost: false, at: .seconds(2))) == [.execute(step: 5, attempt: 2, confirmFirst: true)])
        #expect(idempotent.handle(.failed(Self.timeout, sent: true, at: .seconds(3))).count == 1)
        #expect(idempotent.handle(.backoffEnded(sessionLost: false, at: .seconds(4))).count == 1)
        // Out of attempts: an idempotent step fails as what happened.
        #expect(idempotent.handle(.failed(Self.timeout, sent: true, at: .seconds(5))).last == .finish(Self.timeout))
    }

    @Test func aWriteTheDeviceRefusedIsNotInDoubt() {
        // A busy answer means "not executed": a plain retry, nothing to confirm.
        var s = StepSupervisor(steps: Self.line(), seed: 1)
        _ = Self.advance(&s, to: 5)
        let busy = DeviceFailure(.busy, "02 02")
        #expect(s.handle(.failed(busy, sent: false, at: .seconds(1))) == [.retry(step: 5, attempt: 1, delay: .seconds(1), failure: busy)])
        #expect(s.handle(.backoffEnded(sessionLost: false, at: .seconds(2))) == [.execute(step: 5, attempt: 2, confirmFirst: false)])
        #expect(s.handle(.succeeded(at: .seconds(3))).last == .execute(step: 6, attempt: 1, confirmFirst: false))
    }

    @Test func retryFromOverACommitInDoubtFailsTheDevice() {
        // (Validation refuses such a workflow; the supervisor holds the line anyway.)
        let steps = Self.line() + [Info(name: "after", retry: Self.transient, retryFrom: 3)]
        var s = StepSupervisor(steps: steps, seed: 1)
        _ = Self.advance(&s, to: 7)
        _ = s.handle(.failed(Self.timeout, sent: false, at: .seconds(1)))
        guard case .finish(let f?)? = s.handle(.backoffEnded(sessionLost: false, at: .seconds(2))).last else {
            Issue.record("restarted over the commit")
            return
        }
        #expect(f.causes.last == "not restarted at `begin`: that would repeat the irreversible step `commit`")
    }

    @Test func cuttingTheBackoffOrTheStepInterruptsTheDevice() {
        var s = StepSupervisor(steps: Self.line(), seed: 1)
        _ = Self.advance(&s, to: 2)
        _ = s.handle(.failed(Self.timeout, sent: false, at: .seconds(1)))
        guard case .finish(let f?)? = s.handle(.backoffCancelled(at: .seconds(2))).last else {
            Issue.record("no end")
            return
        }
        #expect(f.kind == .interrupted && f.causes == [Self.timeout.description])
        #expect(s.outcome == .interrupted)
        // Cut while its commit is in doubt: interrupted (the journal's intent makes it `needs_review` on resume).
        var c = StepSupervisor(steps: Self.line(), seed: 1)
        _ = Self.advance(&c, to: 5)
        let cut = DeviceFailure(.interrupted, "cut while stopping")
        #expect(c.handle(.failed(cut, sent: true, at: .seconds(1))).last == .finish(cut))
        #expect(c.outcome == .interrupted)
    }

    @Test func jitterIsDrawnFromTheDevicesSeed() {
        let jittery = RetryPolicy(attempts: 5, backoff: .exponential(initial: .seconds(1), factor: 2, max: .seconds(30), jitter: 0.5), on: [.timeout])
        func delays(seed: UInt64) -> [Duration] {
            var s = StepSupervisor(steps: [Info(name: "x", retry: jittery)], seed: seed)
            _ = s.handle(.begin(at: .zero))
            var out: [Duration] = []
            for n in 0..<4 {
                if case .retry(_, _, let d, _)? = s.handle(.failed(Self.timeout, sent: false, at: .seconds(n))).first { out.append(d) }
                _ = s.handle(.backoffEnded(sessionLost: false, at: .seconds(n)))
            }
            return out
        }
        #expect(delays(seed: 7) == delays(seed: 7))
        #expect(delays(seed: 7) != delays(seed: 8))
        #expect(delays(seed: 7).count == 4)
    }
}

/// A resumed device whose irreversible step an earlier run announced without learning its outcome,
/// the step declaring `confirm`: the device is asked before anything is sent, event by event.
@Suite struct StepSupervisorReconcileTests {
    typealias Info = StepSupervisor.StepInfo

    static let transient = StepSupervisorTests.transient
    /// scan, connect, subscribe, begin (sends), stream (sends), commit (irreversible, idempotent, confirm), read.
    static let steps: [Info] = [
        Info(name: "scan", retry: .none),
        Info(name: "connect", retry: transient, isConnect: true),
        Info(name: "subscribe", retry: transient),
        Info(name: "begin", retry: transient, sends: true),
        Info(name: "stream", retry: transient, retryFrom: 3, sends: true),
        Info(name: "commit", retry: transient, irreversible: true, idempotent: true, confirms: true, sends: true),
        Info(name: "read", retry: transient),
    ]
    static let ms = Duration.milliseconds

    /// Begins and succeeds scan, connect and subscribe; returns what the last success answered.
    static func toTheConfirmRead(_ s: inout StepSupervisor) -> [StepSupervisor.Action] {
        #expect(s.handle(.begin(at: .zero)) == [.execute(step: 0, attempt: 1, confirmFirst: false)])
        _ = s.handle(.succeeded(at: ms(1)))
        _ = s.handle(.succeeded(at: ms(2)))
        return s.handle(.succeeded(at: ms(3)))
    }

    @Test func theSetUpIsNotSentAgainAndACommitThatTookEffectEndsTheDeviceWithoutSendingIt() {
        var s = StepSupervisor(steps: Self.steps, seed: 1, reconcile: 5)
        #expect(s.reconciling == 5)
        #expect(Self.toTheConfirmRead(&s) == [
            .stepFinished(step: 2, outcome: .succeeded, attempt: 1, duration: Self.ms(1), failure: nil),
            .stepFinished(step: 3, outcome: .skipped, attempt: 0, duration: .zero, failure: nil),
            .stepFinished(step: 4, outcome: .skipped, attempt: 0, duration: .zero, failure: nil),
            .confirm(step: 5, attempt: 1),
        ])
        #expect(s.handle(.confirmed(tookEffect: true, at: Self.ms(7))) == [
            .stepFinished(step: 5, outcome: .succeeded, attempt: 1, duration: Self.ms(4), failure: nil),
            .execute(step: 6, attempt: 1, confirmFirst: false),
        ])
        #expect(s.reconciling == nil && s.reconciled == true)
        #expect(s.handle(.succeeded(at: Self.ms(8))).last == .finish(nil))
        #expect(s.outcome == .succeeded)
        #expect(s.progress.map(\.outcome) == [.succeeded, .succeeded, .succeeded, .skipped, .skipped, .succeeded, .succeeded])
    }

    @Test func aCommitThatDidNotTakeEffectRunsTheSkippedStepsAndTheCommitAsAFirstRun() {
        var s = StepSupervisor(steps: Self.steps, seed: 1, reconcile: 5)
        #expect(Self.toTheConfirmRead(&s).last == .confirm(step: 5, attempt: 1))
        #expect(s.handle(.confirmed(tookEffect: false, at: Self.ms(5))) == [.execute(step: 3, attempt: 1, confirmFirst: false)])
        #expect(s.reconciling == nil && s.reconciled == false)
        #expect(s.handle(.succeeded(at: Self.ms(6))).last == .execute(step: 4, attempt: 1, confirmFirst: false))
        // The commit goes out as on a first run: no doubt, its attempts count what is sent.
        #expect(s.handle(.succeeded(at: Self.ms(7))).last == .execute(step: 5, attempt: 1, confirmFirst: false))
        _ = s.handle(.succeeded(at: Self.ms(8)))
        #expect(s.handle(.succeeded(at: Self.ms(9))).last == .finish(nil))
        #expect(s.progress.allSatisfy { $0.outcome == .succeeded && $0.attempts == 1 })
    }

    @Test func aConfirmReadThatFailsIsRetriedAsARead() {
        var s = StepSupervisor(steps: Self.steps, seed: 1, reconcile: 5)
        _ = Self.toTheConfirmRead(&s)
        let timeout = DeviceFailure(.timeout, "no answer to the read")
        #expect(s.handle(.failed(timeout, sent: false, at: .seconds(1))) == [.retry(step: 5, attempt: 1, delay: .seconds(1), failure: timeout)])
        #expect(s.handle(.backoffEnded(sessionLost: false, at: .seconds(2))) == [.confirm(step: 5, attempt: 2)])
        #expect(s.handle(.confirmed(tookEffect: true, at: .seconds(3))).last == .execute(step: 6, attempt: 1, confirmFirst: false))
    }

    @Test func aDeviceThatFailsBeforeItsConfirmReadNeedsReviewAndOneCutStaysInterrupted() {
        var s = StepSupervisor(steps: Self.steps, seed: 1, reconcile: 5)
        _ = s.handle(.begin(at: .zero))
        let notFound = DeviceFailure(.notFound, "not heard within 15 s")
        let actions = s.handle(.failed(notFound, sent: false, at: .seconds(15)))
        guard case .finish(let f?)? = actions.last else {
            Issue.record("the device did not finish: \(actions)")
            return
        }
        #expect(f.kind == .needsReview)
        #expect(f.message.contains("`commit`") && f.message.contains("not heard within 15 s"), "\(f.message)")
        #expect(s.outcome == .failed)

        var cut = StepSupervisor(steps: Self.steps, seed: 1, reconcile: 5)
        _ = Self.toTheConfirmRead(&cut)
        let interrupted = DeviceFailure(.interrupted, "cut while stopping")
        #expect(cut.handle(.failed(interrupted, sent: false, at: .seconds(1))).last == .finish(interrupted))
        #expect(cut.outcome == .interrupted)
    }

    @Test func aStepWithoutConfirmIsNeverReconciled() {
        var steps = Self.steps
        steps[5].confirms = false
        var s = StepSupervisor(steps: steps, seed: 1, reconcile: 5)
        #expect(s.reconciling == nil)
        #expect(Self.toTheConfirmRead(&s).last == .execute(step: 3, attempt: 1, confirmFirst: false))
    }
}

/// `optional`, `continue_on_error` and `when:`: what a step's final failure or a false condition does
/// to the device, event by event.
@Suite struct StepSupervisorFailurePolicyTests {
    typealias Info = StepSupervisor.StepInfo

    static let once = RetryPolicy.none
    static let twice = RetryPolicy(attempts: 2, backoff: .list([.seconds(1)]), on: [.timeout])
    static let timeout = DeviceFailure(.timeout, "no answer")
    static let mismatch = DeviceFailure(.verifyFailed, "battery 19 % is below min 20 %")

    /// connect, read a, read b, verify c, read d.
    static func audit(_ a: Step.OnFailure = .stop, _ b: Step.OnFailure = .stop, _ c: Step.OnFailure = .stop,
                      retry: RetryPolicy = once) -> [Info] {
        [
            Info(name: "connect", retry: once, isConnect: true),
            Info(name: "a", retry: retry, onFailure: a),
            Info(name: "b", retry: retry, onFailure: b),
            Info(name: "c", retry: once, onFailure: c),
            Info(name: "d", retry: once),
        ]
    }

    /// Runs the device: `fail` gives the failure of a step's attempt (nil: it succeeds), `skip` the
    /// steps skipped by their condition. Returns the steps executed, in order, and the last action.
    static func drive(_ s: inout StepSupervisor, fail: [Int: DeviceFailure] = [:], skip: Set<Int> = [],
                      sessionLost: Bool = false) -> (executed: [Int], last: StepSupervisor.Action?) {
        var executed: [Int] = []
        var actions = s.handle(.begin(at: .zero))
        var t = 0
        while let action = actions.first {
            actions.removeFirst()
            t += 10
            switch action {
            case .execute(let i, _, _):
                if skip.contains(i) {
                    actions += s.handle(.skippedByCondition(reason: "`when: x` is false", at: .milliseconds(t)))
                    continue
                }
                executed.append(i)
                if let f = fail[i] {
                    actions += s.handle(.failed(f, sent: false, at: .milliseconds(t)))
                } else {
                    actions += s.handle(.succeeded(at: .milliseconds(t)))
                }
            case .retry:
                actions += s.handle(.backoffEnded(sessionLost: sessionLost, at: .milliseconds(t)))
            case .finish:
                return (executed, action)
            case .stepFinished, .closeSession:
                continue
            case .confirm:
                Issue.record("a device that is not reconciling was asked for a confirm read")
                return (executed, action)
            }
        }
        return (executed, nil)
    }

    @Test func aFailedOptionalStepIsRecordedAndTheDeviceGoesOnAndSucceeds() {
        var s = StepSupervisor(steps: Self.audit(.optional), seed: 1)
        let (executed, last) = Self.drive(&s, fail: [1: Self.timeout])
        #expect(executed == [0, 1, 2, 3, 4])
        #expect(last == .finish(nil))
        #expect(s.outcome == .succeeded)
        #expect(s.failure == nil && s.failedStep == nil)
        #expect(s.progress[1].outcome == .failed && s.progress[1].failure == Self.timeout)
        #expect(s.progress[2].outcome == .succeeded)
    }

    @Test func anOptionalStepIsRetriedByItsPolicyBeforeItGivesUp() {
        var s = StepSupervisor(steps: Self.audit(.optional, retry: Self.twice), seed: 1)
        var actions = s.handle(.begin(at: .zero))
        actions = s.handle(.succeeded(at: .milliseconds(1)))
        #expect(actions.last == .execute(step: 1, attempt: 1, confirmFirst: false))
        #expect(s.handle(.failed(Self.timeout, sent: false, at: .milliseconds(2))) == [.retry(step: 1, attempt: 1, delay: .seconds(1), failure: Self.timeout)])
        #expect(s.handle(.backoffEnded(sessionLost: false, at: .seconds(1))) == [.execute(step: 1, attempt: 2, confirmFirst: false)])
        // Out of attempts: recorded as failed, the next step runs.
        let after = s.handle(.failed(Self.timeout, sent: false, at: .seconds(2)))
        #expect(after.first == .stepFinished(step: 1, outcome: .failed, attempt: 2, duration: .milliseconds(1001), failure: Self.timeout))
        #expect(after.last == .execute(step: 2, attempt: 1, confirmFirst: false))
        #expect(s.progress[1].attempts == 2)
    }

    @Test func continueOnErrorRunsEveryLaterStepAndFailsTheDeviceAtTheEnd() {
        var s = StepSupervisor(steps: Self.audit(.continueOnError, .stop, .continueOnError), seed: 1)
        let late = DeviceFailure(.verifyFailed, "serial differs")
        let (executed, last) = Self.drive(&s, fail: [1: Self.timeout, 3: late])
        #expect(executed == [0, 1, 2, 3, 4], "every step ran")
        // The device fails for the first continued failure; the second is a cause.
        let expected = DeviceFailure(.timeout, "no answer", causes: ["step `c` also failed (continue_on_error): serial differs"])
        #expect(last == .finish(expected))
        #expect(s.outcome == .failed && s.failure == expected && s.failedStep == 1)
        #expect(s.progress[3].outcome == .failed && s.progress[4].outcome == .succeeded)
    }

    @Test func aLaterStoppingFailureFailsTheDeviceWithTheContinuedOnesAsCauses() {
        var s = StepSupervisor(steps: Self.audit(.continueOnError), seed: 1)
        let (executed, last) = Self.drive(&s, fail: [1: Self.mismatch, 3: Self.timeout])
        #expect(executed == [0, 1, 2, 3])
        let expected = DeviceFailure(.timeout, "no answer", causes: ["step `a` also failed (continue_on_error): battery 19 % is below min 20 %"])
        #expect(last == .finish(expected))
        #expect(s.failedStep == 3)
        #expect(s.progress[3].failure == Self.timeout, "the step keeps its own failure")
        #expect(s.progress[4].outcome == .skipped)
    }

    @Test func optionalFailuresAloneNeverFailTheDeviceButContinuedOnesDo() {
        var s = StepSupervisor(steps: Self.audit(.optional, .continueOnError, .optional), seed: 1)
        let (_, last) = Self.drive(&s, fail: [1: Self.timeout, 2: Self.mismatch, 3: Self.mismatch])
        #expect(last == .finish(Self.mismatch))
        #expect(s.failedStep == 2)
    }

    @Test func anInterruptionStopsTheDeviceEvenOnAnOptionalStep() {
        var s = StepSupervisor(steps: Self.audit(.optional), seed: 1)
        let cut = DeviceFailure(.interrupted, "cut while stopping")
        let (executed, last) = Self.drive(&s, fail: [1: cut])
        #expect(executed == [0, 1])
        #expect(last == .finish(cut))
        #expect(s.outcome == .interrupted)
    }

    @Test func aStepSkippedByItsConditionIsRecordedWithoutAnAttemptAndTheNextRuns() {
        var s = StepSupervisor(steps: Self.audit(), seed: 1)
        let (executed, last) = Self.drive(&s, skip: [2])
        #expect(executed == [0, 1, 3, 4])
        #expect(last == .finish(nil))
        #expect(s.progress[2].outcome == .skippedByCondition)
        #expect(s.progress[2].attempts == 0)
        #expect(s.progress[2].skipReason == "`when: x` is false")
        #expect(s.progress[2].firstStart != nil, "it was reached")
    }

    @Test func aSkippedStepAfterAFailureIsNotReachedNotSkippedByCondition() {
        var s = StepSupervisor(steps: Self.audit(), seed: 1)
        _ = Self.drive(&s, fail: [1: Self.mismatch], skip: [2])
        #expect(s.progress[2].outcome == .skipped)
        #expect(s.progress[2].firstStart == nil)
    }

    @Test func theSkippedByConditionEventIsAnnounced() {
        var s = StepSupervisor(steps: Self.audit(), seed: 1)
        _ = s.handle(.begin(at: .zero))
        _ = s.handle(.succeeded(at: .milliseconds(10)))
        let actions = s.handle(.skippedByCondition(reason: "r", at: .milliseconds(12)))
        #expect(actions == [.stepFinished(step: 1, outcome: .skippedByCondition, attempt: 0, duration: .milliseconds(2), failure: nil),
                            .execute(step: 2, attempt: 1, confirmFirst: false)])
    }

    @Test func aRestartOverAFailedContinuedStepThatThenSucceedsClearsItsFailure() {
        // connect, a (continue_on_error), b (retried on disconnect: the restart goes back to connect).
        let steps = [
            Info(name: "connect", retry: Self.once, isConnect: true),
            Info(name: "a", retry: Self.once, onFailure: .continueOnError),
            Info(name: "b", retry: RetryPolicy(attempts: 2, backoff: .list([.seconds(1)]), on: [.disconnected])),
        ]
        var s = StepSupervisor(steps: steps, seed: 1)
        _ = s.handle(.begin(at: .zero))
        _ = s.handle(.succeeded(at: .milliseconds(1)))
        _ = s.handle(.failed(Self.timeout, sent: false, at: .milliseconds(2)))          // a fails, carries on
        _ = s.handle(.failed(DeviceFailure(.disconnected, "lost"), sent: false, at: .milliseconds(3)))
        #expect(s.handle(.backoffEnded(sessionLost: true, at: .seconds(1))) == [.closeSession, .execute(step: 0, attempt: 2, confirmFirst: false)])
        _ = s.handle(.succeeded(at: .seconds(2)))
        _ = s.handle(.succeeded(at: .seconds(3)))                                          // a succeeds this time
        #expect(s.handle(.succeeded(at: .seconds(4))) == [.stepFinished(step: 2, outcome: .succeeded, attempt: 2, duration: .milliseconds(1001), failure: nil), .finish(nil)])
        #expect(s.outcome == .succeeded)
    }
}
