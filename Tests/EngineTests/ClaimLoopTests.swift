import Synchronization
import Testing
import EngineTestSupport
import TestSupport
import Workflow
@testable import Engine

/// How a station works a line, event by event: no clock, no database (golden event/action sequences).
@Suite struct ClaimLoopTests {
    typealias Action = ClaimLoop.Action

    static func loop(heardOnly: Bool = false, concurrency: Int = 2, batch: Int = 8, idle: Duration? = .seconds(60),
                     selection: [String] = ["A", "B", "C"], whole: Bool = false) -> ClaimLoop {
        ClaimLoop(policy: ClaimPolicy(heardOnly: heardOnly, batch: batch, retry: .milliseconds(100), maxRetry: .milliseconds(400), idleLimit: idle),
                  concurrency: concurrency, selection: selection, whole: whole)
    }

    static func s(_ n: Int) -> Duration { .seconds(n) }

    @Test func itClaimsWhatSlotsAllowRunsThemAndEndsWhenTheRunIsComplete() {
        var l = Self.loop()
        #expect(l.handle(.begin, at: .zero, stopping: false) == [.claim(among: ["A", "B", "C"], limit: 2)])
        // A full claim fills the slots: nothing more is asked for, no tick.
        #expect(l.handle(.claimed([DeviceClaim(device: "A", attempt: 1), DeviceClaim(device: "B", attempt: 3)]), at: Self.s(1), stopping: false)
                == [.launch(DeviceClaim(device: "A", attempt: 1)), .launch(DeviceClaim(device: "B", attempt: 3)), .waitForWake])
        // A slot frees: claim one, among the devices not finished here.
        #expect(l.handle(.finished("A", outcome: .succeeded), at: Self.s(2), stopping: false) == [.claim(among: ["B", "C"], limit: 1)])
        // Nothing came: wait for a device or a tick (100 ms, then doubling).
        #expect(l.handle(.claimed([]), at: Self.s(2), stopping: false) == [.tick(after: .milliseconds(100)), .waitForWake])
        #expect(l.handle(.tick, at: Self.s(3), stopping: false) == [.claim(among: ["B", "C"], limit: 1)])
        #expect(l.handle(.claimed([]), at: Self.s(3), stopping: false) == [.tick(after: .milliseconds(200)), .waitForWake])
        #expect(l.handle(.tick, at: Self.s(4), stopping: false) == [.claim(among: ["B", "C"], limit: 1)])
        #expect(l.handle(.claimed([DeviceClaim(device: "C", attempt: 1)]), at: Self.s(4), stopping: false)
                == [.launch(DeviceClaim(device: "C", attempt: 1)), .waitForWake])
        #expect(l.handle(.finished("B", outcome: .failed), at: Self.s(5), stopping: false) == [.claim(among: ["C"], limit: 1)])
        // The claim's backoff starts again after a claim that brought something.
        #expect(l.handle(.claimed([]), at: Self.s(5), stopping: false) == [.tick(after: .milliseconds(100)), .waitForWake])
        // Everything finished here: nothing left to ask for, so the line is asked where the run stands.
        #expect(l.handle(.finished("C", outcome: .succeeded), at: Self.s(6), stopping: false) == [.askProgress(selection: ["A", "B", "C"])])
    }

    @Test func withNothingRunningAndNothingToClaimTheLinesProgressDecides() {
        var l = Self.loop(selection: ["A"])
        _ = l.handle(.begin, at: .zero, stopping: false)
        #expect(l.handle(.claimed([DeviceClaim(device: "A", attempt: 1)]), at: .zero, stopping: false)
                == [.launch(DeviceClaim(device: "A", attempt: 1)), .tick(after: .milliseconds(100)), .waitForWake])
        // Finished here: nothing left to ask for, so the line is asked where the run stands.
        #expect(l.handle(.finished("A", outcome: .succeeded), at: Self.s(1), stopping: false) == [.askProgress(selection: ["A"])])
        #expect(l.handle(.progress(ClaimProgress(pending: 0, claimed: 0)), at: Self.s(1), stopping: false) == [.finish(note: nil)])
        #expect(l.done && l.note == nil)
    }

    @Test func aStationThatCanClaimNothingForItsIdleLimitStopsAndSaysWhy() {
        var l = Self.loop(idle: .seconds(60), whole: true)
        #expect(l.handle(.begin, at: .zero, stopping: false) == [.claim(among: nil, limit: 2)])
        #expect(l.handle(.claimed([]), at: Self.s(1), stopping: false) == [.askProgress(selection: nil)])
        // Devices pending that this station cannot get: go on (tick), within the idle limit.
        #expect(l.handle(.progress(ClaimProgress(pending: 2, claimed: 1)), at: Self.s(1), stopping: false)
                == [.tick(after: .milliseconds(100)), .waitForWake])
        #expect(l.handle(.tick, at: Self.s(30), stopping: false) == [.claim(among: nil, limit: 2)])
        #expect(l.handle(.claimed([]), at: Self.s(30), stopping: false) == [.askProgress(selection: nil)])
        // Its own outcomes are not on the line yet: wait for them, and the idle time starts again.
        #expect(l.handle(.progress(ClaimProgress(pending: 2, claimed: 1, unwrittenHere: 1)), at: Self.s(30), stopping: false)
                == [.tick(after: .milliseconds(200)), .waitForWake])
        _ = l.handle(.tick, at: Self.s(89), stopping: false)
        _ = l.handle(.claimed([]), at: Self.s(89), stopping: false)
        #expect(l.handle(.progress(ClaimProgress(pending: 2, claimed: 1)), at: Self.s(89), stopping: false)
                == [.tick(after: .milliseconds(400)), .waitForWake], "59 s since the wait for its own outcomes")
        _ = l.handle(.tick, at: Self.s(90), stopping: false)
        _ = l.handle(.claimed([]), at: Self.s(90), stopping: false)
        let note = "stopped claiming: nothing this station could claim for 60.0 seconds (2 device(s) pending that it cannot get, 1 held by other stations)"
        #expect(l.handle(.progress(ClaimProgress(pending: 2, claimed: 1)), at: Self.s(90), stopping: false) == [.finish(note: note)])
    }

    @Test func anUnreachableLineIsSaidOnceAndAgainWhenItIsBackAndEndsTheStationAfterTheIdleLimit() {
        var l = Self.loop(idle: .seconds(10))
        _ = l.handle(.begin, at: .zero, stopping: false)
        let unavailable = Action.emit(.storeUnavailable(message: "cannot claim devices (connection refused); no new devices until the line is reachable again"))
        #expect(l.handle(.unreachable("connection refused"), at: Self.s(1), stopping: false)
                == [unavailable, .tick(after: .milliseconds(100)), .waitForWake])
        _ = l.handle(.tick, at: Self.s(2), stopping: false)
        #expect(l.handle(.unreachable("connection refused"), at: Self.s(2), stopping: false) == [.tick(after: .milliseconds(200)), .waitForWake])
        _ = l.handle(.tick, at: Self.s(3), stopping: false)
        #expect(l.handle(.claimed([DeviceClaim(device: "B", attempt: 1)]), at: Self.s(3), stopping: false)
                == [.emit(.storeAvailable(message: "the line is reachable again: claiming goes on")), .launch(DeviceClaim(device: "B", attempt: 1)),
                    .tick(after: .milliseconds(100)), .waitForWake])
        #expect(l.handle(.finished("B", outcome: .interrupted), at: Self.s(4), stopping: false) == [.claim(among: ["A", "B", "C"], limit: 2)],
                "an interrupted device is not final: it may be claimed again")
        #expect(l.handle(.unreachable("timeout"), at: Self.s(5), stopping: false) == [unavailable.replacing("connection refused", with: "timeout"),
                                                                                     .waitForWake])
        _ = l.handle(.tick, at: Self.s(13), stopping: false)
        #expect(l.handle(.unreachable("timeout"), at: Self.s(13), stopping: false)
                == [.finish(note: "stopped claiming: the line was unreachable for 10.0 seconds")])
    }

    @Test func devicesClaimedWhileStoppingOrNotThisStationsAreGivenBack() {
        var l = Self.loop(concurrency: 4)
        _ = l.handle(.begin, at: .zero, stopping: false)
        #expect(l.handle(.claimed([DeviceClaim(device: "A", attempt: 1), DeviceClaim(device: "X", attempt: 1)]), at: .zero, stopping: false)
                == [.launch(DeviceClaim(device: "A", attempt: 1)), .release(["X"]), .tick(after: .milliseconds(100)), .waitForWake])
        _ = l.handle(.tick, at: Self.s(1), stopping: false)
        // The stop came while the claim was on its way: the devices go back, and nothing new starts.
        #expect(l.handle(.claimed([DeviceClaim(device: "B", attempt: 1)]), at: Self.s(1), stopping: true) == [.release(["B"]), .waitForWake])
        #expect(l.handle(.finished("A", outcome: .succeeded), at: Self.s(2), stopping: true) == [.finish(note: nil)])
    }

    @Test func aStationThatClaimsWhatItHearsAsksItsAdaptersFirst() {
        var l = Self.loop(heardOnly: true, batch: 1)
        #expect(l.handle(.begin, at: .zero, stopping: false) == [.hear])
        #expect(l.handle(.heard(["C", "A"]), at: .zero, stopping: false) == [.claim(among: ["C", "A"], limit: 1)])
        // A full claim with slots still free: claim again at once.
        #expect(l.handle(.claimed([DeviceClaim(device: "C", attempt: 1)]), at: .zero, stopping: false) == [.launch(DeviceClaim(device: "C", attempt: 1)), .hear])
        #expect(l.handle(.heard([]), at: .zero, stopping: false) == [.tick(after: .milliseconds(100)), .waitForWake],
                "nothing heard: as if the line handed out nothing")
    }
}

extension ClaimLoop.Action {
    /// The same action with a text replaced in an emitted message (for expectations that differ in a word).
    func replacing(_ a: String, with b: String) -> ClaimLoop.Action {
        guard case .emit(.storeUnavailable(let m)) = self else { return self }
        return .emit(.storeUnavailable(message: m.replacingOccurrences(of: a, with: b)))
    }
}

/// The claiming scheduler carried out against a fake line (a `RunStore` with `DeviceClaims`) on the
/// simulated fleet: what the loop decides is what the line sees.
@Suite struct ClaimingSchedulerTests {
    /// A line of one station, in memory: devices pending in inventory order, handed out by `claim`,
    /// back to pending when given back or interrupted; the first `unreachableClaims` claims fail.
    actor FakeLine: RunStore, DeviceClaims {
        nonisolated let runID = "fake-run"
        nonisolated let claimPolicy: ClaimPolicy
        nonisolated var location: String { "fake line" }
        nonisolated var claims: (any DeviceClaims)? { self }
        private var pending: [String]
        private var held: Set<String> = []
        private(set) var attempts: [String: Int] = [:]
        private(set) var outcomes: [String: [DeviceOutcome]] = [:]
        private(set) var mostHeld = 0
        private(set) var released: [String] = []
        private var unreachableClaims: Int

        init(devices: [String], policy: ClaimPolicy, unreachableClaims: Int) {
            pending = devices
            claimPolicy = policy
            self.unreachableClaims = unreachableClaims
        }

        func open(_ mode: RunStoreMode) -> JournalContents { JournalContents(lines: []) }

        func record(_ line: JournalLine) {
            guard case .outcome(let r, _) = line else { return }
            outcomes[r.id, default: []].append(r.outcome)
            held.remove(r.id)
            if r.outcome == .interrupted { pending.append(r.id) }
        }

        func flush() {}
        func close() {}

        func claim(among candidates: [String]?, limit: Int) throws -> [DeviceClaim] {
            if unreachableClaims > 0 {
                unreachableClaims -= 1
                throw RunStoreError("the line is unreachable")
            }
            let open = pending.filter { candidates?.contains($0) ?? true }.prefix(limit)
            pending.removeAll { open.contains($0) }
            var out: [DeviceClaim] = []
            for d in open {
                attempts[d, default: 0] += 1
                held.insert(d)
                out.append(DeviceClaim(device: d, attempt: attempts[d] ?? 1))
            }
            mostHeld = max(mostHeld, held.count)
            return out
        }

        func release(_ devices: [String]) {
            released += devices
            for d in devices where held.remove(d) != nil { pending.insert(d, at: 0) }
        }

        func progress(of devices: [String]?) -> ClaimProgress {
            let within = { (d: String) in devices?.contains(d) ?? true }
            return ClaimProgress(pending: pending.filter(within).count, claimed: held.filter(within).count)
        }

        func keepLeases(lost: @escaping @Sendable ([String]) -> Void) {}
        func stopLeases() {}
    }

    final class Recorder: RunEventSink {
        let events = Mutex<[RunEvent]>([])
        func emit(_ event: RunEvent) { events.withLock { $0.append(event) } }
        func finish() async {}
    }

    @Test func everyDeviceIsClaimedRunAndRecordedOnceThroughAnUnreachableSpell() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let loaded = try line.load(try line.write(count: 12))
        let sim = try line.simulator(loaded)
        let fake = FakeLine(devices: loaded.devices.map(\.id),
                            policy: ClaimPolicy(heardOnly: false, batch: 2, retry: .milliseconds(5), maxRetry: .milliseconds(20), idleLimit: nil),
                            unreachableClaims: 2)
        var options = line.options()
        options.store = fake
        options.concurrency = 3
        let recorder = Recorder()
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices, adapters: [sim],
                                          options: options, events: EventBus([recorder]))
        await sim.close()
        #expect(report.devices.count == 12 && report.devices.allSatisfy { $0.outcome == .succeeded }, "\(report.summary.errors)")
        let outcomes = await fake.outcomes
        #expect(outcomes.count == 12 && outcomes.values.allSatisfy { $0 == [.succeeded] }, "every device recorded once")
        #expect(await fake.attempts.values.allSatisfy { $0 == 1 })
        #expect(await fake.mostHeld <= 3, "nothing is claimed ahead of a free slot")
        #expect(await fake.released.isEmpty)
        let kinds = recorder.events.withLock { $0.map(\.type) }
        #expect(kinds.filter { $0 == .storeUnavailable }.count == 1 && kinds.filter { $0 == .storeAvailable }.count == 1)
        #expect(kinds.firstIndex(of: .storeUnavailable) ?? 0 < kinds.firstIndex(of: .storeAvailable) ?? 0)
    }
}
