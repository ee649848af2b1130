import Engine
import Foundation
import LineDatabase
import LineStore
import PostgresClient

/// `provision line status|flush|init|migrate|grant`: the line as a whole — its stations, leases, counts,
/// the devices still to do and the time left — the outcomes a station kept in its spool while the line
/// was away, and setting the line up (`LineCommand+Setup.swift`).
public struct LineCommand: Command {
    public init() {}

    public let name = "line"
    public let summary = "a line of stations: status (devices to do, stations, time left), flush a station's spool, init/migrate/grant the database"
    public let discussion = """
        status: the run (--run ID, default the most recently started), its devices by state (pending,
        claimed, succeeded, failed, needs_review; an expired lease counts as what the next sweep makes of
        it), the pending devices by name (and those no station hears), the devices under review with the
        step announced, each station with its adapters, leases held, outcomes, last heartbeat and why it
        stopped, and the time left at the rate of the last five minutes. --json prints the same as one
        JSON object.
        init: creates the line's schema in an empty database (as the database's owner). migrate: brings
        it to this tool's version after an upgrade. grant: gives the roles named by --station and
        --auditor (login roles an administrator created) their privileges — without them, the group
        roles provision_station and provision_auditor; run it again after a migration that adds a table.
        flush SPOOL: writes to the line the outcomes in a station's spool (a station that ended while the
        line could not be reached leaves one beside its report); each is written once (those already on
        the line are recognised), one the line refuses because another station claimed the device since
        is named; the spool is removed when every outcome is on the line.
        The line is --line URL, or PROVISION_LINE. Exit status: 0 done, 2 bad usage or no such run,
        3 the line cannot be reached (or outcomes are still waiting).
        """
    public let positionals = [
        PositionalSpec("ACTION", help: "status, flush, init, migrate or grant", choices: ["status", "flush", "init", "migrate", "grant"]),
        PositionalSpec("SPOOL", help: "flush: the spool file a station left beside its report", isOptional: true),
    ]
    public let options = [
        LineOption.spec,
        LineOption.runSpec,
        OptionSpec("json", kind: .flag, help: "status: print one JSON object"),
        OptionSpec("station", kind: .repeated("ROLE"), help: "grant: a stations' role (repeatable)"),
        OptionSpec("auditor", kind: .repeated("ROLE"), help: "grant: an auditors' role (repeatable)"),
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        let action = arguments.positionals.first ?? ""
        guard (["status", "flush"] + Self.setupActions).contains(action) else {
            out.err(escaping: "error: unknown action `\(action)` (status, flush, init, migrate, grant)")
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
        if Self.setupActions.contains(action) {
            if arguments.positionals.count > 1 {
                out.err(escaping: "error: `provision line \(action)` takes no file (`\(arguments.positionals[1])`)")
                return ExitCode.invalidInput
            }
            return await setup(action, line: cs, arguments: arguments, out: out)
        }
        if !arguments.values("station").isEmpty || !arguments.values("auditor").isEmpty {
            out.err("error: `--station` and `--auditor` go with `provision line grant`")
            return ExitCode.invalidInput
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

    /// Connects to the line; nil, after saying why (and `note`), when it cannot be reached.
    static func connect(_ cs: ConnectionString, defaultTimeout: Duration, out: Output, note: String = "") async -> PostgresConnection? {
        do {
            return try await PostgresConnection.connect(cs, timeout: .seconds(10), defaultTimeout: defaultTimeout)
        } catch {
            out.err(escaping: "error: cannot reach the line: \(LineOption.describe(error).message)\(note)")
            return nil
        }
    }

    // MARK: status

    private func status(line cs: ConnectionString, run: String?, json: Bool, out: Output) async -> Int32 {
        guard let connection = await Self.connect(cs, defaultTimeout: .seconds(30), out: out) else { return ExitCode.environment }
        defer { connection.close() }
        do {
            guard let version = try await LineSchema.databaseVersion(connection) else {
                out.err(escaping: "error: \(cs) holds no line yet (`provision line init` creates one)")
                return ExitCode.invalidInput
            }
            let runs = LineRuns(connection: connection, timeout: .seconds(30))
            guard let row = try await runs.run(run) else {
                out.err(escaping: "error: " + (run.map { "the line has no run `\($0)`" } ?? "the line has no run yet"))
                return ExitCode.invalidInput
            }
            let status = try await runs.status(run: row.run.id, heard: version >= 5)
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
        let pending = s.counts[.pending] ?? 0
        if pending > 0 {
            lines.append("pending (\(pending)): " + Self.named(s.pending, of: pending))
            if let unheard = s.unheard {
                lines.append(unheard.count == 0 ? "  every pending device is heard by a station"
                                                : "  heard by no station (\(unheard.count)): " + Self.named(unheard.devices, of: unheard.count))
            }
        }
        let review = s.counts[.needsReview] ?? 0
        if review > 0 {
            let named = s.inReview.map { r in
                let why = [r.reason?.replacingOccurrences(of: "_", with: " "), r.step.map { "step `\($0)`" }].compactMap { $0 }
                return why.isEmpty ? r.device : "\(r.device) (\(why.joined(separator: ", ")))"
            }
            lines.append("in review (\(review)): " + Self.named(named, of: review))
        }
        var rate = "rate: \(s.finishedRecently) device(s) finished in the last \(Self.minutes(s.window))"
        if let perMinute = s.ratePerMinute { rate += String(format: " (%.1f a minute)", perMinute) }
        if let left = s.estimatedTimeLeft {
            rate += "; about \(Self.minutes(left)) left at this rate"
        } else if pending + (s.counts[.claimed] ?? 0) > 0, !s.stations.contains(where: { $0.stopped == nil }) {
            rate += "; no station is working the line"
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

    /// `SN-0001, SN-0002, … and 18 more`: the devices named, and how many more there are.
    static func named(_ devices: [String], of count: Int) -> String {
        devices.joined(separator: ", ") + (count > devices.count ? " and \(count - devices.count) more" : "")
    }

    /// A duration for a person: `40 s`, `12 min`, `2 h 5 min`.
    static func minutes(_ d: Duration) -> String {
        let seconds = Int(d.components.seconds)
        if seconds < 60 { return "\(seconds) s" }
        let minutes = (seconds + 59) / 60
        return minutes < 60 ? "\(minutes) min" : "\(minutes / 60) h \(minutes % 60) min"
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
        var object: [String: Any] = ["run": run, "counts": counts, "total": s.total, "stations": stations,
                                     "outcomes_last_minute": s.outcomesLastMinute, "at": WallClock.iso(s.now),
                                     "pending": s.pending,
                                     "in_review": s.inReview.map { r -> [String: Any] in
                                         var o: [String: Any] = ["device": r.device]
                                         if let reason = r.reason { o["reason"] = reason }
                                         if let step = r.step { o["step"] = step }
                                         return o
                                     },
                                     "finished_recently": s.finishedRecently, "window_seconds": Int(s.window.components.seconds)]
        if let unheard = s.unheard { object["unheard"] = ["devices": unheard.devices, "count": unheard.count] }
        if let left = s.estimatedTimeLeft { object["estimated_seconds_left"] = Int(left.components.seconds) }
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
        guard let connection = await Self.connect(cs, defaultTimeout: .seconds(60), out: out, note: "; the spool is left as it was") else {
            await spool.close()
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
