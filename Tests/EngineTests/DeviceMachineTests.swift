import BLE
import Testing
import Workflow
import YAML
@testable import Engine

/// One device's decisions, event by event, with no clock and no radio: golden event/action sequences
/// for a clean run, retry, reconnect, failover, an irreversible write in doubt, stop and a lost claim.
@Suite struct DeviceMachineTests {
    typealias Action = DeviceMachine.Action

    /// scan, connect, read fw, commit (an irreversible write), disconnect.
    static let workflow = """
        name: machine
        defaults:
          timeout: 5s
          retry: { attempts: 3, backoff: [1s, 2s], on: [timeout, disconnected, busy, connect_failed] }
        steps:
          - scan: { timeout: 5s, retry: { attempts: 1 } }
          - connect: { timeout: 5s }
          - name: read fw
            read: { id: fw, service: 180A, characteristic: 2A26, as: utf8 }
          - name: commit
            write: { service: FFF0, characteristic: FFF1, value: { hex: "02${key}" }, irreversible: true }
          - disconnect: {}
        """

    static let address = BluetoothAddress(value: 0xC05E_0000_0001, kind: .public)
    static let heard = LinkLease.Heard(address: address, rssi: -52, name: "SNS-1")
    static let device = InventoryDevice(id: "SN-1", address: address, name: "SNS-1", vars: ["key": "c0ffee"], mark: SourceMark(line: 1, column: 1))

    static func machine(_ yaml: String = workflow, adapters: Int = 1, secrets: Set<String> = []) throws -> DeviceMachine {
        let parsed = WorkflowParser().parse(bytes: Array(yaml.utf8), path: "machine.yaml")
        let workflow = try #require(parsed.workflow, "\(parsed.diagnostics)")
        let plan = DeviceMachine.Plan(workflow: workflow, secretNames: secrets, adapterCount: adapters, seed: 1)
        let redactor = Redactor(secrets: secrets.compactMap { device.vars[$0] })
        return DeviceMachine(plan: plan, device: device, redactor: redactor, attemptNumber: 1, resumed: false)
    }

    static func ms(_ n: Int) -> Duration { .milliseconds(n) }

    static func finished(_ step: String, attempt: Int = 1, _ outcome: StepOutcome = .succeeded, ms duration: Double,
                         error: FailureRecord? = nil) -> Action {
        .emit(.stepFinished(RunEvent.StepFinished(device: "SN-1", step: step, attempt: attempt, outcome: outcome, durationMs: duration,
                                                  error: error)))
    }

    static func retry(_ step: String, attempt: Int, delay: Double, _ f: DeviceFailure) -> Action {
        .emit(.stepRetry(RunEvent.StepRetry(device: "SN-1", step: step, attempt: attempt, delayMs: delay,
                                            error: FailureRecord(kind: f.kind, step: step, message: f.message, causes: f.causes))))
    }

    /// Brings a machine to `read fw`: scan heard on `sim`, connect on `sim` with its slot.
    static func connected(_ m: inout DeviceMachine, adapter: String = "sim") -> [Action] {
        _ = m.handle(.begin(at: .zero, wall: WallTime(millisecondsSince1970: 1_796_014_800_000)))
        _ = m.handle(.link(.heard(heard, on: adapter)))
        _ = m.handle(.stepEnded(.succeeded(captures: []), at: ms(10)))
        _ = m.handle(.link(.connecting(on: adapter)))
        _ = m.handle(.link(.slotTaken(on: adapter)))
        _ = m.handle(.link(.connected))
        return m.handle(.stepEnded(.succeeded(captures: []), at: ms(20)))
    }

    /// The actions before `finish`, and the record `finish` carries.
    static func end(_ actions: [Action]) -> (before: [Action], record: DeviceRecord?) {
        var before: [Action] = []
        for a in actions {
            if case .finish(let r) = a { return (before, r) }
            before.append(a)
        }
        return (before, nil)
    }

    @Test func aCleanRunRunsEveryStepOnceThenClosesTheLinkAndFinishes() throws {
        var m = try Self.machine()
        #expect(m.handle(.begin(at: .zero, wall: WallTime(millisecondsSince1970: 1_796_014_800_000)))
                == [.run(step: 0, attempt: 1, confirmFirst: false)])
        #expect(m.handle(.link(.heard(Self.heard, on: "sim"))).isEmpty)
        #expect(m.handle(.stepEnded(.succeeded(captures: []), at: Self.ms(10)))
                == [Self.finished("scan", ms: 10), .run(step: 1, attempt: 1, confirmFirst: false)])
        #expect(m.handle(.link(.connecting(on: "sim"))).isEmpty)
        #expect(m.handle(.link(.slotTaken(on: "sim"))).isEmpty)
        #expect(m.handle(.link(.connected)).isEmpty)
        #expect(m.handle(.stepEnded(.succeeded(captures: []), at: Self.ms(20)))
                == [Self.finished("connect", ms: 10), .run(step: 2, attempt: 1, confirmFirst: false)])
        #expect(m.handle(.stepEnded(.succeeded(captures: [.init(name: "fw", value: .text("2.4.1"))]), at: Self.ms(25)))
                == [Self.finished("read fw", ms: 5), .run(step: 3, attempt: 1, confirmFirst: false)])
        #expect(m.handle(.irreversible(.sent)).isEmpty)
        #expect(m.delivery == .inDoubt(sends: 1))
        #expect(m.handle(.stepEnded(.succeeded(captures: []), at: Self.ms(30)))
                == [Self.finished("commit", ms: 5), .run(step: 4, attempt: 1, confirmFirst: false)])
        #expect(m.delivery == .none, "a new attempt starts with nothing sent")
        // The disconnect step closes the link itself: its slot goes back at once.
        #expect(m.handle(.linkClosed(security: nil, roundTrips: 9, at: Self.ms(31))) == [.releaseSlot(adapter: "sim")])
        #expect(m.handle(.stepEnded(.succeeded(captures: []), at: Self.ms(32))) == [Self.finished("disconnect", ms: 2), .closeLink])
        let (before, record) = Self.end(m.handle(.linkClosed(security: nil, roundTrips: 0, at: Self.ms(33))))
        #expect(before.isEmpty, "nothing left to give back")
        let r = try #require(record)
        #expect(r.outcome == .succeeded && r.error == nil && r.attempts == 1)
        #expect(r.adapter == "sim" && r.rssi == -52 && r.address == Self.address.description && r.attRoundTrips == 9)
        #expect(r.captured == ["fw": .string("2.4.1")])
        #expect(r.durationMs == 33 && r.started == WallTime(millisecondsSince1970: 1_796_014_800_000))
        #expect(r.steps.map(\.outcome) == [.succeeded, .succeeded, .succeeded, .succeeded, .succeeded])
        #expect(r.steps.map(\.kind) == ["scan", "connect", "read", "write", "disconnect"])
    }

    @Test func aTransientFailureIsRetriedAfterItsBackoff() throws {
        var m = try Self.machine()
        _ = Self.connected(&m)
        let timeout = DeviceFailure(.timeout, "no answer to the read")
        #expect(m.handle(.stepEnded(.failed(timeout), at: Self.ms(30))) == [Self.retry("read fw", attempt: 1, delay: 1000, timeout), .wait(.seconds(1))])
        #expect(m.handle(.timerFired(sessionLost: false, at: Self.ms(1030))) == [.run(step: 2, attempt: 2, confirmFirst: false)])
        #expect(m.handle(.stepEnded(.failed(timeout), at: Self.ms(1040))) == [Self.retry("read fw", attempt: 2, delay: 2000, timeout), .wait(.seconds(2))])
        #expect(m.handle(.timerFired(sessionLost: false, at: Self.ms(3040))) == [.run(step: 2, attempt: 3, confirmFirst: false)])
        // Out of attempts: the step fails, the device with it; the link closes, then the record.
        let failed = FailureRecord(kind: .timeout, step: "read fw", message: timeout.message)
        #expect(m.handle(.stepEnded(.failed(timeout), at: Self.ms(3050)))
                == [Self.finished("read fw", attempt: 3, .failed, ms: 30, error: failed), .closeLink])
        let (before, record) = Self.end(m.handle(.linkClosed(security: nil, roundTrips: 4, at: Self.ms(3051))))
        #expect(before == [.releaseSlot(adapter: "sim")])
        let r = try #require(record)
        #expect(r.outcome == .failed && r.error == failed)
        #expect(r.steps[2].attempts == 3 && r.steps[3].outcome == .skipped && r.steps[3].startMs == 3050)
    }

    @Test func aSessionThatGaveUpRestartsAtConnectAfterClosingTheLink() throws {
        var m = try Self.machine()
        _ = Self.connected(&m)
        let dropped = DeviceFailure(.disconnected, "link lost")
        #expect(m.handle(.stepEnded(.failed(dropped), at: Self.ms(30))) == [Self.retry("read fw", attempt: 1, delay: 1000, dropped), .wait(.seconds(1))])
        // The session's own reconnect gave up during the wait: close everything and connect again.
        #expect(m.handle(.timerFired(sessionLost: true, at: Self.ms(1030))) == [.closeLink, .run(step: 1, attempt: 2, confirmFirst: false)])
        #expect(m.handle(.linkClosed(security: nil, roundTrips: 3, at: Self.ms(1031))) == [.releaseSlot(adapter: "sim")])
        #expect(m.lease.slot == nil && m.lease.adapter == "sim", "the device stays on its adapter")
        #expect(m.handle(.link(.connecting(on: "sim"))).isEmpty)
        #expect(m.handle(.link(.slotTaken(on: "sim"))).isEmpty)
        #expect(m.handle(.link(.connected)).isEmpty)
        #expect(m.handle(.stepEnded(.succeeded(captures: []), at: Self.ms(1050)))
                == [Self.finished("connect", attempt: 2, ms: 30), .run(step: 2, attempt: 2, confirmFirst: false)])
    }

    @Test func aConnectThatKeepsFailingLooksForTheDeviceOnAnotherAdapter() throws {
        var m = try Self.machine(adapters: 2)
        _ = m.handle(.begin(at: .zero, wall: WallTime(millisecondsSince1970: 0)))
        _ = m.handle(.link(.heard(Self.heard, on: "hci0")))
        #expect(m.handle(.stepEnded(.succeeded(captures: []), at: Self.ms(10))).last == .run(step: 1, attempt: 1, confirmFirst: false))
        #expect(m.handle(.link(.connecting(on: "hci0"))).isEmpty)
        #expect(m.handle(.link(.slotTaken(on: "hci0"))).isEmpty)
        // The connect fails: the slot goes back, the adapter's slot count is followed.
        #expect(m.handle(.link(.connectFailed(on: "hci0", adapterFailure: nil))) == [.releaseSlot(adapter: "hci0"), .followSlots(adapter: "hci0")])
        let refused = DeviceFailure(.connectFailed, "connection failed to be established")
        #expect(m.handle(.stepEnded(.failed(refused), at: Self.ms(20)))
                == [Self.retry("connect", attempt: 1, delay: 1000, refused),
                    .lookElsewhere(address: Self.address, avoid: ["hci0"]), .wait(.seconds(1))])
        // Heard on hci1: the retry connects there; an answer from the adapter to avoid changes nothing.
        #expect(m.handle(.link(.heardElsewhere(LinkLease.Heard(address: Self.address, rssi: -80), on: "hci0"))).isEmpty)
        #expect(m.lease.adapter == "hci0")
        #expect(m.handle(.link(.heardElsewhere(LinkLease.Heard(address: Self.address, rssi: -61), on: "hci1"))).isEmpty)
        #expect(m.lease.adapter == "hci1")
        #expect(m.lease.connectAdapter(among: ["hci0", "hci1"], failed: { _ in false }) == "hci1")
        #expect(m.handle(.timerFired(sessionLost: false, at: Self.ms(1020))) == [.run(step: 1, attempt: 2, confirmFirst: false)])
    }

    @Test func anAdapterThatFailsIsTakenOutAndForgotten() throws {
        var m = try Self.machine(adapters: 2)
        _ = m.handle(.begin(at: .zero, wall: WallTime(millisecondsSince1970: 0)))
        _ = m.handle(.link(.heard(Self.heard, on: "hci0")))
        _ = m.handle(.stepEnded(.succeeded(captures: []), at: Self.ms(10)))
        _ = m.handle(.link(.connecting(on: "hci0")))
        _ = m.handle(.link(.slotTaken(on: "hci0")))
        #expect(m.handle(.link(.connectFailed(on: "hci0", adapterFailure: "the controller is gone")))
                == [.releaseSlot(adapter: "hci0"), .followSlots(adapter: "hci0"), .markAdapterFailed(adapter: "hci0", why: "the controller is gone"),
                    .emit(.adapterFailed(device: "SN-1", adapter: "hci0", message: "the controller is gone"))])
        #expect(m.lease.adapter == nil && m.lease.heard == nil)
        #expect(m.lease.connectAdapter(among: ["hci0", "hci1"], failed: { $0 == "hci0" }) == "hci1")
        // Retried (an adapter failure is of the class `disconnected`), with nothing heard and no adapter
        // to avoid: no look elsewhere, just the backoff; the retry connects on a working adapter.
        let gone = DeviceFailure(.adapterFailure, "the controller is gone")
        #expect(m.handle(.stepEnded(.failed(gone), at: Self.ms(20))) == [Self.retry("connect", attempt: 1, delay: 1000, gone), .wait(.seconds(1))])
    }

    @Test func anIrreversibleWriteThatMayHaveGoneOutIsNeverSentAgain() throws {
        var m = try Self.machine()
        _ = Self.connected(&m)
        _ = m.handle(.stepEnded(.succeeded(captures: []), at: Self.ms(25)))
        #expect(m.handle(.irreversible(.sent)).isEmpty)
        let lost = DeviceFailure(.timeout, "no answer to the write")
        let actions = m.handle(.stepEnded(.failed(lost), at: Self.ms(40)))
        let review = DeviceFailure(.needsReview,
                                   "the irreversible step `commit` was sent and its outcome is unknown (no answer to the write); it is not sent again because it is not `idempotent`: check the device")
        #expect(actions == [Self.finished("commit", .failed, ms: 15, error: FailureRecord(kind: .needsReview, step: "commit", message: review.message)), .closeLink])
        let (_, record) = Self.end(m.handle(.linkClosed(security: nil, roundTrips: 5, at: Self.ms(41))))
        #expect(record?.outcome == .failed && record?.error?.kind == .needsReview)
    }

    @Test func aWriteTheDeviceRefusedIsNotInDoubtAndIsRetried() throws {
        var m = try Self.machine()
        _ = Self.connected(&m)
        _ = m.handle(.stepEnded(.succeeded(captures: []), at: Self.ms(25)))
        _ = m.handle(.irreversible(.sent))
        _ = m.handle(.irreversible(.refused))
        #expect(m.delivery == .notExecuted)
        let busy = DeviceFailure(.busy, "the device is busy")
        #expect(m.handle(.stepEnded(.failed(busy), at: Self.ms(40))) == [Self.retry("commit", attempt: 1, delay: 1000, busy), .wait(.seconds(1))])
        #expect(m.handle(.timerFired(sessionLost: false, at: Self.ms(1040))) == [.run(step: 3, attempt: 2, confirmFirst: false)])
    }

    @Test func aRefusalAfterTwoSendsLeavesTheFirstInDoubt() {
        var d = Delivery.none
        d.handle(.sent)
        d.handle(.sent)
        d.handle(.refused)
        #expect(d == .inDoubt(sends: 2) && d.mayHaveReached)
        d.handle(.confirmed(tookEffect: false))
        #expect(d == .notExecuted && !d.mayHaveReached, "a confirm read speaks for every send")
        var once = Delivery.none
        once.handle(.refused)
        #expect(once == .none, "a refusal of nothing sent changes nothing")
    }

    @Test func aConfirmableWriteInDoubtIsRetriedCheckingFirst() throws {
        let yaml = Self.workflow.replacingOccurrences(
            of: """
              - name: commit
                write: { service: FFF0, characteristic: FFF1, value: { hex: "02${key}" }, irreversible: true }
            """,
            with: """
              - subscribe: { id: acks, service: FFF0, characteristic: FFF3 }
              - name: commit
                await:
                  subscription: acks
                  trigger: { service: FFF0, characteristic: FFF1, value: { hex: "02" }, irreversible: true }
                  equals: { hex: "0200" }
                  confirm: { service: FFF0, characteristic: FFF2, equals: { hex: "02" } }
            """)
        var m = try Self.machine(yaml)
        _ = Self.connected(&m)
        _ = m.handle(.stepEnded(.succeeded(captures: []), at: Self.ms(25)))
        _ = m.handle(.stepEnded(.succeeded(captures: []), at: Self.ms(26)))
        _ = m.handle(.irreversible(.sent))
        let lost = DeviceFailure(.timeout, "no ack")
        #expect(m.handle(.stepEnded(.failed(lost), at: Self.ms(40))) == [Self.retry("commit", attempt: 1, delay: 1000, lost), .wait(.seconds(1))])
        #expect(m.handle(.timerFired(sessionLost: false, at: Self.ms(1040))) == [.run(step: 4, attempt: 2, confirmFirst: true)])
    }

    @Test func aCutDuringTheBackoffInterruptsTheDevice() throws {
        var m = try Self.machine()
        _ = Self.connected(&m)
        let timeout = DeviceFailure(.timeout, "no answer")
        _ = m.handle(.stepEnded(.failed(timeout), at: Self.ms(30)))
        let interrupted = DeviceFailure(.interrupted, "cut while stopping", causes: ["no answer"])
        #expect(m.handle(.stop(at: Self.ms(500)))
                == [Self.finished("read fw", .failed, ms: 10, error: FailureRecord(kind: .interrupted, step: "read fw", message: interrupted.message,
                                                                                   causes: interrupted.causes)), .closeLink])
        let (_, record) = Self.end(m.handle(.linkClosed(security: nil, roundTrips: 2, at: Self.ms(501))))
        #expect(record?.outcome == .interrupted && record?.error?.message == "cut while stopping")
    }

    @Test func aDeviceCutForALostClaimSaysWhy() throws {
        var m = try Self.machine()
        _ = Self.connected(&m)
        #expect(m.handle(.claimLost(reason: "cut: this station lost its lease")).isEmpty)
        #expect(m.handle(.stepEnded(.cut(cause: "cancelled"), at: Self.ms(30))).last == .closeLink)
        let (_, record) = Self.end(m.handle(.linkClosed(security: nil, roundTrips: 2, at: Self.ms(31))))
        let r = try #require(record)
        #expect(r.outcome == .interrupted)
        #expect(r.error == FailureRecord(kind: .interrupted, step: "read fw", message: "cut: this station lost its lease",
                                         causes: ["cut while stopping", "cancelled"]))
    }

    @Test func aStepWhoseConditionIsFalseIsSkippedWithoutRunning() throws {
        let yaml = Self.workflow.replacingOccurrences(of: "  - name: commit\n", with: "  - name: commit\n    when: fw < 2.0.0\n")
            .replacingOccurrences(of: "as: utf8", with: "as: version")
        var m = try Self.machine(yaml)
        _ = Self.connected(&m)
        let fw = try TypedValue(text: "2.4.1", as: .version)
        let actions = m.handle(.stepEnded(.succeeded(captures: [.init(name: "fw", value: fw)]), at: Self.ms(25)))
        #expect(actions.contains(.run(step: 4, attempt: 1, confirmFirst: false)))
        #expect(!actions.contains(.run(step: 3, attempt: 1, confirmFirst: false)))
        #expect(m.supervisor.progress[3].outcome == .skippedByCondition)
    }

    @Test func secretsAreHiddenInFailuresAndInWhatTheDeviceWasSent() throws {
        var m = try Self.machine(secrets: ["key"])
        _ = Self.connected(&m)
        _ = m.handle(.stepEnded(.succeeded(captures: []), at: Self.ms(25)))
        // The write's bytes are made from the secret: a message showing them is hidden too.
        #expect(m.handle(.learned(secretBytes: [0x02, 0xC0, 0xFF, 0xEE])).isEmpty)
        let refused = DeviceFailure(.attError, "write of 02c0ffee refused", causes: ["key c0ffee"])
        let actions = m.handle(.stepEnded(.failed(refused), at: Self.ms(30)))
        guard case .emit(.stepFinished(let f))? = actions.first else {
            Issue.record("no step_finished: \(actions)")
            return
        }
        #expect(f.error?.message == "write of *** refused" && f.error?.causes == ["key ***"])
    }
}
