import Engine
import Foundation
import LineDatabase
import LineStore
import PostgresClient

/// `provision review`: the devices whose outcome is in doubt (an irreversible step announced and no
/// outcome known, or recorded `needs_review`), with their last intent and what the journal shows; and
/// an operator's resolution of one, appended to the journal with a note (never silent). Re-reading the
/// device instead is a resume with `--recheck` (its step's `confirm` read), or on a line a station run
/// with `--recheck`, whose command this prints.
public struct ReviewCommand: Command {
    public init() {}

    public let name = "review"
    public let summary = "devices in doubt (needs_review): list them with their last intent and evidence, resolve one with a note"
    public let discussion = """
        JOURNAL: lists the devices whose irreversible step was announced without a known outcome, or that
        are recorded needs_review, each with the step, the intent's time and what the journal shows.
        To settle them from the device (the step's `confirm` read, nothing sent unless it shows the write
        did not take effect): resume with `--recheck ID` (the command is printed). To settle one by hand:
        --mark succeeded|failed --device ID --note TEXT appends the outcome with the note, the operator
        (--by, default $USER) and the doubt it replaces to the journal; a later resume carries it over
        (`failed`: `--resume --retry-failed` runs the device again). --line URL (or PROVISION_LINE)
        instead of JOURNAL lists a line's devices under review (--run ID, default the latest run) with
        the station command that asks them again (`run … --line URL --recheck IDS`), and
        --mark resolves one there: the device's state on the line becomes the outcome, and the resolution
        (note, operator, the database role, the doubt it replaces) is kept in the line's
        provision.resolutions and shown by `report --line`. A station's role may resolve; an auditor's
        may not.
        Exit status: 0 done (nothing in doubt, or resolved), 1 devices are in doubt, 2 bad usage or an
        unreadable journal, 3 the line cannot be reached.
        """
    public let positionals = [PositionalSpec("JOURNAL", help: "a run's journal (or --line)", isOptional: true)]
    public let options = [
        OptionSpec("mark", kind: .value("succeeded|failed"), help: "resolve --device by hand: what the operator found"),
        OptionSpec("device", kind: .value("ID"), help: "with --mark: the device"),
        OptionSpec("note", kind: .value("TEXT"), help: "with --mark: why (recorded with the outcome)"),
        OptionSpec("by", kind: .value("NAME"), help: "with --mark: who resolved it (default $USER)"),
        OptionSpec("json", kind: .flag, help: "print the list as JSON"),
        LineOption.spec,
        LineOption.runSpec,
    ]

    public func run(_ arguments: ParsedArguments, context: CommandContext) async -> Int32 {
        let out = context.output
        let journal = arguments.positionals.first
        let line = LineOption.connectionString(arguments, context)
        if journal == nil, let line {
            guard case .success(let cs) = line else {
                if case .failure(let e) = line { out.err("error: \(e.message)") }
                return ExitCode.invalidInput
            }
            guard arguments.value("mark") != nil else {
                if let stray = Self.strayResolutionOption(arguments, out: out) { return stray }
                return await listLine(cs, run: arguments.value("run"), json: arguments.flag("json"), out: out)
            }
            guard let mark = Self.mark(arguments, context: context, out: out) else { return ExitCode.invalidInput }
            return await resolveOnLine(cs, run: arguments.value("run"), mark, out: out)
        }
        guard let journal else {
            out.err("error: give a JOURNAL (or `--line URL`)")
            out.err("usage: \(usage)")
            return ExitCode.invalidInput
        }
        let path = journal.hasPrefix("/") ? journal : context.currentDirectory + "/" + journal
        guard arguments.value("mark") != nil else {
            if let stray = Self.strayResolutionOption(arguments, out: out) { return stray }
            return list(path, shown: journal, json: arguments.flag("json"), out: out)
        }
        guard let mark = Self.mark(arguments, context: context, out: out) else { return ExitCode.invalidInput }
        return await resolve(path, shown: journal, mark, out: out)
    }

    /// An operator's resolution of one device, as `--mark` gives it.
    struct Mark {
        var device: String
        var outcome: DeviceOutcome
        var note: String
        var by: String
    }

    /// `--mark`, `--device`, `--note` and `--by`, checked (nil: a problem, said on `out`).
    private static func mark(_ arguments: ParsedArguments, context: CommandContext, out: Output) -> Mark? {
        let mark = arguments.value("mark") ?? ""
        guard let outcome = DeviceOutcome(rawValue: mark), outcome == .succeeded || outcome == .failed else {
            out.err(escaping: "error: `--mark` is `succeeded` or `failed`, not `\(mark)`")
            return nil
        }
        guard let device = arguments.value("device") else {
            out.err("error: `--mark` needs `--device ID`")
            return nil
        }
        guard let note = arguments.value("note"), !note.trimmingCharacters(in: .whitespaces).isEmpty else {
            out.err("error: `--mark` needs `--note TEXT`: what was found on the device (it is recorded with the outcome)")
            return nil
        }
        let by = arguments.value("by") ?? context.environment["USER"] ?? context.environment["LOGNAME"] ?? "unknown"
        return Mark(device: device, outcome: outcome, note: note, by: by)
    }

    /// `--device`, `--note` or `--by` without `--mark`: refused (exit status), else nil.
    private static func strayResolutionOption(_ arguments: ParsedArguments, out: Output) -> Int32? {
        for option in ["device", "note", "by"] where arguments.value(option) != nil {
            out.err("error: `--\(option)` goes with `--mark succeeded|failed`")
            return ExitCode.invalidInput
        }
        return nil
    }

    private static func read(_ path: String, shown: String, out: Output) -> [JournalLine]? {
        guard let data = FileManager.default.contents(atPath: path) else {
            out.err(escaping: "error: cannot read journal \(shown)")
            return nil
        }
        do {
            let lines = try JournalFile.parse(data, path: shown).lines
            guard case .header? = lines.first else {
                out.err(escaping: "error: \(shown): not a provision journal (no header line)")
                return nil
            }
            return lines
        } catch {
            out.err(escaping: "error: \(error.description)")
            return nil
        }
    }

    private func list(_ path: String, shown: String, json: Bool, out: Output) -> Int32 {
        guard let lines = Self.read(path, shown: shown, out: out) else { return ExitCode.invalidInput }
        let review = JournalReview(lines: lines)
        if json {
            let units: [[String: Any]] = review.units.map { u in
                var o: [String: Any] = ["device": u.device, "starts": u.starts, "evidence": u.evidence]
                if let s = u.step { o["step"] = s }
                if let a = u.intentAt { o["intent_at"] = a.iso }
                if let r = u.record { o["outcome"] = r.outcome.rawValue; o["error_kind"] = r.error?.kind.rawValue }
                return o
            }
            let data = (try? JSONSerialization.data(withJSONObject: ["journal": shown, "in_doubt": units], options: [.sortedKeys])) ?? Data()
            out.out(String(decoding: data, as: UTF8.self))
        } else {
            for l in Self.text(review, lines: lines, journal: shown) { out.out(escaping: l) }
        }
        return review.units.isEmpty ? ExitCode.success : ExitCode.someDevicesFailed
    }

    static func text(_ review: JournalReview, lines: [JournalLine], journal: String) -> [String] {
        guard !review.units.isEmpty else { return ["nothing in doubt in \(journal)"] }
        var text = ["\(review.units.count) device\(review.units.count == 1 ? "" : "s") in doubt in \(journal):"]
        for u in review.units {
            text.append("  \(u.device)  step `\(u.step ?? "?")`")
            text.append("    \(u.evidence)")
        }
        var header: JournalHeader?
        if case .header(let h, _)? = lines.first { header = h }
        let ids = review.units.map(\.device).joined(separator: ",")
        text.append("ask the devices (the step's confirm read; nothing is sent unless it shows the write did not take effect):")
        text.append("  provision run \(header?.workflow.path ?? "WORKFLOW") --inventory \(header?.inventory.path ?? "INVENTORY") --adapter SPEC --resume \(journal) --recheck \(ids)")
        text.append("or resolve one by hand: provision review \(journal) --mark succeeded|failed --device ID --note TEXT")
        return text
    }

    private func resolve(_ path: String, shown: String, _ mark: Mark, out: Output) async -> Int32 {
        let (device, outcome, note, by) = (mark.device, mark.outcome, mark.note, mark.by)
        do {
            // The journal's lock: a run using it refuses this, and this refuses a run meanwhile.
            let journal = try FileJournal(path: path, create: false)
            let contents = try await journal.open(.resume)
            guard case .header? = contents.lines.first else {
                await journal.close()
                out.err(escaping: "error: \(shown): not a provision journal (no header line)")
                return ExitCode.invalidInput
            }
            guard let unit = JournalReview(lines: contents.lines).units.first(where: { $0.device == device }) else {
                await journal.close()
                out.err(escaping: "error: \(device) is not in doubt in \(shown) (`provision review \(shown)` lists those that are)")
                return ExitCode.invalidInput
            }
            let record = JournalReview.resolution(of: unit, as: outcome, note: note, by: by, at: .now())
            do {
                try await journal.record(.outcome(record, at: .now()))
            } catch {
                await journal.close()
                throw error
            }
            await journal.close()
            out.out(escaping: "\(device): recorded \(outcome.rawValue) (was in doubt on `\(unit.step ?? "?")`), by \(by): \(note)")
            return ExitCode.success
        } catch {
            out.err(escaping: "error: \(error)")
            return ExitCode.invalidInput
        }
    }

    private func listLine(_ cs: ConnectionString, run: String?, json: Bool, out: Output) async -> Int32 {
        guard let connection = await LineCommand.connect(cs, defaultTimeout: .seconds(30), out: out) else { return ExitCode.environment }
        defer { connection.close() }
        do {
            let runs = LineRuns(connection: connection, timeout: .seconds(30))
            guard let row = try await runs.run(run) else {
                out.err(escaping: "error: " + (run.map { "the line has no run `\($0)`" } ?? "the line has no run yet"))
                return ExitCode.invalidInput
            }
            let status = try await runs.status(run: row.run.id, heard: false)
            let count = status.counts[.needsReview] ?? 0
            if json {
                let units: [[String: Any]] = status.inReview.map { r in
                    var o: [String: Any] = ["device": r.device]
                    if let s = r.step { o["step"] = s }
                    if let why = r.reason { o["evidence"] = why }
                    return o
                }
                let object: [String: Any] = ["run": row.run.id, "in_doubt": units, "count": count]
                out.out(String(decoding: (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data(), as: UTF8.self))
            } else if count == 0 {
                out.out(escaping: "nothing in doubt in run \(row.run.id)")
            } else {
                out.out(escaping: "\(count) device\(count == 1 ? "" : "s") in doubt in run \(row.run.id):")
                for r in status.inReview {
                    out.out(escaping: "  \(r.device)  step `\(r.step ?? "?")`")
                    out.out(escaping: "    the device \(LineReport.reviewWhy(r.reason, step: r.step))")
                }
                if count > status.inReview.count { out.out("  … and \(count - status.inReview.count) more") }
                let ids = status.inReview.map(\.device).joined(separator: ",")
                out.out("ask the devices (the step's confirm read, on a station that hears them; nothing is sent unless it shows the write did not take effect):")
                out.out(escaping: "  provision run \(row.run.workflow.path) --inventory \(row.run.inventory.path) --adapter SPEC --line URL --run \(row.run.id) --recheck \(ids)")
                out.out("or resolve one by hand: provision review --line URL --run \(row.run.id) --mark succeeded|failed --device ID --note TEXT")
            }
            return count == 0 ? ExitCode.success : ExitCode.someDevicesFailed
        } catch {
            let (message, code) = LineOption.describe(error)
            out.err(escaping: "error: \(message)")
            return code
        }
    }

    /// `--mark` on a line: the device's record as the merged report shows it under review, resolved as
    /// the operator says, and written with the device's change of state in one transaction, fenced by
    /// its attempt (a device claimed or resolved meanwhile is refused, nothing written).
    private func resolveOnLine(_ cs: ConnectionString, run: String?, _ mark: Mark, out: Output) async -> Int32 {
        guard let connection = await LineCommand.connect(cs, defaultTimeout: .seconds(30), out: out) else { return ExitCode.environment }
        defer { connection.close() }
        do {
            guard let version = try await LineSchema.databaseVersion(connection, timeout: .seconds(30)) else {
                out.err(escaping: "error: \(cs) holds no line (no `provision` schema)")
                return ExitCode.invalidInput
            }
            guard version >= LineSchema.resolutionsVersion else {
                out.err("error: the line's schema is at version \(version); resolving a device on the line needs version \(LineSchema.resolutionsVersion): its owner runs `provision line migrate`, then `provision line grant`")
                return ExitCode.environment
            }
            let runs = LineRuns(connection: connection, timeout: .seconds(30))
            guard let row = try await runs.run(run) else {
                out.err(escaping: "error: " + (run.map { "the line has no run `\($0)`" } ?? "the line has no run yet"))
                return ExitCode.invalidInput
            }
            let id = row.run.id
            guard let entry = try await runs.device(run: id, id: mark.device) else {
                out.err(escaping: "error: run \(id) has no device \(mark.device)")
                return ExitCode.invalidInput
            }
            guard entry.state == .needsReview else {
                out.err(escaping: "error: \(mark.device) is not in doubt in run \(id) (it is \(entry.state.rawValue); `provision review --line URL --run \(id)` lists those that are)")
                return ExitCode.invalidInput
            }
            let names = Dictionary(try await runs.stations(run: id).map { ($0.id, $0.name) }, uniquingKeysWith: { a, _ in a })
            let doubt = try LineReport.record(entry, stations: names)
            let unit = JournalReview.Unit(device: entry.device, intentStep: entry.intentStep, intentAt: nil, starts: entry.attempt, record: doubt)
            let resolved = JournalReview.resolution(of: unit, as: mark.outcome, note: mark.note, by: mark.by, at: .now())
            let state: DeviceState = mark.outcome == .succeeded ? .succeeded : .failed
            guard try await runs.resolve(run: id, device: entry.device, attempt: entry.attempt, as: state, note: mark.note, by: mark.by,
                                         record: resolved.jsonText()) else {
                out.err(escaping: "error: \(mark.device) changed on the line while this was resolving it (claimed or resolved again); nothing was written: list again with `provision review --line URL --run \(id)`")
                return ExitCode.invalidInput
            }
            out.out(escaping: "\(mark.device): recorded \(mark.outcome.rawValue) on run \(id) (was in doubt on `\(unit.step ?? "?")`), by \(mark.by): \(mark.note)")
            return ExitCode.success
        } catch let e as PostgresError where e.sqlState == SQLState.insufficientPrivilege {
            out.err(escaping: "error: this role may not resolve devices on the line (\(e)): a station's role may, once the line's owner has run `provision line grant` at schema \(LineSchema.version)")
            return ExitCode.environment
        } catch {
            let (message, code) = LineOption.describe(error)
            out.err(escaping: "error: \(message)")
            return code
        }
    }
}
