import LineDatabase
import PostgresClient

/// `provision line init|migrate|grant`: setting a line up and keeping its schema current, as the
/// database's owner (a role with no right to create roles: docs/line.md, "Setting up a line").
extension LineCommand {
    static let setupActions = ["init", "migrate", "grant"]

    /// Runs a setup action on the line `cs`.
    func setup(_ action: String, line cs: ConnectionString, arguments: ParsedArguments, out: Output) async -> Int32 {
        let stations = arguments.values("station")
        let auditors = arguments.values("auditor")
        if action != "grant", !stations.isEmpty || !auditors.isEmpty {
            out.err("error: `--station` and `--auditor` go with `provision line grant`")
            return ExitCode.invalidInput
        }
        if arguments.value("run") != nil || arguments.flag("json") {
            out.err(escaping: "error: `provision line \(action)` works on the whole line (no --run, no --json)")
            return ExitCode.invalidInput
        }
        for role in stations + auditors where role.isEmpty || role.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            out.err(escaping: "error: `\(role)` is not a role name")
            return ExitCode.invalidInput
        }
        guard let connection = await Self.connect(cs, defaultTimeout: .seconds(60), out: out) else { return ExitCode.environment }
        defer { connection.close() }
        do {
            switch action {
            case "init": return try await initialize(connection, out: out)
            case "migrate": return try await migrate(connection, out: out)
            default:
                try await LineSchema.grant(connection, stations: stations.isEmpty ? [LineSchema.stationGroup] : stations,
                                           auditors: auditors.isEmpty && stations.isEmpty ? [LineSchema.auditorGroup] : auditors)
                let who = (stations.isEmpty ? [LineSchema.stationGroup] : stations).map { "\($0) (station)" }
                    + (auditors.isEmpty && stations.isEmpty ? [LineSchema.auditorGroup] : auditors).map { "\($0) (auditor)" }
                out.out(escaping: "granted the line's privileges to \(who.joined(separator: ", "))")
                return ExitCode.success
            }
        } catch let error as LineError {
            switch error {
            case .noSchema, .notOwner, .missingRoles, .schemaTooNew:
                out.err(escaping: "error: \(error)")
                return ExitCode.invalidInput
            default:
                out.err(escaping: "error: \(error)")
                return ExitCode.environment
            }
        } catch {
            out.err(escaping: "error: \(LineOption.describe(error).message)")
            return LineOption.describe(error).code
        }
    }

    /// Creates the line's schema in an empty database; a line already at this version is left alone.
    private func initialize(_ connection: PostgresConnection, out: Output) async throws -> Int32 {
        switch try await LineSchema.databaseVersion(connection) {
        case nil:
            let result = try await LineSchema.migrate(connection, toolVersion: ProvisionCLI.version)
            out.out("created the line schema at version \(result.to)")
            out.out("next: give the stations' and auditors' roles their privileges: provision line grant --line URL --station ROLE --auditor ROLE")
            return ExitCode.success
        case let version? where version == LineSchema.version:
            out.out("the line schema is already at version \(version); nothing to do")
            return ExitCode.success
        case let version? where version < LineSchema.version:
            out.err("error: the line schema is at version \(version) and this tool's is \(LineSchema.version): bring it up to date with `provision line migrate`")
            return ExitCode.invalidInput
        case let version?:
            throw LineError.schemaTooNew(database: version, tool: LineSchema.version)
        }
    }

    /// Brings an existing line's schema to this tool's version.
    private func migrate(_ connection: PostgresConnection, out: Output) async throws -> Int32 {
        guard try await LineSchema.databaseVersion(connection) != nil else { throw LineError.noSchema }
        let result = try await LineSchema.migrate(connection, toolVersion: ProvisionCLI.version)
        guard let from = result.from, !result.applied.isEmpty else {
            out.out("the line schema is already at version \(result.to); nothing to do")
            return ExitCode.success
        }
        out.out("migrated the line schema from version \(from) to \(result.to) (applied \(result.applied.map(String.init).joined(separator: ", ")))")
        if result.applied.contains(where: LineSchema.addsTables.contains) {
            out.out("next: run `provision line grant` again (with the same roles), so that they may use what the migration added")
        }
        return ExitCode.success
    }
}
