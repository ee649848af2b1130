import Engine
import Foundation
import LineDatabase
import LineStore
import PostgresClient

/// `provision line status|flush`: the line as a whole — its stations, leases, counts and rate — and the
/// outcomes a station kept in its spool while the line was away.
public struct LineCommand: Command {
    public init() {}

    public let name = "line"
    public let summary = "a line of stations: status (stations, leases, counts, rate), flush a station's spool"
    public let discussion = """
        status: the run (--run ID, default the most recently started), its devices by state (pending,
        claimed, succeeded, failed, needs_review; an expired lease counts as what the next sweep makes of
        it), each station with its adapters, leases held, outcomes, last heartbeat and why it stopped, and
        the rate over the last minute. --json prints the same as one JSON object.
        flush SPOOL: writes to the line the outcomes in a station's spool (a station that ended while the
        line could not be reached leaves one beside its report); each is written once (those already on
        the line are recognised), one the line refuses because another station claimed the device since
        is named; the spool is removed when every outcome is on the line.
        The line is --line URL, or PROVISION_LINE. Exit status: 0 done, 2 bad usage or no such run,
        3 the line cannot be reached (or outcomes are still waiting).
        """
    public let positionals = [
        PositionalSpec("ACTION", help: "status or flush", choices: ["status", "flush"]),
        PositionalSpec("SPOOL", help: "flush: the spool file a station left beside its report", isOptional: true),
    ]
    public let options = [
        LineOption.spec,
        LineOption.runSpec,
        OptionSpec("json", kind: .flag, help: "status: print one JSON object"),
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        let action = arguments.positionals.first ?? ""
        guard ["status", "flush"].contains(action) else {
            out.err(escaping: "error: unknown action `\(action)` (status, flush)")
            out.err("usage: \(usage)")
            return ExitCode.invalidInput
        }
        let cs: ConnectionString
        switch LineOption.connectionString(arguments, context) {
        case nil:
            out.err("error: no line: give `--line URL` (a libpq connection string) or set PROVISION_LINE")
            return ExitCode.invalidInput
        case .failure(let e)?:
            out.err("error: \(e.message)")
            return ExitCode.invalidInput
        case .success(let c)?:
            cs = c
        }
        if action == "flush" {
            guard let path = arguments.positionals.dropFirst().first else {
                out.err("error: `provision line flush` needs the SPOOL file")
                return ExitCode.invalidInput
            }
            if arguments.value("run") != nil || arguments.flag(SharedOptions.json) {
                out.err("error: `flush` takes the run and the station from the spool (no --run, no --json)")
                return ExitCode.invalidInput
            }
            let full = path.hasPrefix("/") ? path : context.currentDirectory + "/" + path
            return await flush(spool: full, shown: path, line: cs, out: out)
        }
        if arguments.positionals.count > 1 {
            out.err(escaping: "error: `provision line status` takes no file (`\(arguments.positionals[1])`)")
            return ExitCode.invalidInput
        }
        return await status(line: cs, run: arguments.value("run"), json: arguments.flag(SharedOptions.json), out: out)
    }

    // MARK: status

    private func status(line cs: ConnectionString, run: String?, json: Bool, out: Output) async -> Int32 {
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(cs, timeout: .seconds(10), defaultTimeout: .seconds(30))
        } catch {
            out.err(escaping: "error: cannot reach the line: \(LineOption.describe(error).message)")
            return ExitCode.environment
        }
        defer { connection.close() }
        do {
            guard try await LineSchema.databaseVersion(connection) != nil else {
                out.err(escaping: "error: \(cs) holds no line yet (no station has joined it)")
                return ExitCode.invalidInput
            }
            let runs = LineRuns(connection: connection, timeout: .seconds(30))
            guard let row = try await runs.run(run) else {
                out.err(escaping: "error: " + (run.map { "the line has no run `\($0)`" } ?? "the line has no run yet"))
                return ExitCode.invalidInput
            }
            let status = try await runs.status(run: row.run.id)
            if json {
                out.out(Self.json(row, status))
            } else {
                for l in Self.text(row, status, line: cs) { out.out(escaping: l) }
            }
            return ExitCode.success
        } catch {
            let (message, code) = LineOption.describe(error)
            out.err(escaping: "error: \(message)")
            return code
        }
    }

    /// The states in the order a line supervisor reads them.
    static let states: [DeviceState] = [.succeeded, .failed, .needsReview, .claimed, .pending]

    static func text(_ row: LineRuns.RunRow, _ s: LineRuns.Status, line: ConnectionString) -> [String] {
        var lines = ["line \(line)", "run \(row.run.id)"]
        lines.append("  workflow  \(row.run.workflow.name ?? "-")  \(row.run.workflow.path)  sha256 \(row.run.workflow.sha256.prefix(12))…")
        lines.append("  inventory \(row.run.inventory.path)  sha256 \(row.run.inventory.sha256.prefix(12))…")
        lines.append("  started \(WallClock.iso(row.started))" + (row.ended.map { ", ended \(WallClock.iso($0))" } ?? ", not ended"))
        let counts = states.map { "\(s.counts[$0] ?? 0) \($0.rawValue.replacingOccurrences(of: "_", with: " "))" }
        lines.append("devices: \(s.total): " + counts.joined(separator: ", "))
        let left = (s.counts[.pending] ?? 0) + (s.counts[.claimed] ?? 0)
        var rate = "rate: \(s.outcomesLastMinute) outcome(s) in the last minute"
        if s.outcomesLastMinute > 0, left > 0, s.stations.contains(where: { $0.stopped == nil }) {
            rate += String(format: "; about %.0f min to go at this rate", (Double(left) / Double(s.outcomesLastMinute)).rounded(.up))
        }
        lines.append(rate)
        lines.append("stations: \(s.stations.count)")
        for st in s.stations {
            var l = "  \(st.name)  \(st.id)  on \(st.host)  adapters \(st.adapters.joined(separator: ","))"
            if st.identities.contains(where: { !$0.isEmpty }) {
                l += "  as \(st.identities.map { $0.isEmpty ? "-" : $0 }.joined(separator: ","))"
            }
            l += "  leases \(st.leases)"
            l += "  outcomes \(st.outcomes) (\(st.outcomesLastMinute) in the last minute)"
            if let stopped = st.stopped {
                l += "  stopped \(WallClock.iso(stopped))"
                if let reason = st.stopReason { l += " (\(reason): \(st.stopMessage ?? reason))" }
            } else {
                l += String(format: "  heard %.0f s ago", max(0, s.now.timeIntervalSince(st.heartbeat)))
            }
            lines.append(l)
        }
        return lines
    }

    static func json(_ row: LineRuns.RunRow, _ s: LineRuns.Status) -> String {
        var counts: [String: Int] = [:]
        for state in DeviceState.allCases { counts[state.rawValue] = s.counts[state] ?? 0 }
        var run: [String: Any] = [
            "id": row.run.id, "workflow": ["name": row.run.workflow.name as Any, "path": row.run.workflow.path, "sha256": row.run.workflow.sha256],
            "inventory": ["path": row.run.inventory.path, "sha256": row.run.inventory.sha256],
            "started": WallClock.iso(row.started), "tool_version": row.run.toolVersion, "created_by": row.createdBy,
        ]
        if let ended = row.ended { run["ended"] = WallClock.iso(ended) }
        let stations: [[String: Any]] = s.stations.map { st in
            var o: [String: Any] = ["id": st.id, "name": st.name, "host": st.host, "adapters": st.adapters, "identities": st.identities,
                                    "leases": st.leases,
                                    "outcomes": st.outcomes, "outcomes_last_minute": st.outcomesLastMinute,
                                    "started": WallClock.iso(st.started), "heartbeat": WallClock.iso(st.heartbeat)]
            if let stopped = st.stopped { o["stopped"] = WallClock.iso(stopped) }
            if let reason = st.stopReason { o["stop_reason"] = reason }
            if let message = st.stopMessage { o["stop_message"] = message }
            return o
        }
        let object: [String: Any] = ["run": run, "counts": counts, "total": s.total, "stations": stations,
                                     "outcomes_last_minute": s.outcomesLastMinute, "at": WallClock.iso(s.now)]
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    // MARK: flush

    private func flush(spool path: String, shown: String, line cs: ConnectionString, out: Output) async -> Int32 {
        let spool: LineSpool
        do {
            spool = try await LineSpool.open(existing: path)
        } catch {
            out.err(escaping: "error: \(error)")
            return ExitCode.invalidInput
        }
        let entries = spool.unwritten
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(cs, timeout: .seconds(10), defaultTimeout: .seconds(60))
        } catch {
            await spool.close()
            out.err(escaping: "error: cannot reach the line: \(LineOption.describe(error).message); the spool is left as it was")
            return ExitCode.environment
        }
        defer { connection.close() }
        let claims = LineClaims(connection: connection, run: spool.header.run, station: spool.header.station)
        var written = 0, already = 0, refused = 0
        do {
            var rest = entries[...]
            while !rest.isEmpty {
                // A batch names each device once (a device claimed again has a second attempt: next batch).
                var batch: [LineSpool.Entry] = []
                var later: [LineSpool.Entry] = []
                var devices = Set<String>()
                for entry in rest {
                    if batch.count < 200, devices.insert(entry.device).inserted { batch.append(entry) } else { later.append(entry) }
                }
                rest = later[...]
                let results = try await claims.write(outcomes: batch.map { LineOutcome(spooled: $0) })
                for entry in batch {
                    switch results.outcomes[entry.device] {
                    case .recorded?:
                        spool.markWritten(entry)
                        written += 1
                    case .alreadyRecorded?:
                        spool.markWritten(entry)
                        already += 1
                    case .leaseLost(let loss)?:
                        spool.markWritten(entry, refusal: loss.description)
                        refused += 1
                        out.err(escaping: "note: \(entry.device) (attempt \(entry.attempt)): refused: \(loss.description)")
                    case nil:
                        break
                    }
                }
            }
        } catch {
            let (message, code) = LineOption.describe(error)
            await spool.close()
            out.err(escaping: "error: \(message); \(written) outcome(s) written, the spool is kept")
            return code
        }
        await spool.close()
        out.out(escaping: "\(shown): run \(spool.header.run), station \(spool.header.station): \(written) outcome(s) written, \(already) already on the line"
                + (refused > 0 ? ", \(refused) refused (the spool is kept)" : "; the spool is removed"))
        return ExitCode.success
    }
}
