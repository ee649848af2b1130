import Testing
import Workflow
@testable import Engine

/// The devices a journal leaves in doubt, and an operator's resolution as the journal records it.
@Suite struct JournalReviewTests {
    static let header = ResumePlanTests.header()
    static func t(_ ms: Int64) -> WallTime { WallTime(millisecondsSince1970: ms) }

    static func review(_ id: String) -> DeviceRecord {
        DeviceRecord(id: id, address: nil, name: nil, outcome: .failed, attempts: 1,
                     steps: [StepRecord(name: "begin", kind: "await", outcome: .succeeded, attempts: 1, startMs: 0, durationMs: 1),
                             StepRecord(name: "commit", kind: "await", outcome: .failed, attempts: 1, startMs: 1, durationMs: 1)],
                     error: FailureRecord(kind: .needsReview, step: "commit", message: "the commit was sent and its outcome is unknown"))
    }

    @Test func intentsWithoutOutcomesAndNeedsReviewOutcomesAreListedOthersAreNot() {
        let lines: [JournalLine] = [
            Self.header,
            .started(device: "A", attempt: 1, at: Self.t(1)), .intent(device: "A", step: "commit", stepIndex: 3, at: Self.t(2)),
            .outcome(DeviceRecord(id: "A", address: nil, name: nil, outcome: .interrupted, attempts: 1), at: Self.t(3)),
            .started(device: "B", attempt: 1, at: Self.t(1)), .intent(device: "B", step: "commit", stepIndex: 3, at: Self.t(2)),
            .outcome(DeviceRecord(id: "B", address: nil, name: nil, outcome: .succeeded, attempts: 1), at: Self.t(3)),
            .started(device: "C", attempt: 1, at: Self.t(1)), .outcome(Self.review("C"), at: Self.t(4)),
            .started(device: "D", attempt: 1, at: Self.t(1)),
        ]
        let units = JournalReview(lines: lines).units
        #expect(units.map(\.device) == ["A", "C"])
        #expect(units[0].step == "commit" && units[0].intentAt == Self.t(2) && units[0].record?.outcome == .interrupted)
        #expect(units[0].evidence.hasPrefix("the intent to send `commit` (1970-01-01T00:00:00.002Z) has no final outcome"), "\(units[0].evidence)")
        #expect(units[1].intentStep == nil && units[1].step == "commit")
        #expect(units[1].evidence == "last outcome failed (needs_review): the commit was sent and its outcome is unknown; last step that succeeded: `begin`; started 1 time")
    }

    @Test func aResolutionKeepsTheEvidenceAndSaysWhoWhenAndWhy() throws {
        let unit = try #require(JournalReview(lines: [Self.header, .outcome(Self.review("C"), at: Self.t(0))]).units.first)
        let good = JournalReview.resolution(of: unit, as: .succeeded, note: "state reads 02", by: "ana", at: Self.t(9))
        #expect(good.outcome == .succeeded && good.error == nil && good.steps == Self.review("C").steps)
        #expect(good.review == ReviewRecord(at: Self.t(9), by: "ana", note: "state reads 02", resolution: .succeeded, previous: Self.review("C").error))
        let bad = JournalReview.resolution(of: unit, as: .failed, note: "state reads 01", by: "ana", at: Self.t(9))
        #expect(bad.error?.kind == .verifyFailed && bad.error?.message == "marked failed on review by ana: state reads 01")
        // Resolved, it is no longer in doubt; a failed one runs again with --retry-failed.
        let lines: [JournalLine] = [Self.header, .started(device: "D", attempt: 1, at: Self.t(0)), .outcome(Self.review("D"), at: Self.t(0)),
                                    .outcome(JournalReview.resolution(of: unit, as: .failed, note: "01", by: "ana", at: Self.t(0)).withID("D"), at: Self.t(0))]
        #expect(JournalReview(lines: lines).units.isEmpty)
        let plan = try ResumePlanTests.plan(lines, ResumePlanTests.inputs(["D"], retryFailed: true))
        #expect(ResumePlanTests.decision(plan, "D") == .run(attempt: 2, resumed: true))
        let kept = try ResumePlanTests.plan(lines, ResumePlanTests.inputs(["D"]))
        guard case .carryOver(let r)? = ResumePlanTests.decision(kept, "D") else {
            Issue.record("a resolved device was not carried over")
            return
        }
        #expect(r.review?.note == "01")
    }
}

/// The line's failure thresholds, one finished device at a time.
@Suite struct FailureWatchTests {
    @Test func theThresholdCountsFixtureFailuresOnlyAndSaysWhichKinds() {
        var w = FailureWatch(threshold: .count(2))
        #expect(w.record(outcome: .failed, kind: .verifyFailed) == nil)
        #expect(w.record(outcome: .failed, kind: .pairingFailed) == nil)
        #expect(w.record(outcome: .failed, kind: .timeout) == nil)
        #expect(w.record(outcome: .skipped, kind: nil) == nil)
        #expect(w.record(outcome: .failed, kind: .notFound)
                == "line stopped: 2 of 4 finished devices failed in ways that point to the fixture (threshold 2 failure(s)): not_found 1, timeout 1, product rejects 2; 2 product rejects (verify and other device answers) not counted; a fixture or adapter problem is suspected")
        var p = FailureWatch(threshold: .percent(50, minimumSample: 4))
        for kind in [FailureKind.adapterFailure, .connectFailed] { #expect(p.record(outcome: .failed, kind: kind) == nil) }
        #expect(p.record(outcome: .succeeded, kind: nil) == nil, "below the sample")
        #expect(p.record(outcome: .succeeded, kind: nil)?.hasPrefix("line stopped: 2 of 4 finished devices") == true)
    }

    @Test func failuresInARowOfAnyKindStopTheLineASuccessStartsAgain() {
        var w = FailureWatch(maxConsecutive: 2)
        #expect(w.record(outcome: .failed, kind: .verifyFailed) == nil)
        #expect(w.record(outcome: .succeeded, kind: nil) == nil)
        #expect(w.record(outcome: .failed, kind: .verifyFailed) == nil)
        #expect(w.record(outcome: .interrupted, kind: .interrupted) == nil, "a cut device neither breaks nor extends the run")
        #expect(w.record(outcome: .failed, kind: .disconnected)
                == "line stopped: 2 devices failed in a row (--max-consecutive-failures 2); disconnected 1, product rejects 2")
    }
}

extension DeviceRecord {
    fileprivate func withID(_ id: String) -> DeviceRecord {
        var r = self
        r.id = id
        return r
    }
}
