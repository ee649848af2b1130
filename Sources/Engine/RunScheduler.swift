import Synchronization
import Workflow

/// Scheduling: runs the plan's devices under bounded concurrency, each in its own `DeviceAgent`;
/// journals each start and outcome; stops starting devices when the stop coordinator says so — after
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
        /// The devices that started, by id.
        var records: [String: DeviceRecord] = [:]
        /// The order they started in.
        var started: [String] = []
        /// Set when the journal failed during the run.
        var journalError: String?
        /// Why a line station stopped claiming by itself (idle), for the run's summary.
        var note: String?
    }

    func run(_ devices: [(device: InventoryDevice, attempt: Int, resumed: Bool)]) async -> Result {
        var result = Result()
        // The failure threshold watches this run: outcomes carried over from a resumed journal are the
        // past (the fixture may have been fixed since).
        var tally = Tally(threshold: maxFailures, maxConsecutive: maxConsecutiveFailures)
        // Each device runs in one task (the stop coordinator cuts it by cancelling it) that hands its
        // record to `finishedDevices` as it ends: no second task per device to await it.
        let finishedDevices = FinishedDevices()
        var next = 0
        var running = 0

        func startNext() -> Bool {
            guard !stopper.isStopping, next < devices.count else { return false }
            let (device, attempt, resumed) = devices[next]
            next += 1
            _ = launch(device, attempt: attempt, resumed: resumed, reportingTo: finishedDevices)
            result.started.append(device.id)
            running += 1
            return true
        }

        while running < concurrency, startNext() {}
        while running > 0 {
            let (id, finishedRecord) = await finishedDevices.next()
            running -= 1
            // Stopping the line only means something while devices wait their turn.
            finished(id, finishedRecord, &result, &tally, waiting: next < devices.count)
            while running < concurrency, startNext() {}
        }
        return result
    }

    // MARK: One device

    /// Starts one device: its start journaled, its agent run, its outcome made durable before it counts
    /// as done (concurrent devices share one fsync). Nil when the start could not be journaled. With
    /// `queue`, the task also hands its record there as it ends.
    func launch(_ device: InventoryDevice, attempt: Int, resumed: Bool, reportingTo queue: FinishedDevices? = nil) -> Task<DeviceRecord?, Never> {
        let context = self.context
        let task = Task<DeviceRecord?, Never> {
            let record = await Self.run(device, attempt: attempt, resumed: resumed, context: context)
            queue?.add(device.id, record)
            return record
        }
        stopper.started(device.id, task)
        return task
    }

    /// One device: its start journaled, its agent run, its outcome made durable. Nil when the start
    /// could not be journaled (the device is not started: the journal failed).
    private static func run(_ device: InventoryDevice, attempt: Int, resumed: Bool, context: RunContext) async -> DeviceRecord? {
        do { try await context.store.started(device: device.id, attempt: attempt) } catch { return nil }
        context.events.emit(RunEvent(.deviceStarted, device: device.id, attempt: attempt))
        let agent = DeviceAgent(device: device, context: context, attemptNumber: attempt, resumed: resumed)
        var record = await agent.run()
        record.station = context.station
        // Durable before the device counts as done; concurrent devices share one fsync.
        do {
            try await context.store.outcome(record)
        } catch {
            record.journalError = "\(error)"
        }
        return record
    }

    /// The failures of this run, for the failure thresholds.
    typealias Tally = FailureWatch

    /// A device ended: its record kept, its event emitted, the threshold checked (when devices still
    /// `waiting` could be spared by stopping).
    func finished(_ id: String, _ finishedRecord: DeviceRecord?, _ result: inout Result, _ tally: inout Tally, waiting: Bool) {
        stopper.finished(id)
        guard var record = finishedRecord else {
            journalFailed("a device's start could not be journaled", &result)
            return
        }
        if let error = record.journalError {
            record.journalError = nil
            journalFailed(error, &result)
        }
        result.records[record.id] = record
        context.events.emit(RunEvent(.deviceFinished, device: record.id, outcome: record.outcome.rawValue, durationMs: record.durationMs,
                                     error: record.error, adapter: record.adapter))
        if let stop = tally.record(outcome: record.outcome, kind: record.error?.kind), waiting {
            stopper.beginStop(StopInfo(reason: "failure_threshold", message: stop, at: WallClock.iso(WallClock.now())))
        }
    }

    /// The journal cannot be written: no new device starts; in-flight ones end as they can.
    func journalFailed(_ error: String, _ result: inout Result) {
        if result.journalError == nil { result.journalError = error }
        stopper.beginStop(StopInfo(reason: "journal_failed",
                                   message: "the journal could not be written (\(error)); no new devices; in-flight devices end without sending irreversible writes",
                                   at: WallClock.iso(WallClock.now())))
    }
}

/// Devices that ended, in the order they ended, for the scheduler to take one at a time. Waiting does
/// not end on cancellation: the scheduler takes every device it started (in-flight devices are cut
/// through their own tasks).
final class FinishedDevices: Sendable {
    private struct State {
        var ended: [(id: String, record: DeviceRecord?)] = []
        var head = 0
        var waiter: CheckedContinuation<(id: String, record: DeviceRecord?), Never>?
    }

    private let state = Mutex(State())

    func add(_ id: String, _ record: DeviceRecord?) {
        let waiter = state.withLock { s -> CheckedContinuation<(id: String, record: DeviceRecord?), Never>? in
            if let w = s.waiter {
                s.waiter = nil
                return w
            }
            s.ended.append((id, record))
            return nil
        }
        waiter?.resume(returning: (id, record))
    }

    /// The next device that ended (waits for one).
    func next() async -> (id: String, record: DeviceRecord?) {
        await withCheckedContinuation { (c: CheckedContinuation<(id: String, record: DeviceRecord?), Never>) in
            let ready: (id: String, record: DeviceRecord?)? = state.withLock { s in
                guard s.head < s.ended.count else {
                    s.waiter = c
                    return nil
                }
                let e = s.ended[s.head]
                s.head += 1
                if s.head == s.ended.count {
                    s.ended.removeAll(keepingCapacity: true)
                    s.head = 0
                }
                return e
            }
            if let ready { c.resume(returning: ready) }
        }
    }
}
