import Foundation
import PostgresClient

/// Where a device of a run stands in the line database.
public enum DeviceState: String, Sendable, CaseIterable, PostgresDecodable {
    /// Nobody holds it; the next station that hears it may claim it.
    case pending
    /// A station holds its lease and works on it.
    case claimed
    case succeeded
    case failed
    /// A station announced an irreversible write and no outcome followed (its lease expired, or it was
    /// interrupted), or its outcome says it could not learn whether the write took effect: the device may
    /// or may not have received the write; an operator decides (`provision review --line`).
    case needsReview = "needs_review"

    public static let postgresTypes = String.postgresTypes
    public static func decode(postgresText text: String) -> DeviceState? { DeviceState(rawValue: text) }
}

/// A file a run is defined by (the workflow, the inventory), as the report names it.
public struct LineFile: Sendable, Equatable {
    public var name: String?
    public var path: String
    public var sha256: String

    public init(name: String? = nil, path: String, sha256: String) {
        self.name = name
        self.path = path
        self.sha256 = sha256
    }
}

/// A run of the line: one workflow over one inventory, shared by every station that joins it.
public struct LineRun: Sendable, Equatable {
    public var id: String
    public var workflow: LineFile
    public var inventory: LineFile
    public var options: [String: String]
    public var toolVersion: String
    /// The type name of each value the workflow captures (`uint`, `version`, …), as a report's
    /// `run.capture_types`; nil for a run created before the line kept them.
    public var captureTypes: [String: String]?
    /// The captured values that are checksums, with their width in bits (a report's `run.checksums`);
    /// nil when there are none, or for a run created before the line kept them.
    public var checksums: [String: Int]?

    public init(id: String, workflow: LineFile, inventory: LineFile, options: [String: String] = [:], toolVersion: String,
                captureTypes: [String: String]? = nil, checksums: [String: Int]? = nil) {
        self.id = id
        self.workflow = workflow
        self.inventory = inventory
        self.options = options
        self.toolVersion = toolVersion
        self.captureTypes = captureTypes
        self.checksums = checksums
    }
}

/// One station process: the lease owner of the devices it claims.
public struct LineStationInfo: Sendable, Equatable {
    /// Unique per station process (`name/xxxxxxxx`): a restarted station is a new lease owner, so the
    /// leases of the one that died expire instead of being taken over by a process that never held them.
    public var id: String
    /// The station's name for people (by default the host name).
    public var name: String
    public var host: String
    public var adapters: [String]
    public var toolVersion: String
    public var pid: Int?

    public init(id: String, name: String, host: String, adapters: [String], toolVersion: String, pid: Int? = nil) {
        self.id = id
        self.name = name
        self.host = host
        self.adapters = adapters
        self.toolVersion = toolVersion
        self.pid = pid
    }

    /// A station of this process: `name` (default: the host name), a fresh id, this process's id.
    public static func thisProcess(name: String? = nil, adapters: [String], toolVersion: String) -> LineStationInfo {
        let host = ProcessInfo.processInfo.hostName
        let name = name ?? host
        let suffix = UUID().uuidString.lowercased().prefix(8)
        return LineStationInfo(id: "\(name)/\(suffix)", name: name, host: host, adapters: adapters, toolVersion: toolVersion,
                               pid: Int(ProcessInfo.processInfo.processIdentifier))
    }
}

/// A device a station holds: its attempt number is the lease's fencing token (every intent and outcome
/// names it, and only the current attempt's holder may write).
public struct LineClaim: Sendable, Hashable {
    public var device: String
    /// How many times the device has been claimed in this run, this claim included.
    public var attempt: Int
    /// When the lease ends unless renewed (the database's clock).
    public var leaseExpires: Date
    /// For a device claimed to be asked again (`LineRecheck`): the irreversible step in doubt, whose
    /// intent stands until this attempt's outcome.
    public var rechecking: String? = nil
}

/// A station that asks devices under review again (`provision run --line URL --recheck IDS`): it
/// claims only these devices, and only while they are under review after an intent of one of `steps`
/// (the workflow's irreversible steps that declare a `confirm` read) — each once per station. The claim
/// keeps the intent standing: an attempt cut again leaves the device under review, as before.
public struct LineRecheck: Sendable, Equatable {
    public var devices: [String]
    public var steps: [String]

    public init(devices: [String], steps: [String]) {
        self.devices = devices
        self.steps = steps
    }
}

/// An irreversible write about to be sent.
public struct LineIntent: Sendable, Equatable {
    public var device: String
    public var attempt: Int
    public var stepIndex: Int
    public var step: String

    public init(device: String, attempt: Int, stepIndex: Int, step: String) {
        self.device = device
        self.attempt = attempt
        self.stepIndex = stepIndex
        self.step = step
    }
}

/// A device's outcome: the columns an auditor queries, and the device record (JSON, secrets already
/// redacted by the engine) as the report holds it.
public struct LineOutcome: Sendable, Equatable {
    /// The outcome values of the report.
    public enum Kind: String, Sendable, CaseIterable {
        case succeeded, failed, skipped, interrupted
    }

    public var device: String
    public var attempt: Int
    public var outcome: Kind
    public var errorKind: String?
    public var errorStep: String?
    public var errorMessage: String?
    public var firmware: String?
    public var adapter: String?
    public var rssi: Int?
    public var started: Date?
    public var finished: Date
    public var durationMs: Double?
    /// The device record as JSON text (a JSON object).
    public var record: String

    public init(device: String, attempt: Int, outcome: Kind, errorKind: String? = nil, errorStep: String? = nil,
                errorMessage: String? = nil, firmware: String? = nil, adapter: String? = nil, rssi: Int? = nil,
                started: Date? = nil, finished: Date, durationMs: Double? = nil, record: String) {
        self.device = device
        self.attempt = attempt
        self.outcome = outcome
        self.errorKind = errorKind
        self.errorStep = errorStep
        self.errorMessage = errorMessage
        self.firmware = firmware
        self.adapter = adapter
        self.rssi = rssi
        self.started = started
        self.finished = finished
        self.durationMs = durationMs
        self.record = record
    }
}

/// What became of one intent or outcome written by a station.
public enum LineWriteResult: Sendable, Equatable {
    /// Written now; the device's state after the write.
    case recorded(DeviceState)
    /// This outcome was already written by this station (a retry after a lost connection).
    case alreadyRecorded
    /// The station no longer holds the device: nothing was written.
    case leaseLost(LeaseLoss)
}

/// Why a station's write about a device was refused: who or what holds the device now.
public struct LeaseLoss: Error, Sendable, Equatable, CustomStringConvertible {
    public var device: String
    /// The attempt the station claimed.
    public var attempt: Int
    public var station: String
    /// The device's state now (nil: the device is not in the run).
    public var state: DeviceState?
    /// Who holds it now, if anyone.
    public var owner: String?
    public var currentAttempt: Int?

    public var description: String {
        var text = "lease lost: station \(station) no longer holds device \(device) (attempt \(attempt))"
        switch (state, owner) {
        case (nil, _): text += "; the device is not in this run"
        case (.claimed?, let owner?): text += "; station \(owner) holds it now (attempt \(currentAttempt ?? 0))"
        case (let s?, _): text += "; it is \(s.rawValue) now" + (currentAttempt.map { " (attempt \($0))" } ?? "")
        }
        return text + "; nothing was written"
    }
}

/// Line-level failures (database failures are `PostgresError`s).
public enum LineError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The database's schema is newer than this tool understands.
    case schemaTooNew(database: Int, tool: Int)
    /// The schema needs migrating and this role may not do it.
    case cannotMigrate(database: Int?, tool: Int, cause: PostgresError)
    /// The database holds no line schema (`provision line init` creates it).
    case noSchema
    /// Privileges can be granted only by the schema's owner.
    case notOwner(owner: String, role: String)
    /// Roles to grant to that do not exist (an administrator creates them).
    case missingRoles([String])
    /// The run exists with another workflow or inventory.
    case runMismatch(run: String, what: String, line: String, local: String)
    /// The station does not hold the device.
    case leaseLost(LeaseLoss)
    /// A request this API refuses before sending (named).
    case invalidRequest(String)

    public var description: String {
        switch self {
        case .schemaTooNew(let database, let tool):
            return "the line database's schema is at version \(database), newer than this tool's \(tool); upgrade provision on this station"
        case .cannotMigrate(let database, let tool, let cause):
            let from = database.map { "at version \($0)" } ?? "not created yet"
            return "the line database's schema is \(from) and this tool needs version \(tool), but this role may not change it (\(cause.message)); "
                + (database == nil ? "create it with `provision line init`" : "bring it up to date with `provision line migrate`")
                + " as the database's owner (docs/line.md)"
        case .noSchema:
            return "the database holds no line yet; create it with `provision line init` as the database's owner (docs/line.md)"
        case .notOwner(let owner, let role):
            return "only the line's owner can grant its privileges: the schema `provision` belongs to \(owner), and this is \(role)"
        case .missingRoles(let roles):
            let groups = [LineSchema.stationGroup, LineSchema.auditorGroup]
            let create = roles.map { "CREATE ROLE \($0) \(groups.contains($0) ? "NOLOGIN" : "LOGIN PASSWORD '…'")" }
            return "no role \(roles.map { "`\($0)`" }.joined(separator: ", ")) in this cluster; an administrator creates \(roles.count == 1 ? "it" : "them") first (\(create.joined(separator: "; ")); docs/line.md)"
        case .runMismatch(let run, let what, let line, let local):
            return "run \(run) on the line was started with \(what) sha256 \(line.prefix(12))…, but this station has sha256 \(local.prefix(12))…; every station of a run needs the same workflow and inventory"
        case .leaseLost(let loss):
            return loss.description
        case .invalidRequest(let what):
            return what
        }
    }
}
