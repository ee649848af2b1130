import Synchronization
import Workflow

/// Scheduling: runs the plan's devices under bounded concurrency, each in its own `DeviceAgent`;
/// journals each start and outcome; stops starting devices when the stop coordinator says so — after
/// an operator's stop, when the failure threshold is crossed while devices are still waiting, or when
/// the journal cannot be written (in-flight devices then end as they can: an irreversible write whose
/// intent cannot be made durable is not sent).
struct RunScheduler {
    let context: RunContext
    let stopper: StopCoordinator
    let concurrency: Int
    let maxFailures: FailureThreshold?

    struct Result {
        /// The devices that started, by id.
        var records: [String: DeviceRecord] = [:]
        /// Set when the journal failed during the run.
        var journalError: String?
    }

    func run(_ devices: [(device: InventoryDevice, attempt: Int, resumed: Bool)]) async -> Result {
        var result = Result()
        // The failure threshold watches this run: outcomes carried over from a resumed journal are the
        // past (the fixture may have been fixed since).
        var failures = 0
        var finished = 0
        let context = self.context
        let stopper = self.stopper
        // Each device runs in one task (the stop coordinator cuts it by cancelling it) that hands its
        // record to `finishedDevices` as it ends: no second task per device to await it.
        let finishedDevices = Finished()
        var next = 0
        var running = 0

        func startNext() -> Bool {
            guard !stopper.isStopping, next < devices.count else { return false }
            let (device, attempt, resumed) = devices[next]
            next += 1
            let task = Task<DeviceRecord?, Never> {
                let record = await Self.run(device, attempt: attempt, resumed: resumed, context: context)
                finishedDevices.add(device.id, record)
                return record
            }
            stopper.started(device.id, task)
            running += 1
            return true
        }

        while running < concurrency, startNext() {}
        while running > 0 {
            let (id, finishedRecord) = await finishedDevices.next()
            running -= 1
            stopper.finished(id)
            guard var record = finishedRecord else {
                journalFailed("a device's start could not be journaled", &result)
                while running < concurrency, startNext() {}
                continue
            }
            if let error = record.journalError {
                record.journalError = nil
                journalFailed(error, &result)
            }
            result.records[record.id] = record
            context.events.emit(RunEvent(.deviceFinished, device: record.id, outcome: record.outcome.rawValue, durationMs: record.durationMs,
                                         error: record.error, adapter: record.adapter))
            if record.outcome == .failed { failures += 1 }
            if record.outcome == .failed || record.outcome == .succeeded { finished += 1 }
            // Stopping the line only means something while devices wait their turn.
            if let threshold = maxFailures, next < devices.count, threshold.crossed(failures: failures, finished: finished) {
                stopper.beginStop(StopInfo(reason: "failure_threshold", message: "line stopped: \(failures) of \(finished) finished devices failed (threshold \(threshold)); a fixture or adapter problem is suspected", at: WallClock.iso(WallClock.now())))
            }
            while running < concurrency, startNext() {}
        }
        return result
    }

    /// One device: its start journaled, its agent run, its outcome made durable. Nil when the start
    /// could not be journaled (the device is not started: the journal failed).
    private static func run(_ device: InventoryDevice, attempt: Int, resumed: Bool, context: RunContext) async -> DeviceRecord? {
        do { try await context.store.started(device: device.id, attempt: attempt) } catch { return nil }
        context.events.emit(RunEvent(.deviceStarted, device: device.id, attempt: attempt))
        let agent = DeviceAgent(device: device, context: context, attemptNumber: attempt, resumed: resumed)
        var record = await agent.run()
        // Durable before the device counts as done; concurrent devices share one fsync.
        do {
            try await context.store.outcome(record)
        } catch {
            record.journalError = "\(error)"
        }
        return record
    }

    /// The journal cannot be written: no new device starts; in-flight ones end as they can.
    private func journalFailed(_ error: String, _ result: inout Result) {
        if result.journalError == nil { result.journalError = error }
        stopper.beginStop(StopInfo(reason: "journal_failed",
                                   message: "the journal could not be written (\(error)); no new devices; in-flight devices end without sending irreversible writes",
                                   at: WallClock.iso(WallClock.now())))
    }
}

/// Devices that ended, in the order they ended, for the scheduler to take one at a time. Waiting does
/// not end on cancellation: the scheduler takes every device it started (in-flight devices are cut
/// through their own tasks).
private final class Finished: Sendable {
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
