import Foundation
import Testing
import Workflow
import YAML
@testable import Engine
import EngineTestSupport
import TestSupport

/// The resume decision, computed from journal lines alone, checked over every journal a device can
/// leave (all sequences of its line kinds up to a length, between run headers), every interleaving with
/// another device's lines, and a crash at every byte of a journal file.
@Suite struct ResumePlanTests {
    static let workflowRef = FileRef(name: "w", path: "w.yaml", sha256: String(repeating: "a", count: 64))
    static let inventoryRef = FileRef(path: "i.yaml", sha256: String(repeating: "b", count: 64))
    /// Step 3 (`commit`) is the irreversible one.
    static let commitIndex = 3

    static func device(_ id: String) -> InventoryDevice { InventoryDevice(id: id, mark: SourceMark(line: 1, column: 1)) }

    /// `confirmable`: the commit declares a `confirm` read.
    static func inputs(_ ids: [String] = ["D", "E"], selection: [String]? = nil, retryFailed: Bool = false,
                       confirmable: Bool = false) -> ResumePlan.Inputs {
        let all = ids.map(device)
        let selected = selection.map { s in all.filter { s.contains($0.id) } } ?? all
        return ResumePlan.Inputs(workflow: workflowRef, inventory: inventoryRef, inventoryDevices: all, selection: selected,
                                 irreversibleSteps: [commitIndex: "commit"], confirmable: confirmable ? [commitIndex] : [],
                                 retryFailed: retryFailed)
    }

    static func header(resumed: Bool = false, selected: [String]? = nil, limit: String? = nil) -> JournalLine {
        .header(JournalHeader(runId: "run-1", workflow: workflowRef, inventory: inventoryRef, adapters: ["sim"],
                              options: limit.map { ["limit": $0] } ?? [:], started: wallTime("2026-11-30T05:00:00.000Z"), toolVersion: "test", resumed: resumed,
                              selected: selected), at: wallTime("2026-11-30T05:00:00.000Z"))
    }

    /// What a device's journal line can be.
    enum Symbol: CaseIterable, CustomStringConvertible {
        case header, started, intent, succeeded, failedBefore, failedAfterCommit, interrupted, needsReview

        var description: String {
            switch self {
            case .header: return "H"
            case .started: return "S"
            case .intent: return "I"
            case .succeeded: return "Os"
            case .failedBefore: return "Of"
            case .failedAfterCommit: return "Ofc"
            case .interrupted: return "Oi"
            case .needsReview: return "Onr"
            }
        }

        var isFinalOutcome: Bool { [.succeeded, .failedBefore, .failedAfterCommit, .needsReview].contains(self) }

        func line(_ id: String) -> JournalLine {
            func steps(commitAttempts: Int) -> [StepRecord] {
                (0...ResumePlanTests.commitIndex).map {
                    StepRecord(name: $0 == ResumePlanTests.commitIndex ? "commit" : "s\($0)", kind: "await",
                               outcome: $0 == ResumePlanTests.commitIndex ? .failed : .succeeded,
                               attempts: $0 == ResumePlanTests.commitIndex ? commitAttempts : 1, startMs: 0, durationMs: 1)
                }
            }
            switch self {
            case .header: return ResumePlanTests.header(resumed: true)
            case .started: return .started(device: id, attempt: 1, at: wallTime("2026-11-30T05:00:00.000Z"))
            case .intent: return .intent(device: id, step: "commit", stepIndex: ResumePlanTests.commitIndex, at: wallTime("2026-11-30T05:00:00.000Z"))
            case .succeeded: return .outcome(DeviceRecord(id: id, address: nil, name: nil, outcome: .succeeded, attempts: 1), at: wallTime("2026-11-30T05:00:00.000Z"))
            case .failedBefore:
                var r = DeviceRecord(id: id, address: nil, name: nil, outcome: .failed, attempts: 1,
                                     error: FailureRecord(kind: .verifyFailed, step: "s1", message: "old firmware"))
                r.steps = Array(steps(commitAttempts: 0).prefix(2))
                return .outcome(r, at: wallTime("2026-11-30T05:00:00.000Z"))
            case .failedAfterCommit:
                var r = DeviceRecord(id: id, address: nil, name: nil, outcome: .failed, attempts: 1,
                                     error: FailureRecord(kind: .timeout, step: "read state", message: "no answer"))
                r.steps = steps(commitAttempts: 1)
                return .outcome(r, at: wallTime("2026-11-30T05:00:00.000Z"))
            case .interrupted:
                return .outcome(DeviceRecord(id: id, address: nil, name: nil, outcome: .interrupted, attempts: 1,
                                             error: FailureRecord(kind: .interrupted, step: "s1", message: "cut")), at: wallTime("2026-11-30T05:00:00.000Z"))
            case .needsReview:
                return .outcome(DeviceRecord(id: id, address: nil, name: nil, outcome: .failed, attempts: 1,
                                             error: FailureRecord(kind: .needsReview, step: "commit", message: "check it")), at: wallTime("2026-11-30T05:00:00.000Z"))
            }
        }
    }

    /// Every sequence of symbols of length 0...n.
    static func sequences(upTo n: Int) -> [[Symbol]] {
        var all: [[Symbol]] = [[]]
        var frontier: [[Symbol]] = [[]]
        for _ in 0..<n {
            frontier = frontier.flatMap { s in Symbol.allCases.map { s + [$0] } }
            all += frontier
        }
        return all
    }

    static func plan(_ lines: [JournalLine], _ inputs: ResumePlan.Inputs) throws -> ResumePlan {
        try ResumePlan.make(inputs, journal: JournalState(lines: lines))
    }

    static func decision(_ plan: ResumePlan, _ id: String) -> ResumePlan.Decision? {
        plan.entries.first { $0.device.id == id }?.decision
    }

    /// The properties every resume decision must have, whatever the journal.
    static func check(_ symbols: [Symbol], _ decision: ResumePlan.Decision?, retryFailed: Bool, confirmable: Bool = false) {
        let trace = symbols.map(\.description).joined(separator: " ")
        guard let decision else {
            Issue.record("no decision for [\(trace)]")
            return
        }
        let starts = symbols.filter { $0 == .started }.count
        // The irreversible write may have reached the device and no final outcome came after it.
        let lastIntent = symbols.lastIndex(of: .intent)
        let inDoubt = lastIntent.map { i in !symbols[(i + 1)...].contains { $0.isFinalOutcome } } ?? false
        let lastOutcome = symbols.last { $0.isFinalOutcome || $0 == .interrupted }
        switch decision {
        case .run(let attempt, let resumed):
            // Never run again a device that may hold the irreversible write, or whose outcome is settled.
            #expect(!inDoubt, "[\(trace)] ran a device whose commit may have gone out")
            #expect(lastOutcome != .succeeded && lastOutcome != .needsReview && lastOutcome != .failedAfterCommit,
                    "[\(trace)] ran a settled device again")
            if lastOutcome == .failedBefore { #expect(retryFailed, "[\(trace)] a failure was run again without --retry-failed") }
            #expect(attempt == starts + 1 && resumed == (starts > 0), "[\(trace)] attempt \(attempt) resumed \(resumed)")
        case .confirm(let attempt, let step):
            // Asking the device first is the rule for a doubt on a step that can be confirmed, and only then.
            #expect(inDoubt && confirmable, "[\(trace)] asked the device without a confirmable doubt")
            #expect(step == commitIndex && attempt == starts + 1, "[\(trace)] confirm step \(step) attempt \(attempt)")
        case .needsReview(let r):
            #expect(inDoubt, "[\(trace)] needs review without an intent in doubt")
            #expect(!confirmable, "[\(trace)] needs review although the device can be asked")
            #expect(r.error?.kind == .needsReview && r.error?.step == "commit" && r.outcome == .failed)
            #expect(r.carriedOver == nil, "a new needs-review outcome is this run's, not carried")
        case .carryOver(let r):
            #expect(!inDoubt, "[\(trace)] carried over a device in doubt without marking it")
            #expect(r.carriedOver == true)
            switch lastOutcome {
            case .succeeded?: #expect(r.outcome == .succeeded)
            case .needsReview?, .failedAfterCommit?: #expect(r.outcome == .failed)
                if retryFailed || lastOutcome == .needsReview { #expect(r.error?.kind == .needsReview, "[\(trace)]") }
            case .failedBefore?: #expect(!retryFailed && r.outcome == .failed && r.error?.kind == .verifyFailed, "[\(trace)]")
            default: Issue.record("[\(trace)] carried over without a final outcome")
            }
        }
        // Nothing is forgotten: a device with no final outcome and no doubt runs.
        if !inDoubt && (lastOutcome == nil || lastOutcome == .interrupted) {
            if case .run = decision {} else { Issue.record("[\(trace)] an unfinished device was not run") }
        }
    }

    @Test func everyJournalADeviceCanLeaveIsResumedSafely() throws {
        var checked = 0
        for symbols in Self.sequences(upTo: 5) {
            let lines = [Self.header()] + symbols.map { $0.line("D") }
            for retryFailed in [false, true] {
                for confirmable in [false, true] {
                    let plan = try Self.plan(lines, Self.inputs(["D"], retryFailed: retryFailed, confirmable: confirmable))
                    Self.check(symbols, Self.decision(plan, "D"), retryFailed: retryFailed, confirmable: confirmable)
                    checked += 1
                }
            }
        }
        #expect(checked == 4 * (1 + 8 + 64 + 512 + 4096 + 32768))
    }

    @Test func aDoubtOnAConfirmableStepIsAskedOfTheDeviceAndListedForTheRun() throws {
        let lines: [JournalLine] = [Self.header(), Symbol.started.line("D"), Symbol.intent.line("D"), Symbol.started.line("E"),
                                    Symbol.intent.line("E"), Symbol.interrupted.line("E")]
        let plan = try Self.plan(lines, Self.inputs(confirmable: true))
        #expect(plan.entries.map(\.decision) == [.confirm(attempt: 2, step: Self.commitIndex), .confirm(attempt: 2, step: Self.commitIndex)])
        #expect(plan.reconcile == ["D": Self.commitIndex, "E": Self.commitIndex])
        #expect(plan.toRun.map { "\($0.device.id) \($0.attempt) \($0.resumed)" } == ["D 2 true", "E 2 true"])
        // Without a confirm read, the same journal makes both devices need review.
        let blind = try Self.plan(lines, Self.inputs())
        #expect(blind.toRun.isEmpty && blind.reconcile.isEmpty)
    }

    @Test func aDeviceInReviewIsAskedAgainOnlyWhenRecheckedAndItsStepCanBeConfirmed() throws {
        let lines: [JournalLine] = [Self.header(), Symbol.started.line("D"), Symbol.intent.line("D"), Symbol.needsReview.line("D"),
                                    Symbol.started.line("E"), Symbol.needsReview.line("E")]
        var inputs = Self.inputs(confirmable: true)
        guard case .carryOver? = Self.decision(try Self.plan(lines, inputs), "D") else {
            Issue.record("a device in review was touched without being rechecked")
            return
        }
        inputs.recheck = ["D", "E"]
        let plan = try Self.plan(lines, inputs)
        #expect(Self.decision(plan, "D") == .confirm(attempt: 2, step: Self.commitIndex))
        #expect(Self.decision(plan, "E") == .confirm(attempt: 2, step: Self.commitIndex))
        // Without a confirm read there is nothing to ask: it stays in review.
        var blind = Self.inputs()
        blind.recheck = ["D"]
        guard case .carryOver(let r)? = Self.decision(try Self.plan(lines, blind), "D") else {
            Issue.record("a device in review without a confirm read was run")
            return
        }
        #expect(r.error?.kind == .needsReview)
    }

    @Test func anotherDevicesLinesAtAnyPositionChangeNothing() throws {
        // E: started, intent and a crash: it needs review, whatever D's lines around it.
        let other: [JournalLine] = [.started(device: "E", attempt: 1, at: wallTime("2026-11-30T05:00:00.000Z")), .intent(device: "E", step: "commit", stepIndex: Self.commitIndex, at: wallTime("2026-11-30T05:00:00.000Z"))]
        for symbols in Self.sequences(upTo: 3) {
            let own = symbols.map { $0.line("D") }
            let alone = Self.decision(try Self.plan([Self.header()] + own, Self.inputs()), "D")
            // Every interleaving of the two sequences (order within each kept).
            for i in 0...own.count {
                for j in i...own.count {
                    var lines = own
                    lines.insert(other[1], at: j)
                    lines.insert(other[0], at: i)
                    let plan = try Self.plan([Self.header()] + lines, Self.inputs())
                    #expect(Self.decision(plan, "D") == alone, "\(symbols) with E at \(i), \(j)")
                    guard case .needsReview? = Self.decision(plan, "E") else {
                        Issue.record("E lost its intent among \(symbols)")
                        continue
                    }
                }
            }
        }
    }

    @Test func aCrashAtEveryByteOfTheJournalResumesFromTheLinesBeforeIt() async throws {
        let dir = NSTemporaryDirectory() + "resume-plan-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let lines: [JournalLine] = [Self.header(), Symbol.started.line("D"), Symbol.intent.line("D"), Symbol.started.line("E"),
                                    Symbol.succeeded.line("D"), Symbol.interrupted.line("E")]
        var file: [UInt8] = []
        var ends: [Int] = []
        for l in lines {
            file += RecordEncoder.compact(l) + [0x0A]
            ends.append(file.count)
        }
        let path = dir + "/j.journal"
        var cuts = 0
        // Cut after the header's line and anywhere later (a journal always starts with a durable header).
        for cut in ends[0]...file.count {
            try Data(file[0..<cut]).write(to: URL(fileURLWithPath: path))
            try? FileManager.default.removeItem(atPath: path + ".torn")
            let journal = try FileJournal(path: path, fsync: false)
            let contents = try await journal.open(.resume)
            await journal.close()
            let whole = ends.filter { $0 <= cut }.count
            // A line missing only its newline is whole; it is kept (and completed).
            let kept = ends.contains(cut + 1) ? whole + 1 : whole
            #expect(contents.lines == Array(lines.prefix(kept)), "cut at byte \(cut)")
            let expected = try Self.plan(Array(lines.prefix(kept)), Self.inputs())
            #expect(try Self.plan(contents.lines, Self.inputs()) == expected)
            // The file now ends with a whole line, so a second resume reads the same.
            let again = try FileJournal(path: path, fsync: false)
            #expect(try await again.open(.resume).lines == contents.lines, "second resume after a cut at \(cut)")
            await again.close()
            cuts += 1
        }
        #expect(cuts == file.count - ends[0] + 1 && cuts > 300)
    }

    @Test func aResumeKeepsTheJournalsSelection() throws {
        let ids = ["A", "B", "C", "D"]
        let journal = [Self.header(selected: ["A", "C"], limit: "A,C")]
        // Without --limit: the journal's selection, not the whole inventory.
        let plan = try Self.plan(journal, Self.inputs(ids))
        #expect(plan.entries.map(\.device.id) == ["A", "C"])
        #expect(plan.selected == ["A", "C"])
        // The same --limit: fine.
        #expect(try Self.plan(journal, Self.inputs(ids, selection: ["A", "C"])).entries.map(\.device.id) == ["A", "C"])
        // Another one: refused, saying what to do.
        #expect {
            _ = try Self.plan(journal, Self.inputs(ids, selection: ["A", "B"]))
        } throws: { error in
            let text = (error as? ResumePlan.Refusal)?.description ?? ""
            return text.contains("selected 2 device(s) (--limit A,C)") && text.contains("without --limit to use the journal's selection")
        }
        // A run of the whole inventory resumed with a --limit: refused too.
        #expect(throws: ResumePlan.Refusal.self) { _ = try Self.plan([Self.header()], Self.inputs(ids, selection: ["A"])) }
        // A new run records its selection (nil for the whole inventory).
        #expect(try ResumePlan.make(Self.inputs(ids, selection: ["B"]), journal: nil).selected == ["B"])
        #expect(try ResumePlan.make(Self.inputs(ids), journal: nil).selected == nil)
    }

    @Test func aJournalOfAnotherWorkflowOrInventoryIsRefused() throws {
        var other = Self.inputs()
        other.workflow.sha256 = String(repeating: "c", count: 64)
        #expect { _ = try Self.plan([Self.header()], other) } throws: { ($0 as? ResumePlan.Refusal)?.description.contains("the workflow changed") == true }
        other = Self.inputs()
        other.inventory.sha256 = String(repeating: "c", count: 64)
        #expect { _ = try Self.plan([Self.header()], other) } throws: { ($0 as? ResumePlan.Refusal)?.description.contains("the inventory changed") == true }
    }

    @Test func aNeedsReviewOutcomeIsNeverRunAgainEvenWithRetryFailed() throws {
        // The resume that found the intent recorded `needs_review`; a later `--retry-failed` must not
        // run the device (its record has no steps to show the commit went out).
        let lines = [Self.header(), Symbol.started.line("D"), Symbol.intent.line("D"), Self.header(resumed: true), Symbol.needsReview.line("D")]
        let plan = try Self.plan(lines, Self.inputs(["D"], retryFailed: true))
        guard case .carryOver(let r)? = Self.decision(plan, "D") else {
            Issue.record("a needs-review device was run again with --retry-failed")
            return
        }
        #expect(r.error?.kind == .needsReview)
    }
}

extension ResumePlan {
    /// The devices whose confirm read comes first: id → the step in doubt (the `confirm` decisions).
    var reconcile: [String: Int] {
        var out: [String: Int] = [:]
        for e in entries { if case .confirm(_, let step) = e.decision { out[e.device.id] = step } }
        return out
    }
}
