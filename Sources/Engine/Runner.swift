import BLE
import Foundation
import Synchronization
import SystemIO
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

/// Everything a run needs besides the workflow, the devices, the adapters and the store.
public struct RunOptions: Sendable {
    public var concurrency: Int = 16
    /// Connection slots per adapter (default: each adapter's own limit).
    public var slotsPerAdapter: Int?
    public var reportPath: String
    public var junitPath: String?
    /// On resume, also run again devices that failed before.
    public var retryFailed: Bool = false
    /// With `resume`: devices recorded `needs_review` to ask again with their step's `confirm` read
    /// (`provision review --reread`).
    public var recheck: Set<String> = []
    public var maxFailures: FailureThreshold?
    /// Stop the line after this many failures in a row (any kind).
    public var maxConsecutiveFailures: Int?
    public var seed: UInt64 = 1
    /// How long in-flight devices may run on after a first stop request before they are cut.
    public var stopGrace: Duration = .seconds(30)
    public var attTimeout: Duration = .seconds(30)
    public var toolVersion: String = "dev"
    public var station: String = ProcessInfo.processInfo.hostName
    /// The command-line options, as the report shows them.
    public var reportOptions: [String: String] = [:]
    /// The run's metadata from the command line (`--meta KEY=VALUE`), over the inventory's `meta:`.
    public var meta: [String: String] = [:]

    public init(reportPath: String) {
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
    /// The one writer of the run's record.
    let journal: RunJournal
    /// Where finished devices' records go, for the report.
    let report: ReportStream
    let events: EventBus
    let attTimeout: Duration
    /// Every service the workflow names (targeted discovery).
    let servicesUsed: [BluetoothUUID]
    let fullDiscovery: Bool
    let allowUndeclared: Bool
    /// GATT layouts shared by the run's sessions (a later device of one layout skips discovery).
    let gattCache = GATTCache()
    /// What every device's machine shares: the steps and what the supervisor knows of them.
    let plan: DeviceMachine.Plan
    /// The executor of each step, by step index.
    let executors: [any StepExecutor]
    /// Actions of checked steps (a `dfu`'s test, reset, confirm) earlier runs journaled, per device and step.
    let journaledActions: [String: [Int: Set<String>]]
    /// Why a device was cut on its own (not by a stop): its record says so instead of "cut while stopping".
    private let cutReasons = Mutex<[String: String]>([:])
    /// The station's name, on every record.
    let station: String

    init(workflow: Workflow, inventory: Inventory, adapters: AdapterPool, journal: RunJournal, report: ReportStream, events: EventBus,
         options: RunOptions, executors: [any StepExecutor], reached: ReachedDevices = ReachedDevices(),
         journaledActions: [String: [Int: Set<String>]] = [:]) {
        self.reached = reached
        self.journaledActions = journaledActions
        self.station = options.station
        self.workflow = workflow
        // Secrets declared in the workflow are hidden like the inventory's.
        self.inventory = inventory.withSecrets(of: workflow)
        self.adapters = adapters
        self.journal = journal
        self.report = report
        self.events = events
        self.attTimeout = options.attTimeout
        self.servicesUsed = workflow.usedServices
        self.fullDiscovery = workflow.steps.contains { if case .discover(let d) = $0.kind { return d.all } else { return false } }
        self.allowUndeclared = workflow.steps.contains { if case .subscribe(let s) = $0.kind { return s.allowUndeclared } else { return false } }
        self.plan = DeviceMachine.Plan(workflow: workflow, secretNames: inventory.secrets.union(workflow.secretNames),
                                       adapterCount: adapters.adapters.count, seed: options.seed, emits: events.isListening)
        self.executors = executors
    }

    /// Which devices have connected, and which a stop cut before they did (shared with the stop coordinator).
    let reached: ReachedDevices

    /// Records why a device is about to be cut (before its task is cancelled).
    func noteCut(_ device: String, _ reason: String) {
        cutReasons.withLock { $0[device] = reason }
    }

    /// Why a device was cut, if it was cut on its own.
    func cutReason(_ device: String) -> String? {
        cutReasons.withLock { $0.isEmpty ? nil : $0[device] }
    }
}

/// Runs a workflow over devices, in four pieces: planning (`ResumePlan`, from the store's record of
/// earlier runs), scheduling (`RunScheduler`: bounded concurrency, per-adapter slots, the journal),
/// stopping (`StopCoordinator`: Ctrl-C, the failure threshold, a failed journal) and reporting (the
/// report and JUnit, written even when the journal failed).
public enum Runner {
    /// Why a run could not start (nothing was touched).
    public struct StartError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// The journal could not be written during the run: the run stopped early (no new devices; in-flight
    /// ones ended without sending irreversible writes). The journal stays resumable.
    public struct JournalFailure: Error, Sendable, CustomStringConvertible {
        public var error: String
        public var journal: String
        /// The run's report (its metadata and summary), when it could be written.
        public var report: RunResult?
        public var reportPath: String
        /// Why the report could not be written, if it could not.
        public var reportError: String?

        public var description: String {
            "the journal \(journal) could not be written (\(error)): the run stopped early; no device was started after that and "
                + "no irreversible write was sent without its intent on disk; "
                + (reportError.map { "the report could not be written either (\($0)); " } ?? "report: \(reportPath); ")
                + "make room and resume with --resume \(journal)"
        }
    }

    /// Runs `workflow` over `devices` on the adapters, recording into `opened` — a store the caller
    /// opened for this run and closes after it (the runner never opens or closes a store). The report
    /// (and JUnit) is written, streamed, even when the journal failed; then `JournalFailure` is thrown.
    /// Returns the report's metadata and summary (its devices are in the report file). `hooks`: work done
    /// beside the run for each finished device (one of `events`' sinks): waited for before the report is
    /// written, which records what it did.
    public static func run(workflow: Workflow, inventory: Inventory, devices: [InventoryDevice], adapters centrals: [any Central],
                           store opened: OpenedRunStore, options: RunOptions, events: EventBus = EventBus(),
                           controller: RunController = RunController(), monitor: RunMonitor? = nil,
                           hooks: (any DeviceHooks)? = nil, executors: StepExecutors = .standard) async throws -> RunResult {
        let clock = ContinuousClock()
        let wallStart = clock.now
        let startedAt = WallTime.now()
        let workflowRef = FileRef(name: workflow.name, path: workflow.path, sha256: workflow.sha256)
        let inventoryRef = FileRef(path: inventory.path, sha256: inventory.sha256)
        let store = opened.store
        let missing = executors.missing(in: workflow.steps)
        guard missing.isEmpty else {
            throw StartError(description: "no step executor for \(missing.map { "`\($0)`" }.joined(separator: ", ")) in this run")
        }

        // Planning.
        let reached = ReachedDevices()
        let stopper = StopCoordinator(events: events, grace: options.stopGrace, reached: reached)
        let journal = RunJournal(store: store) { error in
            stopper.beginStop(StopInfo(reason: .journalFailed,
                                       message: "the journal could not be written (\(error)); no new devices; in-flight devices end without sending irreversible writes"))
        }
        if let repair = opened.contents.repair { events.emit(.journalRepaired(message: repair)) }
        let plan = try Self.plan(workflow: workflow, workflowRef: workflowRef, inventory: inventory, inventoryRef: inventoryRef,
                                 devices: devices, opened: opened, options: options)
        // A line's run id is the line's (every station joins the same run).
        let runID = plan.runID ?? store.claims?.runID ?? makeRunID()
        do {
            try await journal.header(JournalHeader(runId: runID, workflow: workflowRef, inventory: inventoryRef, adapters: centrals.map(\.id),
                                                   options: options.reportOptions, started: startedAt, toolVersion: options.toolVersion,
                                                   resumed: plan.resumed, selected: plan.selected))
            // The new needs-review outcomes, together: they share their fsyncs.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for entry in plan.entries {
                    if case .needsReview(let r) = entry.decision { group.addTask { try await journal.review(r) } }
                }
                try await group.waitForAll()
            }
        } catch {
            throw StartError(description: "cannot write journal \(store.location): \(error)")
        }

        // The report's records go to disk as devices end (memory stays bounded by one record).
        let station = RunInfo(id: runID, workflow: workflowRef, inventory: inventoryRef, adapters: [], simulated: false,
                              station: options.station, toolVersion: options.toolVersion, options: options.reportOptions, started: startedAt,
                              meta: inventory.meta.merging(options.meta) { _, given in given }, checksums: workflow.checksumWidths)
        let report: ReportStream
        do {
            report = try ReportStream(reportPath: options.reportPath, junitPath: options.junitPath, run: station)
        } catch {
            throw StartError(description: "cannot write the report: \(error)")
        }

        // Scheduling, with stopping.
        let pool = AdapterPool(centrals: centrals, slotsPerAdapter: options.slotsPerAdapter)
        monitor?.attach(pool)
        let context = RunContext(workflow: workflow, inventory: inventory, adapters: pool, journal: journal, report: report, events: events,
                                 options: options, executors: workflow.steps.compactMap { executors.executor(for: $0.kind) }, reached: reached,
                                 journaledActions: plan.journaledActions)
        events.emit(.runStarted(workflow: workflow.name, total: plan.entries.count))
        await pool.startScanning()
        stopper.follow(controller)
        let scheduler = RunScheduler(context: context, stopper: stopper, concurrency: max(1, options.concurrency),
                                     maxFailures: options.maxFailures, maxConsecutiveFailures: options.maxConsecutiveFailures)
        let scheduled: RunScheduler.Result
        if let claims = store.claims {
            scheduled = await scheduler.runClaiming(plan.toRun.map(\.device), claims: claims, whole: plan.selected == nil)
        } else {
            scheduled = await scheduler.run(plan.entries)
        }
        stopper.cancelGraceTimer()
        await pool.stop()
        // The run's time is its devices': the hooks of those that finished run on beside it, and are
        // waited for here (a stop requested meanwhile is the run's, and recorded).
        let finishedAt = WallTime.now()
        let wall = clock.now - wallStart
        let onDevice = await hooks?.settle()

        // Reporting.
        let stop = stopper.info
        await journal.end(stopped: stop)
        var adapterInfo: [AdapterInfo] = []
        for a in pool.adapters {
            let hubFailure = await a.hub.failure
            adapterInfo.append(AdapterInfo(id: a.id, simulated: a.central.isSimulated, slots: a.slots.capacity,
                                           failure: a.failure.withLock { $0 } ?? hubFailure ?? a.central.outage, peakLinks: a.slots.usage.peak,
                                           identity: a.central.stationIdentity?.description))
        }
        let info = RunInfo(id: runID, workflow: workflowRef, inventory: inventoryRef, adapters: adapterInfo,
                           simulated: centrals.contains { $0.isSimulated }, station: options.station, toolVersion: options.toolVersion,
                           options: options.reportOptions, started: startedAt, finished: finishedAt, journal: store.location,
                           resumed: plan.resumed, stopped: stop, peakConcurrency: stopper.peakInFlight,
                           captureTypes: workflow.captureTypes, meta: inventory.meta.merging(options.meta) { _, given in given }, checksums: workflow.checksumWidths,
                           onDevice: onDevice)
        // A line station reports the devices it worked; the line's merged report has the others.
        let items = store.claims == nil ? Self.items(plan, report, stop) : plan.entries.compactMap { report.ran($0.device.id) ? .ran($0.device.id) : nil }
        let written = await report.finish(items, info: info, wall: wall)
        let result = RunResult(run: info, summary: written.summary, notSucceeded: written.notSucceeded)
        events.emit(.runFinished(message: result.summary.sentence + (stop.map { "; stopped: \($0.message)" } ?? "")
                                     + (scheduled.note.map { "; \($0)" } ?? ""),
                                 total: result.summary.total))
        await events.finish()
        if let journalError = journal.failed {
            throw JournalFailure(error: journalError, journal: store.location, report: written.error == nil ? result : nil,
                                 reportPath: options.reportPath, reportError: written.error)
        }
        if let reportError = written.error { throw StartError(description: "cannot write the report: \(reportError)") }
        return result
    }

    /// Planning: what the store holds (for a resume) and what happens to each device.
    static func plan(workflow: Workflow, workflowRef: FileRef, inventory: Inventory, inventoryRef: FileRef, devices: [InventoryDevice],
                     opened: OpenedRunStore, options: RunOptions) throws(StartError) -> ResumePlan {
        let journal = opened.mode == .resume ? JournalState(lines: opened.contents.lines) : nil
        var irreversible: [Int: String] = [:]
        for (i, step) in workflow.steps.enumerated() where step.irreversible { irreversible[i] = step.name }
        let confirmable = Set(workflow.confirmableSteps)
        var inputs = ResumePlan.Inputs(workflow: workflowRef, inventory: inventoryRef, inventoryDevices: inventory.devices,
                                       selection: devices, irreversibleSteps: irreversible, confirmable: confirmable,
                                       retryFailed: options.retryFailed)
        inputs.recheck = options.recheck
        do {
            return try ResumePlan.make(inputs, journal: journal)
        } catch {
            throw StartError(description: "cannot resume: \(error.description)")
        }
    }

    /// One report item per planned device, in order: its run, its carried-over or needs-review outcome,
    /// or `skipped` (never started: not journaled, so a resume runs it).
    static func items(_ plan: ResumePlan, _ report: ReportStream, _ stop: StopInfo?) -> [ReportStream.Item] {
        plan.entries.map { e in
            switch e.decision {
            case .carryOver(let r), .needsReview(let r):
                return .record(r)
            case .run, .confirm:
                if report.ran(e.device.id) { return .ran(e.device.id) }
                return .record(DeviceRecord(id: e.device.id, address: e.device.address?.description, name: e.device.name, outcome: .skipped,
                                            skipReason: stop.map { "not started: \($0.message)" } ?? "not started"))
            }
        }
    }

    static func makeRunID() -> String {
        var g = SystemRandomNumberGenerator()
        let stamp = WallTime.now().iso.filter { $0 != ":" && $0 != "-" }
        return "run-\(stamp.prefix(15))-\(String(g.next() & 0xFFFFFF, radix: 16))"
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

/// What a run leaves for the command line: the report's metadata and summary, and the devices that
/// did not succeed (the report file has every device; a run's records are never all in memory).
public struct RunResult: Sendable, Equatable {
    public var run: RunInfo
    public var summary: Summary
    /// The devices that did not succeed, in plan order (for the retry file).
    public var notSucceeded: [DeviceBrief]

    public init(run: RunInfo, summary: Summary, notSucceeded: [DeviceBrief]) {
        self.run = run
        self.summary = summary
        self.notSucceeded = notSucceeded
    }
}
