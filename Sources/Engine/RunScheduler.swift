import Synchronization
import Workflow

/// Scheduling: runs the plan's devices under bounded concurrency, each in its own `DeviceAgent`;
/// journals each start and outcome (through the run's `RunJournal`); stops starting devices when the stop coordinator says so — after
/// an operator's stop, when the failure threshold is crossed while devices are still waiting, or when
/// the journal cannot be written (in-flight devices then end as they can: an irreversible write whose
/// intent cannot be made durable is not sent).
///
/// On a store shared by several stations (`RunStore.claims`, a line) the devices are not taken from
/// the plan in order but claimed, a few at a time, as slots free up (`runClaiming`).
struct RunScheduler {
    let context: RunContext
    let stopper: StopCoordinator
    let concurrency: Int
    let maxFailures: FailureThreshold?
    let maxConsecutiveFailures: Int?

    struct Result {
        /// Why a line station stopped claiming by itself (idle), for the run's summary.
        var note: String?
    }

    /// Runs the plan's devices to run (`run` and `confirm` decisions), in its order, read from the plan
    /// as they start (no second list of 100,000 devices beside it).
    func run(_ entries: [ResumePlan.Entry]) async -> Result {
        let result = Result()
        // The failure threshold watches this run: outcomes carried over from a resumed journal are the
        // past (the fixture may have been fixed since).
        var tally = Tally(threshold: maxFailures, maxConsecutive: maxConsecutiveFailures)
        // Each device runs in one task (the stop coordinator cuts it by cancelling it) that hands its
        // record to `wakes` as it ends: no second task per device to await it.
        let wakes = Wakes()
        var next = 0
        var running = 0

        /// The next entry to run, from `next` on (nil when none is left).
        func nextToRun() -> (device: InventoryDevice, attempt: Int, resumed: Bool, reconcile: Int?)? {
            while next < entries.count {
                let e = entries[next]
                switch e.decision {
                case .run(let attempt, let resumed): return (e.device, attempt, resumed, nil)
                case .confirm(let attempt, let step): return (e.device, attempt, true, step)
                case .carryOver, .needsReview: next += 1
                }
            }
            return nil
        }

        func startNext() -> Bool {
            guard !stopper.isStopping, let (device, attempt, resumed, reconcile) = nextToRun() else { return false }
            next += 1
            launch(device, attempt: attempt, resumed: resumed, reconcile: reconcile, reportingTo: wakes)
            running += 1
            return true
        }

        while running < concurrency, startNext() {}
        while running > 0 {
            guard case .finished(let id, let finishedRecord) = await wakes.next() else { continue }
            running -= 1
            // Stopping the line only means something while devices wait their turn.
            finished(id, finishedRecord, &tally, waiting: nextToRun() != nil)
            while running < concurrency, startNext() {}
        }
        return result
    }

    // MARK: One device

    /// Starts one device in its own task: its start journaled, its agent run, its outcome made durable
    /// before it counts as done (concurrent devices share one fsync). The task hands its record (nil
    /// when the start could not be journaled) to `wakes` as it ends. `reconcile`: the irreversible step
    /// in doubt whose `confirm` read comes first (`StepSupervisor`).
    func launch(_ device: InventoryDevice, attempt: Int, resumed: Bool, reconcile: Int?, reportingTo wakes: Wakes) {
        let context = self.context
        let task = Task<Void, Never> {
            wakes.finished(device.id, await Self.run(device, attempt: attempt, resumed: resumed, reconcile: reconcile, context: context))
        }
        stopper.started(device.id, task)
    }

    /// One device: its start journaled, its agent run, its outcome made durable (a journal that fails
    /// stops the run: `RunJournal`). Nil when the start could not be journaled (the device is not started).
    private static func run(_ device: InventoryDevice, attempt: Int, resumed: Bool, reconcile: Int?, context: RunContext) async -> DeviceRecord? {
        do { try await context.journal.started(device: device.id, attempt: attempt) } catch { return nil }
        context.events.emit(.deviceStarted(device: device.id, attempt: attempt))
        var record = await DeviceAgent(device: device, context: context, attemptNumber: attempt, resumed: resumed, reconcile: reconcile).run()
        if context.reached.wasCut(device.id) {
            // Stopped before anything was sent to it: as far as the device goes it never started (a resume runs it).
            record = DeviceRecord(id: device.id, address: device.address?.description, name: device.name, outcome: .skipped,
                                  attempts: attempt, skipReason: "not started: the run stopped before anything was sent to it")
        }
        record.station = context.station
        // Durable before the device counts as done; concurrent devices share one fsync. Then to the
        // report's records (encoded here, on the device's task).
        let json = await context.journal.outcome(record)
        context.report.add(record, compact: json)
        return record
    }

    /// The failures of this run, for the failure thresholds.
    typealias Tally = FailureWatch

    /// A device ended: its record kept, its event emitted, the threshold checked (when devices still
    /// `waiting` could be spared by stopping). A device whose start could not be journaled has no record.
    func finished(_ id: String, _ finishedRecord: DeviceRecord?, _ tally: inout Tally, waiting: Bool) {
        stopper.finished(id)
        guard let record = finishedRecord else { return }
        context.events.emit(.deviceFinished(RunEvent.DeviceFinished(device: record.id, outcome: record.outcome, durationMs: record.durationMs,
                                                                    error: record.error, adapter: record.adapter, record: record)))
        if let stop = tally.record(outcome: record.outcome, kind: record.error?.kind), waiting {
            stopper.beginStop(StopInfo(reason: .failureThreshold, message: stop))
        }
    }
}

/// What wakes a scheduler: a device ended (with its record, nil when it never started), or a tick
/// (time to claim again). Taken one at a time, in the order they came. Waiting does not end on
/// cancellation: the scheduler takes every device it started (in-flight devices are cut through their
/// own tasks).
final class Wakes: Sendable {
    enum Wake: Sendable {
        case finished(String, DeviceRecord?)
        case tick
    }

    private struct State {
        var queued: [Wake] = []
        var head = 0
        var waiter: CheckedContinuation<Wake, Never>?
    }

    private let state = Mutex(State())

    func finished(_ id: String, _ record: DeviceRecord?) { add(.finished(id, record)) }

    func tick() { add(.tick) }

    private func add(_ wake: Wake) {
        let waiter = state.withLock { s -> CheckedContinuation<Wake, Never>? in
            if let w = s.waiter {
                s.waiter = nil
                return w
            }
            s.queued.append(wake)
            return nil
        }
        waiter?.resume(returning: wake)
    }

    /// The next wake (waits for one).
    func next() async -> Wake {
        await withCheckedContinuation { (c: CheckedContinuation<Wake, Never>) in
            let ready: Wake? = state.withLock { s in
                guard s.head < s.queued.count else {
                    s.waiter = c
                    return nil
                }
                let e = s.queued[s.head]
                s.head += 1
                if s.head == s.queued.count {
                    s.queued.removeAll(keepingCapacity: true)
                    s.head = 0
                }
                return e
            }
            if let ready { c.resume(returning: ready) }
        }
    }
}
