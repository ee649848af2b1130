import Engine
import Foundation
import LineDatabase
import PostgresClient

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
/// - `outcome` is committed on the line through the station's group commit. When the line cannot be
///   reached, it is kept in the spool beside the report (fsynced) and counts as durable; a background
///   task writes the spool to the line, with backoff, as soon as it is reachable again. An outcome the
///   line refuses (another station claimed the device since) is kept in the spool, marked refused.
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
    public nonisolated let spool: LineSpool

    private var station: LineStation?
    /// The attempt of each device this station claimed, until its outcome is written (or refused).
    private var attempts: [String: Int] = [:]
    /// Outcomes in the spool (or on their way into it) not written to the line yet.
    private var spooled = 0
    private var drainer: Task<Void, Never>?
    private var renewer: Task<Void, Never>?
    private var lostHandler: (@Sendable ([String]) -> Void)?
    private var stop: StopInfo?
    private var closed = false

    /// Outcomes committed on the line directly, written later from the spool, and refused by the line.
    public private(set) var outcomesWritten = 0
    public private(set) var outcomesWrittenLate = 0
    public private(set) var outcomesRefused = 0

    public init(_ settings: Settings) {
        self.settings = settings
        self.spool = LineSpool(path: settings.spoolPath,
                               header: LineSpool.Header(run: settings.run.id, station: settings.station.id,
                                                        line: settings.connectionString.description))
    }

    // MARK: RunStore

    /// Joins the line (idempotent: a station may open it before the run, to report an unreachable line
    /// or another run's workflow as such).
    public func open(_ mode: RunStoreMode) async throws -> JournalContents {
        guard mode == .start else {
            throw RunStoreError("a line's run is not resumed with --resume: run the same command again and the station joins the run, whose record is the line database")
        }
        if station == nil {
            station = try await LineStation.join(settings.connectionString, run: settings.run, station: settings.station,
                                                 devices: settings.devices, lease: settings.lease, timeout: settings.timeout,
                                                 writers: settings.writers)
            startRenewing()
        }
        return JournalContents(lines: [])
    }

    public func record(_ line: JournalLine) async throws {
        switch line {
        case .header, .started:
            return
        case .intent(let device, let step, let index, _):
            try await intent(device: device, step: step, index: index)
        case .outcome(let record, let at):
            try await outcome(record, at: at)
        case .end(let stopped, _):
            stop = stopped
        }
    }

    /// Everything recorded is durable when `record` returns (on the line, or in the spool).
    public func flush() async throws {}

    public func close() async {
        guard !closed else { return }
        closed = true
        lostHandler = nil
        if spooled > 0 {
            startDraining()
            if let drainer { await Self.wait(for: drainer, atMost: settings.closeWait) }
        }
        renewer?.cancel()
        renewer = nil
        drainer?.cancel()
        if let station {
            // Devices whose outcomes wait in the spool stay claimed until their leases expire.
            let keep = Set(await spool.unwritten.map(\.device))
            _ = try? await station.endRunIfComplete()
            try? await station.leave(keep: keep, reason: stop?.reason, message: stop?.message)
            await station.close()
        }
        await spool.close()
    }

    /// Outcomes still only in the spool (the line was unreachable until the end).
    public var unwrittenOutcomes: Int { get async { await spool.unwritten.count } }

    // MARK: Intents

    private func intent(device: String, step: String, index: Int) async throws {
        guard let station else { throw RunStoreError("the line is not open") }
        guard let attempt = attempts[device] else {
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

    private func outcome(_ record: DeviceRecord, at: String) async throws {
        guard let station else { throw RunStoreError("the line is not open") }
        guard let attempt = attempts[record.id] else {
            throw RunStoreError("this station holds no claim on device \(record.id): its outcome has no attempt to belong to")
        }
        let entry = LineSpool.Entry(device: record.id, attempt: attempt, record: record, at: at)
        // While earlier outcomes wait in the spool, the line is away: do not wait for it.
        if spooled == 0 {
            do {
                switch try await write(entry, on: station) {
                case .written:
                    outcomesWritten += 1
                    return
                case .refused(let why):
                    try await keepRefused(entry, why)
                    return
                }
            } catch {
                // Unreachable (or failing): kept locally below, written when the line is back.
            }
        }
        spooled += 1
        do {
            try await spool.append(entry)
        } catch {
            spooled -= 1
            throw error
        }
        startDraining()
    }

    private enum Written {
        case written
        case refused(String)
    }

    /// Writes one outcome to the line. Throws when the line cannot take it now (try again later).
    private func write(_ entry: LineSpool.Entry, on station: LineStation) async throws -> Written {
        do {
            try await station.recordOutcome(LineOutcome(entry.record, attempt: entry.attempt, finished: entry.at))
            if attempts[entry.device] == entry.attempt { attempts[entry.device] = nil }
            return .written
        } catch LineError.leaseLost(let loss) {
            if attempts[entry.device] == entry.attempt { attempts[entry.device] = nil }
            return .refused(loss.description)
        }
    }

    /// An outcome the line refused (another station claimed the device since): kept in the spool.
    private func keepRefused(_ entry: LineSpool.Entry, _ why: String) async throws {
        try await spool.append(entry)
        try await spool.markWritten(entry, result: "refused", refusal: why)
        outcomesRefused += 1
    }

    private func startDraining() {
        guard drainer == nil else { return }
        drainer = Task { await self.drain() }
    }

    /// Writes the spool to the line until it is empty, trying again with backoff (100 ms doubling up to
    /// 5 s) while the line cannot be reached.
    private func drain() async {
        var delay = Duration.milliseconds(100)
        while !Task.isCancelled {
            let batch = await spool.unwritten
            if batch.isEmpty {
                if spooled == 0 { break }
                // An outcome is on its way into the spool.
                try? await Task.sleep(for: .milliseconds(10))
                continue
            }
            guard let station else { break }
            var failed = false
            await withTaskGroup(of: (LineSpool.Entry, Written?).self) { group in
                for entry in batch {
                    group.addTask { (entry, try? await self.write(entry, on: station)) }
                }
                for await (entry, result) in group {
                    switch result {
                    case .written?:
                        try? await spool.markWritten(entry, result: "recorded")
                        outcomesWrittenLate += 1
                        spooled -= 1
                    case .refused(let why)?:
                        try? await spool.markWritten(entry, result: "refused", refusal: why)
                        outcomesRefused += 1
                        spooled -= 1
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
        drainer = nil
    }

    /// Waits `delay`, or less when the line answers something else meanwhile (`kick`).
    private func pause(_ delay: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: delay) }
            group.addTask { await self.waitForKick() }
            await group.next()
            group.cancelAll()
        }
    }

    private var kickWaiter: CheckedContinuation<Void, Never>?

    private func waitForKick() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                if Task.isCancelled {
                    c.resume()
                } else {
                    kickWaiter?.resume()
                    kickWaiter = c
                }
            }
        } onCancel: {
            Task { await self.kick() }
        }
    }

    /// The line answered: a spool waiting for it is written now rather than after its backoff.
    private func kick() {
        kickWaiter?.resume()
        kickWaiter = nil
    }

    // MARK: DeviceClaims

    public func claim(among candidates: [String]?, limit: Int) async throws -> [DeviceClaim] {
        guard let station else { throw RunStoreError("the line is not open") }
        let got = try await station.claim(among: candidates, limit: limit)
        kick()
        for c in got { attempts[c.device] = c.attempt }
        return got.map { DeviceClaim(device: $0.device, attempt: $0.attempt) }
    }

    public func release(_ devices: [String]) async {
        guard let station, !devices.isEmpty else { return }
        _ = try? await station.release(devices)
        for d in devices { attempts[d] = nil }
    }

    public func progress(of devices: [String]?) async throws -> ClaimProgress {
        guard let station else { throw RunStoreError("the line is not open") }
        let p = try await station.progress(of: devices)
        let mine = Set(await spool.unwritten.map(\.device)).count
        return ClaimProgress(pending: p.pending, claimed: p.claimed, unwrittenHere: max(mine, spooled > 0 ? 1 : 0))
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
        guard let station else { return }
        guard let renewal = try? await station.renew() else { return }
        kick()
        if spooled > 0 { startDraining() }
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
