import Engine
import Foundation
import LineDatabase
import PostgresClient
import Workflow

/// The merged report of a line's run: one report in the usual schema (`provision.report/2`) for every
/// device of the run, whichever station worked it, read from the line database.
///
/// Each device appears once, in inventory order, as the line holds it now:
/// - finished (`succeeded`, `failed`): the record the station that finished it wrote;
/// - `needs_review`: failed with error kind `needs_review`, naming the irreversible step announced and
///   why its outcome is unknown (the record of the attempt, when the station wrote one);
/// - pending after an interruption: the interrupted record (a later station runs it again);
/// - pending and never worked: `skipped` (not started); claimed now: `skipped`, in progress at a station.
///
/// `run.station` names every station of the run; `run.adapters` their adapters (`station:adapter`);
/// `run.journal` the line. The summary is computed from the records, over the run's time so far.
public enum LineReport {
    /// Why a merged report cannot be made.
    public struct LoadError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Reads the run `run` (nil: the most recently started run) from the line behind `connectionString`.
    public static func load(_ connectionString: ConnectionString, run: String?, timeout: Duration = .seconds(60)) async throws -> RunReport {
        let connection = try await PostgresConnection.connect(connectionString, timeout: min(timeout, .seconds(30)), defaultTimeout: timeout)
        defer { connection.close() }
        guard let version = try await LineSchema.databaseVersion(connection, timeout: timeout) else {
            throw LoadError(description: "\(connectionString) holds no line (no `provision` schema): no station has joined it yet")
        }
        let runs = LineRuns(connection: connection, timeout: timeout)
        guard let row = try await runs.run(run) else {
            throw LoadError(description: run.map { "the line has no run `\($0)`" } ?? "the line has no run yet")
        }
        let stations = try await runs.stations(run: row.run.id)
        let names = Dictionary(stations.map { ($0.id, $0.name) }, uniquingKeysWith: { a, _ in a })
        var devices: [DeviceRecord] = []
        var latest: Date?
        try await runs.devices(run: row.run.id, resolutions: version >= LineSchema.resolutionsVersion) { page in
            devices.reserveCapacity(devices.count + page.count)
            for entry in page {
                let r = try record(entry, stations: names)
                devices.append(r)
                if let started = r.started?.date {
                    let end = started.addingTimeInterval((r.durationMs ?? 0) / 1000)
                    latest = max(latest ?? end, end)
                }
            }
        }
        var adapters: [AdapterInfo] = []
        var seen = Set<String>()
        for s in stations {
            for a in s.adapters where seen.insert("\(s.name):\(a)").inserted {
                adapters.append(AdapterInfo(id: "\(s.name):\(a)", simulated: a == "sim", slots: 0))
            }
        }
        let finished = row.ended ?? latest
        let wall = max(0, (finished ?? row.started).timeIntervalSince(row.started))
        let info = RunInfo(id: row.run.id,
                           workflow: FileRef(name: row.run.workflow.name, path: row.run.workflow.path, sha256: row.run.workflow.sha256),
                           inventory: FileRef(path: row.run.inventory.path, sha256: row.run.inventory.sha256),
                           adapters: adapters, simulated: stations.contains { $0.adapters.contains("sim") },
                           station: Array(Set(stations.map(\.name))).sorted().joined(separator: ", "),
                           toolVersion: row.run.toolVersion, options: row.run.options, started: WallTime(row.started),
                           finished: finished.map(WallTime.init), journal: "line \(connectionString) run \(row.run.id)",
                           stopped: row.stopReason.map { StopInfo(reason: StopReason(rawValue: $0), message: row.stopMessage ?? $0, at: WallTime(finished ?? row.started)) },
                           captureTypes: row.run.captureTypes.map { $0.compactMapValues(ValueType.init(name:)) },
                           meta: Self.meta(row.run.options), checksums: row.run.checksums)
        return RunReport(run: info, summary: Summary.compute(devices, wall: .milliseconds(Int64(wall * 1000))), devices: devices)
    }

    /// The run's metadata, as the station that created the run recorded it among its options (`meta.KEY`).
    static func meta(_ options: [String: String]) -> [String: String] {
        var meta: [String: String] = [:]
        for (key, value) in options where key.hasPrefix("meta.") { meta[String(key.dropFirst(5))] = value }
        return meta
    }

    /// Why a device is under review on the line, from its `review_reason`, as the end of "the device …".
    public static func reviewWhy(_ reason: String?, step: String?) -> String {
        let named = step.map { "the irreversible step `\($0)`" } ?? "an irreversible step"
        switch reason {
        case "interrupted_after_intent"?: return "was cut after \(named) was announced"
        case "released_after_intent"?: return "was given back by its station after \(named) was announced"
        case "outcome_unknown"?: return "was sent \(named) and its station could not learn whether it took effect"
        default: return "lost its station (its lease expired) after \(named) was announced"
        }
    }

    /// One device of the merged report (see the type's rules).
    public static func record(_ e: LineRuns.DeviceEntry, stations: [String: String]) throws -> DeviceRecord {
        var r = try unstamped(e, stations: stations)
        // The station that worked it (a record of an older station does not say).
        if r.station == nil, let id = e.station { r.station = stations[id] ?? id }
        return r
    }

    private static func unstamped(_ e: LineRuns.DeviceEntry, stations: [String: String]) throws -> DeviceRecord {
        var recorded: DeviceRecord?
        if let json = e.record {
            do {
                recorded = try DeviceRecord.read(json: Data(json.utf8))
            } catch {
                throw LoadError(description: "device \(e.device): its record on the line does not read as a device record (\(error))")
            }
        }
        let station = e.station.map { stations[$0] ?? $0 }
        switch e.state {
        case .succeeded, .failed:
            if var r = recorded {
                r.attempts = max(r.attempts, e.attempt)
                return r
            }
            return DeviceRecord(id: e.device, address: nil, name: nil, outcome: .failed, attempts: e.attempt,
                                error: FailureRecord(kind: .protocolError, step: nil, message: "the line says \(e.state.rawValue) but holds no record of it"))
        case .needsReview:
            var r = recorded ?? DeviceRecord(id: e.device, address: nil, name: nil, outcome: .failed)
            r.outcome = .failed
            r.attempts = max(r.attempts, e.attempt)
            // The station's own verdict (it could not learn the outcome) says why; else the line does.
            if e.reviewReason == "outcome_unknown", r.error?.kind == .needsReview { return r }
            let step = e.intentStep ?? r.error?.step
            r.error = FailureRecord(kind: .needsReview, step: step,
                                    message: "the device \(reviewWhy(e.reviewReason, step: step)), before its outcome was known\(station.map { " (\($0))" } ?? ""); settle it with `provision review --line`: ask it again by its confirm read, or mark what you find on it",
                                    causes: r.error.map { [$0.message] } ?? [])
            return r
        case .pending:
            if var r = recorded, r.outcome == .interrupted {
                r.attempts = max(r.attempts, e.attempt)
                return r
            }
            return DeviceRecord(id: e.device, address: nil, name: nil, outcome: .skipped, attempts: e.attempt,
                                skipReason: e.attempt > 0 ? "not finished: pending on the line again" : "not started: pending on the line")
        case .claimed:
            let holder = e.leaseOwner.map { stations[$0] ?? $0 } ?? "a station"
            return DeviceRecord(id: e.device, address: nil, name: nil, outcome: .skipped, attempts: e.attempt,
                                skipReason: "in progress at \(holder) (attempt \(e.attempt))")
        }
    }
}
