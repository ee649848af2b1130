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
        await withTaskGroup(of: (id: String, record: DeviceRecord?).self) { group in
            var next = 0
            var running = 0

            func startNext() -> Bool {
                guard !stopper.isStopping, next < devices.count else { return false }
                let (device, attempt, resumed) = devices[next]
                next += 1
                let task = Task<DeviceRecord?, Never> {
                    // A device whose start cannot be journaled is not started (the journal failed).
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
                stopper.started(device.id, task)
                group.addTask { (device.id, await task.value) }
                running += 1
                return true
            }

            while running < concurrency, startNext() {}
            while let (id, finishedRecord) = await group.next() {
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
        }
        return result
    }

    /// The journal cannot be written: no new device starts; in-flight ones end as they can.
    private func journalFailed(_ error: String, _ result: inout Result) {
        if result.journalError == nil { result.journalError = error }
        stopper.beginStop(StopInfo(reason: "journal_failed",
                                   message: "the journal could not be written (\(error)); no new devices; in-flight devices end without sending irreversible writes",
                                   at: WallClock.iso(WallClock.now())))
    }
}
