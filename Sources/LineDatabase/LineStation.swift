import AsyncSupport
import Foundation
import PostgresClient

/// One station's session on one run of the line: its connection, the devices it holds, and group
/// commit of its intents and outcomes.
///
/// - `join` connects, migrates the schema if needed, creates or joins the run, adds the inventory's
///   devices and registers the station.
/// - `claim` before connecting to a device; `recordIntent` before an irreversible write (returns when
///   committed; throws `LineError.leaseLost` when the station no longer holds the device — the write
///   must not go out); `recordOutcome` when the outcome is known.
/// - Intents and outcomes from many devices share round trips: while one batch is written, the next
///   gathers (`GroupCommit`).
/// - A lost connection surfaces as a `PostgresError` with `isConnectionLoss`; the next operation
///   connects again. Intents and outcomes are safe to send again after such an error (an outcome this
///   station already wrote answers `alreadyRecorded`), so a station can keep them locally while the
///   database is away and write them when it is back.
public actor LineStation {
    public nonisolated let station: LineStationInfo
    public nonisolated let run: String
    /// The lease a claim or a renewal grants.
    public nonisolated let lease: Duration
    /// The deadline of each database operation.
    public nonisolated let timeout: Duration
    private let connectionString: ConnectionString
    /// Slot 0 carries claims, renewals and releases; slots 1...writers carry group-commit batches.
    private var connections: [PostgresConnection?]
    private var connecting: [Int: Task<PostgresConnection, any Error>] = [:]
    private var freeWriters: [Int]
    private var commit: GroupCommit<UInt64>
    /// Callers of `recordIntent` and `recordOutcome`, each granted its entry's result; a ticket's id
    /// is the entry's ticket in the group commit.
    private let waiters = WaiterQueue<Void, Result<LineWriteResult, any Error>>()
    /// The devices this station holds, by id.
    public private(set) var held: [String: LineClaim] = [:]
    /// Devices this station has told the line it hears (`provision.heard`), and whether it still tells
    /// (a database of an older schema, or a role without the privilege, is not told again).
    private var reportedHeard = Set<String>()
    private var reportsHeard = true
    /// Asking devices under review again instead of claiming pending ones (nil: claiming pending ones),
    /// and the devices this station has claimed so (each once).
    public nonisolated let recheck: LineRecheck?
    private var rechecked = Set<String>()
    /// Group-commit batches written, and the intents and outcomes they carried.
    public private(set) var batchesWritten = 0
    public private(set) var entriesWritten = 0

    init(connectionString: ConnectionString, connection: PostgresConnection, station: LineStationInfo, run: String,
         lease: Duration, timeout: Duration, maxBatch: Int, writers: Int, recheck: LineRecheck?) {
        let writers = max(1, writers)
        self.recheck = recheck
        self.connectionString = connectionString
        self.connections = [connection] + Array(repeating: nil, count: writers)
        self.freeWriters = Array((1...writers).reversed())
        self.station = station
        self.run = run
        self.lease = lease
        self.timeout = timeout
        self.commit = GroupCommit(maxBatch: maxBatch, writers: writers)
    }

    /// Connects, migrates the schema if needed, creates or joins `run`, adds `devices` to it (those
    /// already there are left as they are), and registers the station.
    ///
    /// - Parameters:
    ///   - writers: connections that write group-commit batches side by side (PostgreSQL flushes their
    ///     commits together); one more connection carries claims and renewals.
    ///   - maxBatch: intents and outcomes per batch at most.
    ///   - recheck: ask these devices under review again, and claim nothing else (`LineRecheck`).
    public static func join(_ connectionString: ConnectionString, run: LineRun, station: LineStationInfo, devices: [String],
                            lease: Duration = .seconds(30), timeout: Duration = .seconds(10), writers: Int = 1,
                            maxBatch: Int = 500, recheck: LineRecheck? = nil) async throws -> LineStation {
        let connection = try await PostgresConnection.connect(connectionString, timeout: timeout, defaultTimeout: timeout)
        do {
            try await LineSchema.migrate(connection, toolVersion: station.toolVersion, timeout: max(timeout, .seconds(60)))
            let runs = LineRuns(connection: connection, timeout: max(timeout, .seconds(60)))
            try await runs.join(run, createdBy: station.id)
            try await runs.addDevices(devices, run: run.id)
            try await runs.register(station, run: run.id)
        } catch {
            connection.close()
            throw error
        }
        return LineStation(connectionString: connectionString, connection: connection, station: station, run: run.id,
                           lease: lease, timeout: timeout, maxBatch: maxBatch, writers: writers, recheck: recheck)
    }

    /// The connection of `slot`, made (again) when there is none or the last one was lost.
    private func liveConnection(_ slot: Int = 0) async throws -> PostgresConnection {
        if let c = connections[slot], !c.isClosed { return c }
        if let pending = connecting[slot] { return try await pending.value }
        let cs = connectionString
        let timeout = self.timeout
        let task = Task { try await PostgresConnection.connect(cs, timeout: timeout, defaultTimeout: timeout) }
        connecting[slot] = task
        defer { connecting[slot] = nil }
        let fresh = try await task.value
        connections[slot] = fresh
        return fresh
    }

    private func claims(_ slot: Int = 0) async throws -> LineClaims {
        LineClaims(connection: try await liveConnection(slot), run: run, station: station.id, timeout: timeout)
    }

    // MARK: Claims and leases

    /// Claims up to `limit` pending devices among those this station hears (best first), or, when
    /// `devices` is nil, any pending device of the run in inventory order. Devices it already holds, and
    /// those `excluding`, are not asked for.
    public func claim(among devices: [String]?, limit: Int, excluding: Set<String> = []) async throws -> [LineClaim] {
        let claimed: [LineClaim]
        if let recheck {
            let wanted = Set(recheck.devices)
            let among = (devices ?? recheck.devices).filter { wanted.contains($0) && held[$0] == nil && !excluding.contains($0) && !rechecked.contains($0) }
            claimed = try await claims().claimUnderReview(among: among, steps: recheck.steps, limit: limit, lease: lease)
            rechecked.formUnion(claimed.map(\.device))
            if let devices { await reportHeard(devices) }
        } else if let devices {
            let wanted = devices.filter { held[$0] == nil && !excluding.contains($0) }
            claimed = try await claims().claim(among: wanted, limit: limit, lease: lease)
            await reportHeard(devices)
        } else {
            claimed = try await claims().claimAny(limit: limit, lease: lease, excluding: excluding.sorted())
        }
        for c in claimed { held[c.device] = c }
        return claimed
    }

    /// Tells the line which devices this station hears for the first time (for `line status`: the
    /// pending devices nobody hears). Best effort and after the claim: a failure here never fails a
    /// claim; devices not recorded are told again with the next claim, unless the line cannot take them
    /// at all (an older schema, a role without the privilege).
    private func reportHeard(_ devices: [String]) async {
        guard reportsHeard else { return }
        let new = devices.filter { !reportedHeard.contains($0) }
        guard !new.isEmpty else { return }
        do {
            try await claims().recordHeard(new)
            reportedHeard.formUnion(new)
        } catch let error as PostgresError where error.sqlState == SQLState.insufficientPrivilege || error.sqlState == SQLState.undefinedTable {
            reportsHeard = false
        } catch {
            // The line is away: told again next time.
        }
    }

    /// How many devices of the run (or of `devices`) are pending and claimed now.
    /// Asking devices under review again: those of `recheck` it has not asked yet that it may claim.
    public func progress(of devices: [String]? = nil) async throws -> (pending: Int, claimed: Int) {
        guard let recheck else { return try await claims().progress(of: devices) }
        let left = recheck.devices.filter { !rechecked.contains($0) }
        let p = left.isEmpty ? (pending: 0, claimed: 0) : try await claims().progressUnderReview(of: left, steps: recheck.steps)
        // Devices it holds count as claimed (the loop waits for them); those it asked, not as pending.
        return (p.pending, p.claimed + held.count)
    }

    /// What a renewal found: the leases extended, and devices this station thought it held but does not
    /// (taken over after its lease expired, or expired and not renewable).
    public struct Renewal: Sendable, Equatable {
        public var renewed: [LineClaim]
        public var lost: [String]
    }

    /// Renews every lease this station holds (one round trip) and reports the ones it lost.
    public func renew() async throws -> Renewal {
        let result = try await claims().renew(lease: lease)
        let still = Set(result.held.map(\.device))
        let lost = held.keys.filter { !still.contains($0) }.sorted()
        for d in lost { held[d] = nil }
        for c in result.renewed where held[c.device] != nil { held[c.device] = c }
        return Renewal(renewed: result.renewed, lost: lost)
    }

    /// Renews the leases every `period` until the task is cancelled; `onLost` hears of devices lost.
    /// A renewal that fails (the database is away) is tried again next period.
    public func renewLeases(every period: Duration, onLost: @escaping @Sendable ([String]) -> Void) async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: period)
            } catch {
                return
            }
            if let renewal = try? await renew(), !renewal.lost.isEmpty { onLost(renewal.lost) }
        }
    }

    /// Gives devices back (devices it does not hold are ignored); returns their new states.
    @discardableResult
    public func release(_ devices: [String]) async throws -> [String: DeviceState] {
        let claims = devices.compactMap { held[$0] }.map { (device: $0.device, attempt: $0.attempt) }
        let states = try await self.claims().release(claims)
        for c in claims { held[c.device] = nil }
        return states
    }

    /// Releases everything held (but `keep`), marks the station stopped (with why, when it stopped
    /// early) and closes the connections. The devices kept stay claimed until their leases expire: a
    /// station keeps those whose outcomes it could not write yet.
    /// Records the station's identity on each of its adapters (`LineRuns.setIdentities`).
    public func setIdentities(_ identities: [String]) async throws {
        try await LineRuns(connection: try await liveConnection(), timeout: timeout).setIdentities(station: station.id, identities: identities)
    }

    public func leave(keep: Set<String> = [], reason: String? = nil, message: String? = nil) async throws {
        let release = held.keys.filter { !keep.contains($0) }
        if !release.isEmpty { try await self.release(release) }
        let connection = try await liveConnection()
        try await LineRuns(connection: connection, timeout: timeout).stopped(station: station.id, reason: reason, message: message)
        close()
    }

    /// Records the run's end when none of its devices is pending or claimed any more; true when it did.
    @discardableResult
    public func endRunIfComplete() async throws -> Bool {
        let progress = try await progress()
        guard progress.pending == 0, progress.claimed == 0 else { return false }
        try await LineRuns(connection: try await liveConnection(), timeout: timeout).end(run: run)
        return true
    }

    /// The claim this station holds on `device`, if any.
    public func claim(of device: String) -> LineClaim? { held[device] }

    /// Closes the connections (waiting writes fail with `.closed`).
    public func close() {
        for c in connections { c?.close() }
    }

    // MARK: Intents and outcomes (group commit)

    /// Records that an irreversible write is about to be sent; returns when it is committed. Throws
    /// `LineError.leaseLost` when this station no longer holds the device with a live lease: the write
    /// must not be sent.
    public func recordIntent(_ intent: LineIntent) async throws {
        switch try await submit(.intent(intent)) {
        case .recorded, .alreadyRecorded:
            return
        case .leaseLost(let loss):
            held[intent.device] = nil
            throw LineError.leaseLost(loss)
        }
    }

    /// Records a device's outcome; returns the device's new state once committed. Throws
    /// `LineError.leaseLost` when another station holds the device now (nothing is written).
    @discardableResult
    public func recordOutcome(_ outcome: LineOutcome) async throws -> DeviceState? {
        let result = try await submit(.outcome(outcome))
        held[outcome.device] = nil
        switch result {
        case .recorded(let state): return state
        case .alreadyRecorded: return nil
        case .leaseLost(let loss): throw LineError.leaseLost(loss)
        }
    }

    private func submit(_ item: GroupCommit<UInt64>.Item) async throws -> LineWriteResult {
        let ticket = waiters.enqueue()
        if let batch = commit.submit(.init(ticket: ticket.id, item: item)) { startWriting(batch) }
        // The entry is written whatever happens to the caller: it waits to learn the result.
        guard case .granted(let result) = await waiters.wait(ticket, cancellation: .isIgnored) else {
            throw CancellationError()
        }
        return try result.get()
    }

    /// Ends the wait of a batch entry.
    private func answer(_ ticket: UInt64, _ result: Result<LineWriteResult, any Error>) {
        waiters.withLock { _, w in _ = w.resume(WaitTicket(id: ticket), result) }
    }

    private func startWriting(_ batch: [GroupCommit<UInt64>.Entry]) {
        // GroupCommit starts no more batches than there are writers, so one is free.
        let writer = freeWriters.popLast() ?? 1
        Task { await self.write(batch, on: writer) }
    }

    private func write(_ batch: [GroupCommit<UInt64>.Entry], on writer: Int) async {
        batchesWritten += 1
        entriesWritten += batch.count
        var intents: [LineIntent] = []
        var outcomes: [LineOutcome] = []
        for entry in batch {
            switch entry.item {
            case .intent(let i): intents.append(i)
            case .outcome(let o): outcomes.append(o)
            }
        }
        do {
            let results = try await claims(writer).write(intents: intents, outcomes: outcomes)
            for entry in batch {
                let result: LineWriteResult?
                switch entry.item {
                case .intent(let i): result = results.intents[i.device]
                case .outcome(let o): result = results.outcomes[o.device]
                }
                if let result {
                    answer(entry.ticket, .success(result))
                } else {
                    answer(entry.ticket, .failure(PostgresError(
                        .protocolViolation, operation: "write of station \(station.id)", message: "no result for device \(entry.item.device)")))
                }
            }
        } catch {
            for entry in batch { answer(entry.ticket, .failure(error)) }
        }
        freeWriters.append(writer)
        if let next = commit.batchFinished(batch) { startWriting(next) }
    }
}
