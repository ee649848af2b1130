import BLE
import Foundation
import Testing
@testable import Workflow

/// An irreversible write is never sent again blindly: `resend` needs `idempotent: true`, `retry_from`
/// never restarts over it, and `confirm` says how to check the device instead.
@Suite struct IrreversibleStepTests {
    static func workflow(commit: String, extra: String = "") -> String {
        """
        name: t
        steps:
          - connect: {}
          - subscribe: { id: acks, service: FFF0, characteristic: FFF3 }
          - name: begin
            write: { service: FFF0, characteristic: FFF1, value: { hex: "03" } }
          - name: commit
            await:
              subscription: acks
              trigger: { service: FFF0, characteristic: FFF1, value: { hex: "02" }\(commit) }
              equals: { hex: "0200" }
              resend: [1s]
        \(extra)
        """
    }

    static func parse(_ text: String) -> (Workflow?, [Diagnostic]) {
        WorkflowParser().parse(bytes: Array(text.utf8), path: "wf.yaml")
    }

    @Test func resendOnAnIrreversibleTriggerIsRefusedWithItsPositionAndAHint() throws {
        let (w, d) = Self.parse(Self.workflow(commit: ", irreversible: true"))
        #expect(w == nil)
        let e = try #require(d.first)
        #expect(d.count == 1)
        #expect(e.path == "wf.yaml")
        #expect(e.line == 12 && e.column == 15)
        #expect(e.message == "`resend` would send the irreversible trigger again after a lost answer, and it is not declared `idempotent`")
        #expect(e.hint?.contains("add `idempotent: true` to the trigger") == true)
        #expect(e.hint?.contains("`confirm:`") == true)
    }

    @Test func resendOnAnIrreversibleTriggerDeclaredIdempotentIsAccepted() throws {
        let (w, d) = Self.parse(Self.workflow(commit: ", irreversible: true, idempotent: true"))
        #expect(d.isEmpty, "\(d)")
        let commit = try #require(w?.steps.last)
        #expect(commit.irreversible && commit.idempotent)
        // A reversible trigger may be re-sent without declaring anything.
        let (plain, pd) = Self.parse(Self.workflow(commit: ""))
        #expect(pd.isEmpty && plain?.steps.last?.idempotent == false)
    }

    @Test func confirmIsParsedIntoATargetAndAMatcher() throws {
        let text = Self.workflow(commit: ", irreversible: true")
            .replacingOccurrences(of: "      resend: [1s]", with: "      confirm: { service: FFF0, characteristic: FFF2, equals: { hex: \"02\" } }")
        let (w, d) = Self.parse(text)
        #expect(d.isEmpty, "\(d)")
        guard case .await(let a)? = w?.steps.last?.kind else {
            Issue.record("the commit is an await")
            return
        }
        let confirm = try #require(a.confirm)
        #expect(confirm.target == CharacteristicRef(service: try #require(BluetoothUUID("FFF0")), characteristic: try #require(BluetoothUUID("FFF2"))))
        guard case .equalsValue(.hex(let t)) = confirm.matcher else {
            Issue.record("confirm equals a hex value: \(confirm.matcher)")
            return
        }
        #expect(t.source == "02")
        #expect(w?.steps.last?.targets.count == 2, "the confirm read is a target (discovery looks for it)")
    }

    @Test func confirmProblemsAreErrorsWithPositions() throws {
        let noTrigger = """
            name: t
            steps:
              - connect: {}
              - subscribe: { id: acks, service: FFF0, characteristic: FFF3 }
              - await: { subscription: acks, equals: { hex: "0200" }, confirm: { service: FFF0, characteristic: FFF2, equals: { hex: "02" } } }
            """
        let (_, d1) = Self.parse(noTrigger)
        #expect(d1.first?.message == "`confirm` checks whether a `trigger` took effect, but this `await` has none")
        #expect(d1.first?.line == 5)
        let noMatcher = Self.workflow(commit: "").replacingOccurrences(of: "      resend: [1s]", with: "      confirm: { service: FFF0, characteristic: FFF2 }")
        let (_, d2) = Self.parse(noMatcher)
        #expect(d2.first?.message.hasPrefix("`confirm` needs `equals` or `matches`") == true)
        let typo = Self.workflow(commit: "").replacingOccurrences(of: "      resend: [1s]", with: "      confirm: { service: FFF0, characteristic: FFF2, equal: { hex: \"02\" } }")
        let (_, d3) = Self.parse(typo)
        #expect(d3.contains { $0.message.contains("`equal`") && $0.hint?.contains("equals") == true }, "\(d3)")
    }

    @Test func retryFromNeverRestartsOverAnIrreversibleStep() throws {
        let text = Self.workflow(commit: ", irreversible: true, idempotent: true", extra: """
              - name: after
                write: { service: FFF0, characteristic: FFF1, value: { hex: "05" } }
                retry_from: begin
            """)
        let (w, d) = Self.parse(text)
        #expect(w == nil)
        let e = try #require(d.first)
        #expect(e.message == "`retry_from: begin` would repeat the irreversible step `commit`")
        #expect(e.line == 15 && e.column == 17)
        #expect(e.hint == "restart at a step after `commit`")
        // Nor does the irreversible step itself restart earlier (it would be sent again after its set-up).
        let own = Self.workflow(commit: ", irreversible: true").replacingOccurrences(of: "      resend: [1s]", with: "    retry_from: begin")
        let (_, d2) = Self.parse(own)
        #expect(d2.map(\.message) == ["`retry_from: begin` would repeat the irreversible step `commit`"])
    }

    @Test func theSensorV2WorkflowNeverResendsANonIdempotentCommand() throws {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: repositoryRoot + "/workflows/sensor-v2.yaml")))
        let (w, d) = WorkflowParser().parse(bytes: bytes, path: "workflows/sensor-v2.yaml")
        #expect(d.isEmpty, "\(d)")
        let steps = try #require(w?.steps)
        func awaitStep(_ name: String) throws -> Step.Await {
            guard case .await(let a)? = steps.first(where: { $0.name == name })?.kind else { throw TestFailure(name) }
            return a
        }
        // `04` answers `04 01` when re-sent: a lost ack streams the blob again from `begin blob`.
        #expect(try awaitStep("end blob").resend.isEmpty)
        let endBlob = try #require(steps.first { $0.name == "end blob" })
        #expect(endBlob.retryFromIndex == steps.firstIndex { $0.name == "begin blob" })
        #expect(endBlob.effectiveRetry.on.contains(.timeout) && endBlob.effectiveRetry.on.contains(.mismatch))
        // The commit: irreversible, idempotent on this device, and confirmed by the state before a re-send.
        let commit = try #require(steps.first { $0.name == "commit" })
        #expect(commit.irreversible && commit.idempotent)
        #expect(try awaitStep("commit").confirm != nil)
    }

    struct TestFailure: Error {
        var step: String
        init(_ step: String) { self.step = step }
    }
}
