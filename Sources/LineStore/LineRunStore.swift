import AsyncSupport
import Engine
import Foundation
import LineDatabase
import PostgresClient
import Synchronization

/// The engine's run store on a line database (docs/line.md): several stations work one run, each
/// claiming devices before it connects to them (`DeviceClaims`), under leases it renews while it works.
///
/// What each journal line becomes:
/// - `open(.start)` connects, migrates the schema on first use, creates or joins the run (the same
///   workflow and inventory by sha256, or it is refused), adds the inventory's devices and registers
///   the station. A line run is never resumed with `--resume`: running the command again joins it.
/// - `intent` is committed on the line before the irreversible write may go out, and only while this
///   station's lease on the device is live (the line refuses it otherwise: the write is not sent). A
///   lost connection is retried on a new one, with backoff, for at most `intentWait`; after that the
///   intent fails and the write is not sent.
/// - `outcome` is made durable on the station's disk first — the spool beside the report, a journal
///   with group-committed fsyncs, exactly what a file journal does — and the device counts as done;
///   a background task writes it to the line at once through the station's group commit (a batch of
///   whatever arrived meanwhile is one or two transactions), or, while the line cannot be reached, as
///   soon as it is back (backoff). An outcome the line refuses (another station claimed the device
///   since) stays on record in the spool. Until its outcome is on the line the station keeps the
///   device's lease.
/// - `header` and `started` need nothing (the claim recorded the start); `end` notes why the station
///   stopped.
/// - `close` waits (at most `closeWait`) for the spool to reach the line, gives back the devices it still
///   holds, marks the station stopped and closes the connections; `unwrittenOutcomes` then says what
///   stayed in the spool (written later by `provision line flush SPOOL`).
public actor LineRunStore: RunStore, DeviceClaims {
    /// Everything a station needs to join a line.
    public struct Settings: Sendable {
        public var connectionString: ConnectionString
        public var run: LineRun
        public var station: LineStationInfo
        /// Every device of the inventory, in inventory order: the run's devices.
        public var devices: [String]
        /// Where outcomes go while the line cannot be reached.
        public var spoolPath: String
        public var policy: ClaimPolicy
        /// The lease a claim or renewal grants (renewed every third of it).
        public var lease: Duration = .seconds(30)
        /// The deadline of each database operation.
        public var timeout: Duration = .seconds(10)
        /// How long an intent waits for an unreachable line before its write is given up.
        public var intentWait: Duration = .seconds(5)
        /// How long closing waits for spooled outcomes to reach the line.
        public var closeWait: Duration = .seconds(30)
        /// Connections writing group-commit batches side by side.
        public var writers: Int = 2
        /// Ask these devices under review again, and claim nothing else (`--recheck` on a line).
        public var recheck: LineRecheck?

        public init(connectionString: ConnectionString, run: LineRun, station: LineStationInfo, devices: [String], spoolPath: String,
                    policy: ClaimPolicy = ClaimPolicy()) {
            self.connectionString = connectionString
            self.run = run
            self.station = station
            self.devices = devices
            self.spoolPath = spoolPath
            self.policy = policy
        }
    }

    public nonisolated let settings: Settings
    public nonisolated var location: String { "line \(settings.connectionString) run \(settings.run.id)" }
    public nonisolated var runID: String { settings.run.id }
    public nonisolated var claimPolicy: ClaimPolicy { settings.policy }
    /// The line is shared by stations: the scheduler claims its devices here.
    public nonisolated var claims: (any DeviceClaims)? { self }
    public nonisolated let spool: LineSpool

    /// What the devices' tasks read and change without waiting for the actor (their intents and
    /// outcomes go straight to the station and the spool).
    private struct Shared {
        var station: LineStation?
        /// The attempt of each device this station claimed, until its outcome is written (or refused).
        var attempts: [String: Int] = [:]
        /// Outcomes in the spool (or on their way into it) not written to the line yet.
        var spooled = 0
        /// The drainer, while one runs.
        var drainer: Task<Void, Never>?
        /// An outcome reached the spool while the drainer ran: it reads the spool again before it stops.
        var more = false
        var stop: StopInfo?
        /// Outcomes written to the line, and refused by it.
        var written = 0
        var refused = 0
    }

    private let shared = Mutex(Shared())
    private var renewer: Task<Void, Never>?
    private var lostHandler: (@Sendable ([String]) -> Void)?
    private var closed = false

    /// Outcomes written to the line, and refused by it (another station claimed the device since).
    public nonisolated var outcomesWritten: Int { shared.withLock { $0.written } }
    public nonisolated var outcomesRefused: Int { shared.withLock { $0.refused } }

    public init(_ settings: Settings) {
        self.settings = settings
        self.spool = LineSpool(path: settings.spoolPath,
                               header: LineSpool.Header(run: settings.run.id, station: settings.station.id,
                                                        line: settings.connectionString.description,
                                                        workflow: FileRef(name: settings.run.workflow.name, path: settings.run.workflow.path,
                                                                          sha256: settings.run.workflow.sha256),
                                                        inventory: FileRef(path: settings.run.inventory.path, sha256: settings.run.inventory.sha256)))
    }

    // MARK: RunStore

    /// Joins the line (idempotent: a station may open it before the run, to report an unreachable line
    /// or another run's workflow as such).
    public func open(_ mode: RunStoreMode) async throws -> JournalContents {
        guard mode == .start else {
            throw RunStoreError("a line's run is not resumed with --resume: run the same command again and the station joins the run, whose record is the line database")
        }
        if shared.withLock({ $0.station }) == nil {
            let station = try await LineStation.join(settings.connectionString, run: settings.run, station: settings.station,
                                                     devices: settings.devices, lease: settings.lease, timeout: settings.timeout,
                                                     writers: settings.writers, recheck: settings.recheck)
            shared.withLock { $0.station = station }
            startRenewing()
        }
        return JournalContents(lines: [])
    }

    public nonisolated func record(_ line: JournalLine) async throws {
        switch line {
        case .header, .started:
            return
        case .intent(let device, let step, let index, _):
            try await intent(device: device, step: step, index: index)
        case .outcome(let record, let at):
            try await outcome(record, at: at)
        case .end(let stopped, _):
            shared.withLock { $0.stop = stopped }
        }
    }

    /// Everything recorded is durable when `record` returns (on the line, or in the spool).
    public nonisolated func flush() async throws {}

    public func close() async {
        guard !closed else { return }
        closed = true
        lostHandler = nil
        if shared.withLock({ $0.spooled }) > 0 {
            ensureDraining()
            if let drainer = shared.withLock({ $0.drainer }) { await Self.wait(for: drainer, atMost: settings.closeWait) }
        }
        renewer?.cancel()
        renewer = nil
        shared.withLock { $0.drainer }?.cancel()
        let (station, stop) = shared.withLock { ($0.station, $0.stop) }
        if let station {
            // Devices whose outcomes wait in the spool stay claimed until their leases expire.
            let keep = Set(spool.unwritten.map(\.device))
            _ = try? await station.endRunIfComplete()
            try? await station.leave(keep: keep, reason: stop?.reason.rawValue, message: stop?.message)
            await station.close()
        }
        await spool.close()
    }

    /// Outcomes still only in the spool (the line was unreachable until the end).
    public nonisolated var unwrittenOutcomes: Int { spool.unwrittenCount }

    // MARK: Intents

    private nonisolated func intent(device: String, step: String, index: Int) async throws {
        let (station, attempt) = shared.withLock { ($0.station, $0.attempts[device]) }
        guard let station else { throw RunStoreError("the line is not open") }
        guard let attempt else {
            throw RunStoreError("this station holds no claim on device \(device): the write is not sent")
        }
        let intent = LineIntent(device: device, attempt: attempt, stepIndex: index, step: step)
        let deadline = ContinuousClock.now + settings.intentWait
        var delay = Duration.milliseconds(50)
        while true {
            do {
                try await station.recordIntent(intent)
                return
            } catch let error as PostgresError where error.isConnectionLoss || error.kind == .timeout {
                // Safe to send again (an intent is idempotent while the lease is held); never past the wait.
                guard ContinuousClock.now + delay < deadline else {
                    throw RunStoreError("the line could not be reached to record the intent within \(settings.intentWait) (\(error))")
                }
                try await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(1))
            }
        }
    }

    // MARK: Outcomes

    /// An outcome is durable on the station's disk (the spool) before the device counts as done, as
    /// with a file journal; the drainer writes it to the line in the background, at once.
    private nonisolated func outcome(_ record: DeviceRecord, at: WallTime) async throws {
        let (station, attempt) = shared.withLock { s -> (LineStation?, Int?) in
            let attempt = s.attempts[record.id]
            if s.station != nil, attempt != nil { s.spooled += 1 }
            return (s.station, attempt)
        }
        guard station != nil else { throw RunStoreError("the line is not open") }
        guard let attempt else {
            throw RunStoreError("this station holds no claim on device \(record.id): its outcome has no attempt to belong to")
        }
        do {
            try await spool.append(LineSpool.Entry(device: record.id, attempt: attempt, record: record, at: at))
        } catch {
            shared.withLock { $0.spooled -= 1 }
            throw error
        }
        ensureDraining()
    }

    private enum Written {
        case written
        case refused(String)
    }

    /// Writes one outcome to the line. Throws when the line cannot take it now (try again later).
    private nonisolated func write(_ entry: LineSpool.Entry, on station: LineStation) async throws -> Written {
        func forget() { shared.withLock { s in if s.attempts[entry.device] == entry.attempt { s.attempts[entry.device] = nil } } }
        do {
            try await station.recordOutcome(LineOutcome(spooled: entry))
            forget()
            return .written
        } catch LineError.leaseLost(let loss) {
            forget()
            return .refused(loss.description)
        }
    }

    /// Starts the drainer unless one runs.
    private nonisolated func ensureDraining() {
        shared.withLock { s in
            guard s.drainer == nil else {
                s.more = true
                return
            }
            // Created under the lock: the task's first look at `more` waits for it.
            s.drainer = Task { await self.drain() }
        }
    }

    /// Writes the spool to the line until it is empty: what arrived meanwhile goes in the next batch
    /// (the station's group commit makes a batch one or two transactions); while the line cannot be
    /// reached, it tries again with backoff (100 ms doubling up to 5 s, sooner when the line answers a
    /// claim or a renewal).
    private func drain() async {
        var delay = Duration.milliseconds(100)
        while !Task.isCancelled {
            shared.withLock { $0.more = false }
            let batch = spool.unwritten.prefix(1_000)
            if batch.isEmpty {
                // Stop unless an outcome reached the spool since it was read: that outcome's
                // `ensureDraining` came before this check (it set `more`) or comes after (and starts a
                // new drainer), so none is left behind.
                let done = shared.withLock { s -> Bool in
                    guard !s.more else { return false }
                    s.drainer = nil
                    return true
                }
                if done { return }
                continue
            }
            guard let station = shared.withLock({ $0.station }) else { break }
            var failed = false
            await withTaskGroup(of: (LineSpool.Entry, Written?).self) { group in
                for entry in batch {
                    group.addTask { (entry, try? await self.write(entry, on: station)) }
                }
                for await (entry, result) in group {
                    switch result {
                    case .written?:
                        spool.markWritten(entry)
                        shared.withLock { s in
                            s.written += 1
                            s.spooled -= 1
                        }
                    case .refused(let why)?:
                        spool.markWritten(entry, refusal: why)
                        shared.withLock { s in
                            s.refused += 1
                            s.spooled -= 1
                        }
                    case nil:
                        failed = true
                    }
                }
            }
            if failed {
                await pause(delay)
                delay = min(delay * 2, .seconds(5))
            } else {
                delay = .milliseconds(100)
            }
        }
        shared.withLock { $0.drainer = nil }
    }

    /// Waits `delay`, or less when the line answers something else meanwhile (`kick`), or until the
    /// drainer is cancelled.
    private func pause(_ delay: Duration) async {
        _ = await kicks.wait(timeout: delay)
    }

    /// The drainer's pause: a kick ends it.
    private let kicks = WaiterQueue<Void, Void>()

    /// The line answered: a spool waiting for it is written now rather than after its backoff.
    private func kick() {
        kicks.withLock { _, w in _ = w.resumeAll(()) }
    }

    // MARK: DeviceClaims

    public func claim(among candidates: [String]?, limit: Int) async throws -> [DeviceClaim] {
        guard let station = shared.withLock({ $0.station }) else { throw RunStoreError("the line is not open") }
        // A device whose last outcome from this station is not on the line yet is not claimed again
        // before it is (its attempt's outcome would be refused as superseded).
        let waiting = Set(spool.unwritten.map(\.device))
        let got = try await station.claim(among: candidates, limit: limit, excluding: waiting)
        kick()
        shared.withLock { s in for c in got { s.attempts[c.device] = c.attempt } }
        return got.map { DeviceClaim(device: $0.device, attempt: $0.attempt, rechecking: $0.rechecking) }
    }

    public func release(_ devices: [String]) async {
        guard let station = shared.withLock({ $0.station }), !devices.isEmpty else { return }
        _ = try? await station.release(devices)
        shared.withLock { s in for d in devices { s.attempts[d] = nil } }
    }

    public func progress(of devices: [String]?) async throws -> ClaimProgress {
        guard let station = shared.withLock({ $0.station }) else { throw RunStoreError("the line is not open") }
        let p = try await station.progress(of: devices)
        return ClaimProgress(pending: p.pending, claimed: p.claimed, unwrittenHere: shared.withLock { $0.spooled })
    }

    /// Tells the line the station's identity on each of its adapters (in the order of `--adapter`; empty
    /// for one without), once they are open: `provision line status` names them.
    public func recordIdentities(_ identities: [String]) async throws {
        guard let station = shared.withLock({ $0.station }) else { throw RunStoreError("the line is not open") }
        try await station.setIdentities(identities)
    }

    public func keepLeases(lost: @escaping @Sendable ([String]) -> Void) async {
        lostHandler = lost
    }

    public func stopLeases() async {
        // Renewals go on until the store closes (outcomes waiting in the spool keep their devices);
        // only the scheduler stops hearing of lost leases.
        lostHandler = nil
    }

    /// Renews the leases every third of the lease, and writes the spool when the line is back.
    private func startRenewing() {
        let period = settings.lease / 3
        renewer = Task { [weak self] in
            while !Task.isCancelled {
                do { try await Task.sleep(for: period) } catch { return }
                await self?.renewOnce()
            }
        }
    }

    private func renewOnce() async {
        guard let station = shared.withLock({ $0.station }) else { return }
        guard let renewal = try? await station.renew() else { return }
        kick()
        if shared.withLock({ $0.spooled }) > 0 { ensureDraining() }
        if !renewal.lost.isEmpty, let lostHandler { lostHandler(renewal.lost) }
    }

    /// Waits for `task` for at most `limit`, then cancels it.
    private static func wait(for task: Task<Void, Never>, atMost limit: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await task.value }
            group.addTask {
                try? await Task.sleep(for: limit)
                task.cancel()
            }
            await group.next()
            group.cancelAll()
        }
    }
}
