import BLE
import Foundation
import Synchronization
import Workflow

/// When to stop the line: after `count` failures, or when failures reach `percent` of finished devices
/// (checked once at least `minimumSample` devices have finished).
public enum FailureThreshold: Sendable, Equatable, CustomStringConvertible {
    case count(Int)
    case percent(Double, minimumSample: Int)

    /// Parses `5` or `10%`.
    public init?(_ text: String) {
        if text.hasSuffix("%"), let p = Double(text.dropLast()), p > 0, p <= 100 {
            self = .percent(p, minimumSample: 10)
        } else if let n = Int(text), n > 0 {
            self = .count(n)
        } else {
            return nil
        }
    }

    func crossed(failures: Int, finished: Int) -> Bool {
        switch self {
        case .count(let n): return failures >= n
        case .percent(let p, let sample): return finished >= sample && Double(failures) * 100 >= p * Double(finished)
        }
    }

    public var description: String {
        switch self {
        case .count(let n): return "\(n) failure(s)"
        case .percent(let p, _): return p == p.rounded() ? "\(Int(p))% failures" : "\(p)% failures"
        }
    }
}

/// Everything a run needs besides the workflow and the devices.
public struct RunOptions: Sendable {
    public var concurrency: Int = 16
    /// Connection slots per adapter (default: each adapter's own limit).
    public var slotsPerAdapter: Int?
    public var journalPath: String
    public var reportPath: String
    public var junitPath: String?
    /// Resume from the journal at `journalPath` (which must exist).
    public var resume: Bool = false
    /// On resume, also run again devices that failed before.
    public var retryFailed: Bool = false
    public var maxFailures: FailureThreshold?
    public var seed: UInt64 = 1
    /// How long in-flight devices may run on after a first stop request before they are cut.
    public var stopGrace: Duration = .seconds(30)
    public var fsync: Bool = true
    public var attTimeout: Duration = .seconds(30)
    public var toolVersion: String = "dev"
    public var station: String = ProcessInfo.processInfo.hostName
    /// The command-line options, as the report shows them.
    public var reportOptions: [String: String] = [:]

    public init(journalPath: String, reportPath: String) {
        self.journalPath = journalPath
        self.reportPath = reportPath
    }
}

/// Lets the outside stop a run: the first request stops starting devices and lets in-flight ones finish
/// (for up to `stopGrace`); the second cuts them.
public final class RunController: Sendable {
    private let state = Mutex<(requests: Int, handlers: [@Sendable (Int) -> Void])>((0, []))

    public init() {}

    /// Returns how many stop requests there have been, this one included.
    @discardableResult
    public func requestStop() -> Int {
        let (n, handlers) = state.withLock { s -> (Int, [@Sendable (Int) -> Void]) in
            s.requests += 1
            return (s.requests, s.handlers)
        }
        for h in handlers { h(n) }
        return n
    }

    public var stopRequests: Int { state.withLock { $0.requests } }

    func onStop(_ handler: @escaping @Sendable (Int) -> Void) {
        let n = state.withLock { s -> Int in
            s.handlers.append(handler)
            return s.requests
        }
        if n > 0 { handler(n) }
    }
}

/// Shared, read-mostly state of one run, handed to every device agent.
final class RunContext: Sendable {
    let workflow: Workflow
    let inventory: Inventory
    let adapters: AdapterPool
    let journal: Journal
    let events: EventBus
    let seed: UInt64
    let attTimeout: Duration
    /// Every service the workflow names (targeted discovery).
    let servicesUsed: [BluetoothUUID]
    let fullDiscovery: Bool
    let allowUndeclared: Bool
    /// GATT layouts shared by the run's sessions (a later device of one layout skips discovery).
    let gattCache = GATTCache()

    init(workflow: Workflow, inventory: Inventory, adapters: AdapterPool, journal: Journal, events: EventBus, options: RunOptions) {
        self.workflow = workflow
        self.inventory = inventory
        self.adapters = adapters
        self.journal = journal
        self.events = events
        self.seed = options.seed
        self.attTimeout = options.attTimeout
        self.servicesUsed = workflow.usedServices
        self.fullDiscovery = workflow.steps.contains { if case .discover(let d) = $0.kind { return d.all } else { return false } }
        self.allowUndeclared = workflow.steps.contains { if case .subscribe(let s) = $0.kind { return s.allowUndeclared } else { return false } }
    }

    func recordIntent(device: String, step: String, index: Int) async throws {
        try await journal.append(JournalLine(type: "intent", at: WallClock.iso(WallClock.now()), device: device, step: step, stepIndex: index),
                                 durable: true)
    }
}

/// Runs a workflow over devices: bounded concurrency, per-adapter slots, journal, stop the line,
/// graceful and hard stop, and the report at the end.
public enum Runner {
    /// Why a run could not start.
    public struct StartError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    public static func run(workflow: Workflow, inventory: Inventory, devices: [InventoryDevice], adapters centrals: [any Central],
                           options: RunOptions, events: EventBus = EventBus(), controller: RunController = RunController(),
                           monitor: RunMonitor? = nil) async throws -> RunReport {
        let clock = ContinuousClock()
        let wallStart = clock.now
        let startedAt = WallClock.iso(WallClock.now())
        let workflowRef = FileRef(name: workflow.name, path: workflow.path, sha256: workflow.sha256)
        let inventoryRef = FileRef(path: inventory.path, sha256: inventory.sha256)

        // Resume: read what the journal knows and refuse a journal of another workflow or inventory.
        var previous: JournalState?
        if options.resume {
            let state: JournalState
            do {
                state = try JournalState.read(path: options.journalPath)
            } catch {
                throw StartError(description: "cannot resume: \(error)")
            }
            guard let first = state.headers.first else { throw StartError(description: "cannot resume: journal has no header") }
            if first.workflow.sha256 != workflow.sha256 {
                throw StartError(description: "cannot resume: the journal was written for workflow \(first.workflow.path) with sha256 \(first.workflow.sha256.prefix(12))…, but \(workflow.path) now has sha256 \(workflow.sha256.prefix(12))… (the workflow changed; start a new run with a new journal)")
            }
            if first.inventory.sha256 != inventory.sha256 {
                throw StartError(description: "cannot resume: the journal was written for inventory \(first.inventory.path) with sha256 \(first.inventory.sha256.prefix(12))…, but \(inventory.path) now has sha256 \(inventory.sha256.prefix(12))… (the inventory changed; start a new run with a new journal)")
            }
            previous = state
        } else if FileManager.default.fileExists(atPath: options.journalPath),
                  (try? FileManager.default.attributesOfItem(atPath: options.journalPath)[.size] as? Int) ?? 0 > 0 {
            throw StartError(description: "journal \(options.journalPath) already exists; resume it with --resume \(options.journalPath), or choose another --journal path")
        }

        let journal: Journal
        do {
            journal = try Journal(path: options.journalPath, fsync: options.fsync)
        } catch {
            throw StartError(description: "cannot open journal: \(error)")
        }
        let runID = previous?.headers.first?.runId ?? makeRunID()
        let header = JournalHeader(runId: runID, workflow: workflowRef, inventory: inventoryRef, adapters: centrals.map(\.id),
                                   options: options.reportOptions, started: startedAt, toolVersion: options.toolVersion,
                                   resumed: previous != nil)
        try await journal.append(JournalLine(type: "header", at: startedAt, header: header), durable: true)

        let pool = AdapterPool(centrals: centrals, slotsPerAdapter: options.slotsPerAdapter)
        monitor?.attach(pool)
        let context = RunContext(workflow: workflow, inventory: inventory, adapters: pool, journal: journal, events: events, options: options)

        // Decide per device: carried over from the journal, needs review, or to run.
        var records: [String: DeviceRecord] = [:]
        var toRun: [(InventoryDevice, attempt: Int, resumed: Bool)] = []
        for d in devices {
            if let prev = previous {
                if let step = prev.pendingIntents[d.id] {
                    var r = DeviceRecord(id: d.id, address: d.address?.description, name: d.name, outcome: .failed,
                                         attempts: prev.starts[d.id] ?? 1,
                                         error: FailureRecord(kind: .needsReview, step: step,
                                                              message: "an earlier run stopped after sending the irreversible step `\(step)` to this device and before its outcome was known; check the device, then run it again on its own"),
                                         resumed: true)
                    r.carriedOver = nil
                    records[d.id] = r
                    try await journal.append(JournalLine(type: "outcome", at: WallClock.iso(WallClock.now()), record: r), durable: false)
                    continue
                }
                if let r = prev.outcomes[d.id], r.outcome == .failed, options.retryFailed,
                   let sent = workflow.steps.indices.first(where: { workflow.steps[$0].irreversible && $0 < r.steps.count && r.steps[$0].attempts > 0 }) {
                    // It failed after an irreversible step went out: running it again could repeat that step.
                    var carried = r
                    carried.carriedOver = true
                    carried.error = FailureRecord(kind: .needsReview, step: workflow.steps[sent].name,
                                                  message: "failed after the irreversible step `\(workflow.steps[sent].name)` was sent; not run again automatically (\(r.error?.message ?? "see the earlier report"))")
                    records[d.id] = carried
                    continue
                }
                if let r = prev.outcomes[d.id], r.outcome == .succeeded || (r.outcome == .failed && !options.retryFailed) {
                    var carried = r
                    carried.carriedOver = true
                    records[d.id] = carried
                    continue
                }
                let started = prev.starts[d.id] ?? 0
                toRun.append((d, started + 1, started > 0))
            } else {
                toRun.append((d, 1, false))
            }
        }

        events.emit(RunEvent(.runStarted, message: workflow.name, total: devices.count))
        await pool.startScanning()

        // Stop handling: graceful (no new devices, grace period), then hard (cut in-flight ones).
        let stopper = StopCoordinator(events: events, grace: options.stopGrace)
        controller.onStop { n in
            if n == 1 {
                stopper.beginStop(StopInfo(reason: "interrupted", message: "stop requested: no new devices; in-flight devices may finish for up to \(options.stopGrace)", at: WallClock.iso(WallClock.now())))
            } else {
                stopper.beginStop(StopInfo(reason: "interrupted", message: "stop requested twice: in-flight devices cut", at: WallClock.iso(WallClock.now())))
                stopper.cutAll()
            }
        }

        // The failure threshold watches this run: outcomes carried over from a resumed journal are the
        // past (the fixture may have been fixed since).
        var failures = 0
        var finished = 0
        let concurrency = max(1, options.concurrency)
        var journalError: String?

        await withTaskGroup(of: DeviceRecord.self) { group in
            var iterator = toRun.makeIterator()
            var running = 0

            func startNext() -> Bool {
                guard !stopper.isStopping, let (device, attempt, resumed) = iterator.next() else { return false }
                let task = Task<DeviceRecord, Never> {
                    do {
                        try await journal.append(JournalLine(type: "started", at: WallClock.iso(WallClock.now()), device: device.id, attempt: attempt),
                                                 durable: false)
                    } catch {
                        return DeviceRecord(id: device.id, address: device.address?.description, name: device.name, outcome: .failed,
                                            attempts: attempt, error: FailureRecord(kind: .adapterFailure, step: nil, message: "journal: \(error)"))
                    }
                    events.emit(RunEvent(.deviceStarted, device: device.id, attempt: attempt))
                    let agent = DeviceAgent(device: device, context: context, attemptNumber: attempt, resumed: resumed)
                    var record = await agent.run()
                    // Durable before the device counts as done; concurrent devices share one fsync.
                    do {
                        try await journal.append(JournalLine(type: "outcome", at: WallClock.iso(WallClock.now()), record: record), durable: true)
                    } catch {
                        record.journalError = "\(error)"
                    }
                    return record
                }
                stopper.started(device.id, task)
                group.addTask { await task.value }
                running += 1
                return true
            }

            while running < concurrency, startNext() {}
            while let record = await group.next() {
                running -= 1
                stopper.finished(record.id)
                var record = record
                if let error = record.journalError {
                    record.journalError = nil
                    journalError = error
                    stopper.cutAll()
                    stopper.beginStop(StopInfo(reason: "journal_failed", message: "the journal could not be written: \(error)", at: WallClock.iso(WallClock.now())))
                }
                records[record.id] = record
                events.emit(RunEvent(.deviceFinished, device: record.id, outcome: record.outcome.rawValue, durationMs: record.durationMs,
                                     error: record.error, adapter: record.adapter))
                if record.outcome == .failed { failures += 1 }
                if record.outcome == .failed || record.outcome == .succeeded { finished += 1 }
                if let threshold = options.maxFailures, threshold.crossed(failures: failures, finished: finished) {
                    stopper.beginStop(StopInfo(reason: "failure_threshold", message: "line stopped: \(failures) of \(finished) finished devices failed (threshold \(threshold)); a fixture or adapter problem is suspected", at: WallClock.iso(WallClock.now())))
                }
                while running < concurrency, startNext() {}
            }
        }
        stopper.cancelGraceTimer()
        await pool.stop()

        // Devices never started (stopped line, interruption): skipped, not journaled, so a resume runs them.
        let stop = stopper.info
        var ordered: [DeviceRecord] = []
        for d in devices {
            if let r = records[d.id] {
                ordered.append(r)
            } else {
                ordered.append(DeviceRecord(id: d.id, address: d.address?.description, name: d.name, outcome: .skipped,
                                            skipReason: stop.map { "not started: \($0.message)" } ?? "not started"))
            }
        }
        let finishedAt = WallClock.iso(WallClock.now())
        try? await journal.append(JournalLine(type: "end", at: finishedAt, stopped: stop), durable: true)
        if let journalError { throw StartError(description: "the journal failed during the run: \(journalError)") }

        var adapterInfo: [AdapterInfo] = []
        for a in pool.adapters {
            let hubFailure = await a.hub.failure
            adapterInfo.append(AdapterInfo(id: a.id, simulated: a.central.isSimulated, slots: a.slots.capacity,
                                           failure: a.failure.withLock { $0 } ?? hubFailure, peakLinks: a.slots.usage.peak))
        }
        let info = RunInfo(id: runID, workflow: workflowRef, inventory: inventoryRef, adapters: adapterInfo,
                           simulated: centrals.contains { $0.isSimulated }, station: options.station, toolVersion: options.toolVersion,
                           options: options.reportOptions, started: startedAt, finished: finishedAt, journal: options.journalPath,
                           resumed: previous != nil, stopped: stop, peakConcurrency: stopper.peakInFlight)
        let report = RunReport(run: info, summary: Summary.compute(ordered, wall: clock.now - wallStart), devices: ordered)
        try report.write(to: options.reportPath)
        if let junit = options.junitPath {
            try AtomicFile.write(Data(report.junitXML().utf8), to: junit)
        }
        events.emit(RunEvent(.runFinished, message: "\(report.summary.outcomes)", total: devices.count))
        await events.finish()
        return report
    }

    static func makeRunID() -> String {
        var g = SystemRandomNumberGenerator()
        let stamp = WallClock.iso(WallClock.now()).replacingOccurrences(of: ":", with: "").replacingOccurrences(of: "-", with: "")
        return "run-\(stamp.prefix(15))-\(String(g.next() & 0xFFFFFF, radix: 16))"
    }
}

/// Tracks in-flight devices and the run's stop state: a first stop stops new work and starts the grace
/// timer; when it expires, or on a second stop, every in-flight device is cut (cancelled).
final class StopCoordinator: Sendable {
    private struct State {
        var graceful = false
        var hard = false
        var info: StopInfo?
        var inflight: [String: Task<DeviceRecord, Never>] = [:]
        var peak = 0
        var graceTimer: Task<Void, Never>?
    }

    private let state = Mutex(State())
    private let events: EventBus
    private let grace: Duration

    init(events: EventBus, grace: Duration) {
        self.events = events
        self.grace = grace
    }

    var isStopping: Bool { state.withLock { $0.graceful } }
    var info: StopInfo? { state.withLock { $0.info } }
    var peakInFlight: Int { state.withLock { $0.peak } }

    func started(_ id: String, _ task: Task<DeviceRecord, Never>) {
        let cut = state.withLock { s -> Bool in
            s.inflight[id] = task
            s.peak = max(s.peak, s.inflight.count)
            return s.hard
        }
        if cut { task.cancel() }
    }

    func finished(_ id: String) {
        state.withLock { _ = $0.inflight.removeValue(forKey: id) }
    }

    func beginStop(_ info: StopInfo) {
        let first = state.withLock { s -> Bool in
            guard !s.graceful else { return false }
            s.graceful = true
            s.info = info
            return true
        }
        guard first else { return }
        events.emit(RunEvent(.stopRequested, message: info.message))
        let grace = self.grace
        let timer = Task { [weak self] in
            do { try await Task.sleep(for: grace) } catch { return }
            self?.cutAll()
        }
        state.withLock { $0.graceTimer = timer }
    }

    func cutAll() {
        let tasks = state.withLock { s -> [Task<DeviceRecord, Never>] in
            s.hard = true
            return Array(s.inflight.values)
        }
        for t in tasks { t.cancel() }
    }

    func cancelGraceTimer() {
        state.withLock { $0.graceTimer?.cancel() }
    }
}

/// A window on a run in progress, for displays: adapters' slot usage.
public final class RunMonitor: Sendable {
    private let pool = Mutex<AdapterPool?>(nil)

    public init() {}

    func attach(_ p: AdapterPool) { pool.withLock { $0 = p } }

    /// Per adapter: links held now and the slot limit.
    public func slotUsage() -> [(id: String, used: Int, capacity: Int)] {
        guard let p = pool.withLock({ $0 }) else { return [] }
        return p.adapters.map { ($0.id, $0.slots.usage.current, $0.slots.capacity) }
    }
}
