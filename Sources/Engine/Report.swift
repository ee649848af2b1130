import BLE
import Foundation
import Support
import SystemIO
import Workflow

/// The JSON report of a run (schema `provision.report/2`, documented in docs/report.md and
/// docs/report.schema.json). Derived from the journal; written atomically.
///
/// Version 2 (typed values): `devices[].captured` holds each value as the JSON of its type (numbers as
/// numbers), the types are in `run.capture_types`; `devices[].measurements` records every `verify`;
/// steps can be `skipped_by_condition` and carry `optional` / `continue_on_error`.
public struct RunReport: Codable, Sendable, Equatable, SortedRecordKeys {
    public static let schemaVersion = "provision.report/2"

    public var schema: String
    public var run: RunInfo
    public var summary: Summary
    public var devices: [DeviceRecord]

    /// In sorted order (`SortedRecordKeys`): the devices come first, so the report is streamed to its
    /// file device by device.
    enum CodingKeys: String, CodingKey {
        case devices, run, schema, summary
    }

    public init(run: RunInfo, summary: Summary, devices: [DeviceRecord]) {
        self.schema = Self.schemaVersion
        self.run = run
        self.summary = summary
        self.devices = devices
    }
}

/// A file a run read, with its hash.
public struct FileRef: Codable, Sendable, Equatable {
    public var name: String?
    public var path: String
    public var sha256: String
    public init(name: String? = nil, path: String, sha256: String) {
        self.name = name
        self.path = path
        self.sha256 = sha256
    }
}

/// An adapter a run used.
public struct AdapterInfo: Codable, Sendable, Equatable {
    public var id: String
    public var simulated: Bool
    public var slots: Int
    /// Set when the adapter failed during the run.
    public var failure: String?
    /// Most links held at once.
    public var peakLinks: Int?
    /// The station's identity on this adapter: the address it connects from, under which devices keep
    /// their bonds with the station (absent for the simulator).
    public var identity: String?
    public init(id: String, simulated: Bool, slots: Int, failure: String? = nil, peakLinks: Int? = nil, identity: String? = nil) {
        self.id = id
        self.simulated = simulated
        self.slots = slots
        self.failure = failure
        self.peakLinks = peakLinks
        self.identity = identity
    }
}

/// Run metadata.
public struct RunInfo: Codable, Sendable, Equatable {
    public var id: String
    public var workflow: FileRef
    public var inventory: FileRef
    public var adapters: [AdapterInfo]
    public var simulated: Bool
    public var station: String
    public var toolVersion: String
    public var options: [String: String]
    public var started: WallTime
    public var finished: WallTime?
    /// The journal this run wrote (and resumed from, when `resumed` is true).
    public var journal: String?
    public var resumed: Bool
    /// Set when the line was stopped (failure threshold) or the run interrupted.
    public var stopped: StopInfo?
    /// Most devices in flight at once.
    public var peakConcurrency: Int?
    /// The type of every value the workflow captures (`read … as:`, `await … capture:`, `set:`), by
    /// name: the same for every device, so `devices[].captured` holds bare JSON values and this map
    /// says how to read them back (`TypedValue(json:as:)`). Nil only in reports of older versions.
    public var captureTypes: [String: ValueType]?
    /// The run's metadata (operator, lot, work order...): the inventory's `meta:` with `--meta KEY=VALUE`
    /// over it. Absent when there is none.
    public var meta: [String: String]?
    /// The captured values that are checksums (`set: { crc: … }`), by name, with their width in bits:
    /// numbers in `devices[].captured`, shown in hex by the text, CSV and HTML reports. Absent when none.
    public var checksums: [String: Int]?
    /// What `--on-device CMD` did for this run's finished devices; absent when no command was given.
    public var onDevice: OnDeviceInfo?

    /// A captured value as a person reads it: a checksum in hex (`0xC822`), anything else as its text.
    public func shown(captured key: String, _ value: JSONScalar) -> String {
        if let width = checksums?[key], case .integer(let n) = value, n >= 0 {
            let digits = String(UInt64(n), radix: 16, uppercase: true)
            return "0x" + String(repeating: "0", count: max(0, width / 4 - digits.count)) + digits
        }
        return value.text
    }

    /// The metadata in one line, in key order (`lot=L-42, operator=ana`); nil when there is none.
    public var metaText: String? {
        guard let meta, !meta.isEmpty else { return nil }
        return meta.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", ")
    }

    public init(id: String, workflow: FileRef, inventory: FileRef, adapters: [AdapterInfo], simulated: Bool, station: String,
                toolVersion: String, options: [String: String], started: WallTime, finished: WallTime? = nil,
                journal: String? = nil, resumed: Bool = false, stopped: StopInfo? = nil, peakConcurrency: Int? = nil,
                captureTypes: [String: ValueType]? = nil, meta: [String: String]? = nil, checksums: [String: Int]? = nil,
                onDevice: OnDeviceInfo? = nil) {
        self.meta = meta?.isEmpty == true ? nil : meta
        self.checksums = checksums?.isEmpty == true ? nil : checksums
        self.id = id
        self.workflow = workflow
        self.inventory = inventory
        self.adapters = adapters
        self.simulated = simulated
        self.station = station
        self.toolVersion = toolVersion
        self.options = options
        self.started = started
        self.finished = finished
        self.journal = journal
        self.resumed = resumed
        self.stopped = stopped
        self.peakConcurrency = peakConcurrency
        self.captureTypes = captureTypes
        self.onDevice = onDevice
    }
}

/// What `provision run --on-device CMD` did (`run.on_device`): the command, run once for each device
/// that finished in this run (succeeded or failed), how many ran, which of them failed and why, and the
/// devices whose command was never started because the operator stopped the run before its turn. A
/// command's failure is recorded here and changes no device's outcome.
public struct OnDeviceInfo: Codable, Sendable, Equatable {
    /// A command that exited non-zero, could not start, or ran past its time limit (and was stopped).
    public struct Failure: Codable, Sendable, Equatable {
        public var device: String
        /// Why: `exit status 3`, `killed by signal 9`, `did not finish within 10s (stopped)`, `cannot start /bin/sh: …`.
        public var message: String

        public init(device: String, message: String) {
            self.device = device
            self.message = message
        }
    }

    /// The command as given (`sh -c COMMAND`).
    public var command: String
    /// `--on-device-timeout`.
    public var timeoutMs: Double
    /// Commands run (failed ones included), in the order devices finished.
    public var run: Int
    /// The commands that failed, in the order they ran.
    public var failed: [Failure]
    /// The devices whose command was not started: the operator stopped the run (Ctrl-C) and its devices
    /// were done. Absent when there are none.
    public var notRun: [String]?

    public init(command: String, timeoutMs: Double, run: Int = 0, failed: [Failure] = [], notRun: [String]? = nil) {
        self.command = command
        self.timeoutMs = timeoutMs
        self.run = run
        self.failed = failed
        self.notRun = notRun?.isEmpty == true ? nil : notRun
    }

    /// `4 run, 2 failed (SN-0002, SN-0003)`, then `, 1 not run: the run was stopped (SN-0009)` when some
    /// were not started.
    public var sentence: String {
        var text = "\(run) run, \(failed.count) failed" + (failed.isEmpty ? "" : " (" + failed.map(\.device).joined(separator: ", ") + ")")
        if let notRun, !notRun.isEmpty { text += ", \(notRun.count) not run: the run was stopped (" + notRun.joined(separator: ", ") + ")" }
        return text
    }
}

/// Why a run stopped early.
public struct StopInfo: Codable, Sendable, Equatable {
    public var reason: StopReason
    public var message: String
    public var at: WallTime
    public init(reason: StopReason, message: String, at: WallTime = .now()) {
        self.reason = reason
        self.message = message
        self.at = at
    }
}

/// Why a run stopped early, as `run.stopped.reason` writes it. Open: a reason another station or a
/// newer provision wrote survives being read.
public struct StopReason: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// `--max-failures` was crossed while devices were still waiting (they are `skipped`).
    public static let failureThreshold = StopReason(rawValue: "failure_threshold")
    /// An operator's stop (Ctrl-C, SIGTERM, SIGHUP).
    public static let interrupted = StopReason(rawValue: "interrupted")
    /// The journal could not be written: no device started after it.
    public static let journalFailed = StopReason(rawValue: "journal_failed")

    public var description: String { rawValue }

    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
}

/// Counts and timings over all devices.
public struct Summary: Codable, Sendable, Equatable {
    public struct Percentiles: Codable, Sendable, Equatable {
        public var p50: Double
        public var p95: Double
        public var max: Double
    }

    public var total: Int
    /// Devices by outcome (every outcome, zero included).
    public var outcomes: OutcomeCounts
    public var errors: [String: Int]
    public var devicesPerMinute: Double
    public var durationMs: Percentiles?
    public var wallMs: Double
    public var attRoundTripsPerDevice: Double?

    /// The counts in words: `24 device(s): 21 succeeded, 2 failed, 1 skipped` (skipped and
    /// interrupted only when there are any).
    public var sentence: String {
        var text = "\(total) device(s): \(outcomes[.succeeded]) succeeded, \(outcomes[.failed]) failed"
        for o in [DeviceOutcome.skipped, .interrupted] where outcomes[o] > 0 { text += ", \(outcomes[o]) \(o.rawValue)" }
        return text
    }

    /// Computes the summary from device records over a wall time.
    public static func compute(_ devices: [DeviceRecord], wall: Duration) -> Summary {
        var tally = SummaryTally()
        for d in devices { tally.add(d) }
        return tally.summary(wall: wall)
    }
}

/// The summary counted record by record, as records arrive (a run's report is written without holding
/// every record): counts by outcome and error kind, the durations of the devices that finished here,
/// and the ATT round trips of those that succeeded.
struct SummaryTally: Sendable {
    private var total = 0
    private var outcomes = OutcomeCounts()
    private var errors: [String: Int] = [:]
    private var durations: [Double] = []
    private var roundTrips = 0
    private var roundTripDevices = 0
    private var finishedHere = 0

    /// What the summary needs of one device's record.
    struct Entry: Sendable {
        var outcome: DeviceOutcome
        var errorKind: FailureKind?
        var durationMs: Double?
        var carriedOver: Bool
        var attRoundTrips: Int?

        init(_ d: DeviceRecord) {
            outcome = d.outcome
            errorKind = d.error?.kind
            durationMs = d.durationMs
            carriedOver = d.carriedOver == true
            attRoundTrips = d.attRoundTrips
        }
    }

    mutating func add(_ d: DeviceRecord) { add(Entry(d)) }

    mutating func add(_ d: Entry) {
        total += 1
        outcomes[d.outcome] += 1
        if let e = d.errorKind { errors[e.rawValue, default: 0] += 1 }
        if !d.carriedOver, d.outcome == .succeeded || d.outcome == .failed {
            finishedHere += 1
            if let ms = d.durationMs { durations.append(ms) }
        }
        if d.outcome == .succeeded, !d.carriedOver, let rt = d.attRoundTrips {
            roundTrips += rt
            roundTripDevices += 1
        }
    }

    func summary(wall: Duration) -> Summary {
        let sorted = durations.sorted()
        // Nearest rank, the one percentile definition (`Percentile`, docs/report.md).
        func pct(_ p: Int) -> Double { Percentile.of(sorted, percent: p) ?? 0 }
        let wallMs = wall.milliseconds
        return Summary(
            total: total, outcomes: outcomes, errors: errors,
            devicesPerMinute: wallMs > 0 ? (Double(finishedHere) / (wallMs / 60_000)).rounded(toPlaces: 1) : 0,
            durationMs: sorted.isEmpty ? nil : Summary.Percentiles(p50: pct(50), p95: pct(95), max: sorted.last ?? 0),
            wallMs: wallMs.rounded(toPlaces: 1),
            attRoundTripsPerDevice: roundTripDevices == 0 ? nil : (Double(roundTrips) / Double(roundTripDevices)).rounded(toPlaces: 1))
    }
}

/// How a device ended.
public enum DeviceOutcome: String, Codable, Sendable, CaseIterable {
    case succeeded, failed, skipped, interrupted
}

/// How many devices ended each way: `summary.outcomes`, written as an object with every outcome.
public struct OutcomeCounts: Codable, Sendable, Equatable {
    private var counts: [Int]

    public init() { counts = Array(repeating: 0, count: DeviceOutcome.allCases.count) }

    private static func index(_ o: DeviceOutcome) -> Int {
        switch o {
        case .succeeded: return 0
        case .failed: return 1
        case .skipped: return 2
        case .interrupted: return 3
        }
    }

    public subscript(_ o: DeviceOutcome) -> Int {
        get { counts[Self.index(o)] }
        set { counts[Self.index(o)] = newValue }
    }

    /// As JSON: `{"failed": n, "interrupted": n, "skipped": n, "succeeded": n}` (an outcome missing
    /// from a report read back counts 0; a name that is no outcome is an error).
    public func encode(to encoder: any Encoder) throws {
        var map: [String: Int] = [:]
        for o in DeviceOutcome.allCases { map[o.rawValue] = self[o] }
        var c = encoder.singleValueContainer()
        try c.encode(map)
    }

    public init(from decoder: any Decoder) throws {
        let map = try decoder.singleValueContainer().decode([String: Int].self)
        self.init()
        for (name, n) in map {
            guard let o = DeviceOutcome(rawValue: name) else {
                throw DecodingError.dataCorrupted(DecodingError.Context(codingPath: decoder.codingPath,
                                                                        debugDescription: "`\(name)` is not a device outcome"))
            }
            self[o] = n
        }
    }
}

/// A failure as the report shows it.
public struct FailureRecord: Codable, Sendable, Equatable, SortedRecordKeys {
    public var kind: FailureKind
    public var step: String?
    public var message: String
    public var causes: [String]

    /// In sorted order of their JSON names (`SortedRecordKeys`).
    enum CodingKeys: String, CodingKey {
        case causes, kind, message, step
    }

    public init(kind: FailureKind, step: String?, message: String, causes: [String] = []) {
        self.kind = kind
        self.step = step
        self.message = message
        self.causes = causes
    }
}

/// How a step ended.
public enum StepOutcome: String, Codable, Sendable, CaseIterable {
    case succeeded, failed
    /// Not reached (an earlier step failed, or the device was cut).
    case skipped
    /// Reached, but not run: its `when:` condition was false or unknown (`skip_reason` says which).
    case skippedByCondition = "skipped_by_condition"
}

/// One step of one device.
public struct StepRecord: Codable, Sendable, Equatable, SortedRecordKeys {
    public var name: String
    public var kind: StepKind
    public var outcome: StepOutcome
    public var attempts: Int
    /// Start, in milliseconds after the device started.
    public var startMs: Double
    public var durationMs: Double
    public var error: FailureRecord?
    /// Why a `skipped_by_condition` step did not run: its `when:` and what it evaluated to.
    public var skipReason: String?
    /// True for a step declared `optional: true`: its failure does not fail the device.
    public var optional: Bool?
    /// True for a step declared `continue_on_error: true`: after its failure the device goes on, and
    /// fails at the end.
    public var continueOnError: Bool?

    /// In sorted order of their JSON names (`SortedRecordKeys`).
    enum CodingKeys: String, CodingKey {
        case attempts, continueOnError, durationMs, error, kind, name, optional, outcome, skipReason, startMs
    }

    public init(name: String, kind: StepKind, outcome: StepOutcome, attempts: Int, startMs: Double, durationMs: Double, error: FailureRecord? = nil,
                skipReason: String? = nil, optional: Bool? = nil, continueOnError: Bool? = nil) {
        self.name = name
        self.kind = kind
        self.outcome = outcome
        self.attempts = attempts
        self.startMs = startMs
        self.durationMs = durationMs
        self.error = error
        self.skipReason = skipReason
        self.optional = optional
        self.continueOnError = continueOnError
    }
}

/// One device of the run.
public struct DeviceRecord: Codable, Sendable, Equatable, SortedRecordKeys {
    public var id: String
    public var address: String?
    public var name: String?
    public var outcome: DeviceOutcome
    /// Times the workflow was started for this device (a resumed device counts its earlier start).
    public var attempts: Int
    public var adapter: String?
    public var rssi: Int?
    public var started: WallTime?
    public var durationMs: Double?
    /// Captured values by name, each as the JSON of its type (`run.capture_types`): numbers as numbers,
    /// bytes as lower-case hex, versions and text as strings. A value that is secret, or shows a
    /// secret, is the string `"***"`.
    public var captured: [String: JSONScalar]
    /// Every `verify` the device ran, passed or failed, in the order they ran.
    public var measurements: [MeasurementRecord]?
    public var steps: [StepRecord]
    public var error: FailureRecord?
    /// Run again after a crash or interruption of an earlier run.
    public var resumed: Bool?
    /// Outcome taken from the journal of an earlier run (not run again).
    public var carriedOver: Bool?
    public var attRoundTrips: Int?
    /// The security its links reached (present when the workflow asks for security).
    public var security: SecurityRecord?
    /// What its last link got from the radio (present when the adapter can tell).
    public var link: LinkRecord?
    /// Why a skipped device was skipped.
    public var skipReason: String?
    /// The station (`--station`, default the host name) that worked the device: on a line, the one whose
    /// record this is.
    public var station: String?
    /// An operator's resolution of the device's doubt (`provision review --mark`), when this outcome is one.
    public var review: ReviewRecord?

    /// In sorted order of their JSON names (`SortedRecordKeys`).
    enum CodingKeys: String, CodingKey {
        case adapter, address, attRoundTrips, attempts, captured, carriedOver, durationMs, error, id, link, measurements, name, outcome,
             resumed, review, rssi, security, skipReason, started, station, steps
    }

    public init(id: String, address: String?, name: String?, outcome: DeviceOutcome, attempts: Int = 0, adapter: String? = nil,
                rssi: Int? = nil, started: WallTime? = nil, durationMs: Double? = nil, captured: [String: JSONScalar] = [:],
                measurements: [MeasurementRecord]? = nil, steps: [StepRecord] = [], error: FailureRecord? = nil, resumed: Bool? = nil,
                carriedOver: Bool? = nil, attRoundTrips: Int? = nil, skipReason: String? = nil, security: SecurityRecord? = nil,
                link: LinkRecord? = nil) {
        self.id = id
        self.address = address
        self.name = name
        self.outcome = outcome
        self.attempts = attempts
        self.adapter = adapter
        self.rssi = rssi
        self.started = started
        self.durationMs = durationMs
        self.captured = captured
        self.measurements = measurements
        self.steps = steps
        self.error = error
        self.resumed = resumed
        self.carriedOver = carriedOver
        self.attRoundTrips = attRoundTrips
        self.skipReason = skipReason
        self.security = security
        self.link = link
    }
}

/// An operator's resolution of a device in doubt (`provision review --mark`): the outcome it set comes
/// with who set it, when, why, and the doubt it replaced — recorded, never silent.
public struct ReviewRecord: Codable, Sendable, Equatable, SortedRecordKeys {
    /// When the operator resolved it.
    public var at: WallTime
    public var by: String
    public var note: String
    /// What the operator found: `succeeded` (the write took effect and the device is good) or `failed`
    /// (it did not, or the device was reset: `--resume --retry-failed` may run it again).
    public var resolution: DeviceOutcome
    /// The doubt it resolved: the earlier record's failure (or the intent, as a `needs_review` failure).
    public var previous: FailureRecord?

    /// In sorted order of their JSON names (`SortedRecordKeys`).
    enum CodingKeys: String, CodingKey {
        case at, by, note, previous, resolution
    }

    public init(at: WallTime, by: String, note: String, resolution: DeviceOutcome, previous: FailureRecord?) {
        self.at = at
        self.by = by
        self.note = note
        self.resolution = resolution
        self.previous = previous
    }
}

/// What a device's last link got from the radio, as its controller reported it: the PHY, the LL payload
/// (Data Length Extension), the connection interval, latency and supervision timeout, and the ATT MTU.
public struct LinkRecord: Codable, Sendable, Equatable, SortedRecordKeys {
    /// Octets per LL packet from the station (27 without Data Length Extension, up to 251).
    public var dataLength: Int
    public var intervalMs: Double
    public var latency: Int
    /// ATT_MTU of the link's bearer.
    public var mtu: Int?
    /// `1M`, `2M` or `coded`: the station's transmitter (the receiver's when they differ is `rx_phy`).
    public var phy: String
    /// The receiving PHY, when it differs from `phy`.
    public var rxPhy: String?
    public var supervisionTimeoutMs: Double

    /// In sorted order of their JSON names (`SortedRecordKeys`).
    enum CodingKeys: String, CodingKey {
        case dataLength, intervalMs, latency, mtu, phy, rxPhy, supervisionTimeoutMs
    }

    public init(phy: String, rxPhy: String? = nil, dataLength: Int, intervalMs: Double, latency: Int, supervisionTimeoutMs: Double, mtu: Int?) {
        self.phy = phy
        self.rxPhy = rxPhy
        self.dataLength = dataLength
        self.intervalMs = intervalMs
        self.latency = latency
        self.supervisionTimeoutMs = supervisionTimeoutMs
        self.mtu = mtu
    }
}

/// A device's link security as the report shows it: the level reached, how the keys were made, and
/// whether a bond was made or used. Never a key.
public struct SecurityRecord: Codable, Sendable, Equatable, SortedRecordKeys {
    /// `none`, `encrypted` or `authenticated`: what the device's last link reached.
    public var level: SecurityLevel
    /// `just_works`, `passkey_entry`, `oob` or `numeric_comparison`: how the last pairing authenticated;
    /// absent when the link was encrypted with a stored bond (or not at all).
    public var method: SecurityMethod?
    /// `made` (pairing made a bond), `used` (a stored bond encrypted the link without pairing) or `none`.
    public var bond: BondUse
    /// The device had lost its bond and was paired again (`on_bond_lost: pair`).
    public var bondLost: Bool?
    /// Encryption key size in octets, when encrypted.
    public var keySize: Int?
    /// LE Secure Connections (false: LE legacy pairing), when encrypted.
    public var secureConnections: Bool?

    /// In sorted order of their JSON names (`SortedRecordKeys`).
    enum CodingKeys: String, CodingKey {
        case bond, bondLost, keySize, level, method, secureConnections
    }

    public init(level: SecurityLevel, method: SecurityMethod? = nil, bond: BondUse = .none, keySize: Int? = nil, secureConnections: Bool? = nil,
                bondLost: Bool? = nil) {
        self.level = level
        self.method = method
        self.bond = bond
        self.keySize = keySize
        self.secureConnections = secureConnections
        self.bondLost = bondLost
    }

    /// The level by its name (`SecurityLevel` is numbered in memory, named in reports).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let name = try c.decode(String.self, forKey: .level)
        guard let level = SecurityLevel.allCases.first(where: { $0.name == name }) else {
            throw DecodingError.dataCorruptedError(forKey: .level, in: c, debugDescription: "`\(name)` is not a security level")
        }
        self.level = level
        method = try c.decodeIfPresent(SecurityMethod.self, forKey: .method)
        bond = try c.decode(BondUse.self, forKey: .bond)
        bondLost = try c.decodeIfPresent(Bool.self, forKey: .bondLost)
        keySize = try c.decodeIfPresent(Int.self, forKey: .keySize)
        secureConnections = try c.decodeIfPresent(Bool.self, forKey: .secureConnections)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(bond, forKey: .bond)
        try c.encodeIfPresent(bondLost, forKey: .bondLost)
        try c.encodeIfPresent(keySize, forKey: .keySize)
        try c.encode(level.name, forKey: .level)
        try c.encodeIfPresent(method, forKey: .method)
        try c.encodeIfPresent(secureConnections, forKey: .secureConnections)
    }
}

/// A step's kind as the report names it (`steps[].kind`): the workflow keyword (`read`, `write_blob`,
/// `set`, ...). Open: a kind a newer provision (or another family of steps) writes survives being read.
public struct StepKind: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }
    /// The kind of a workflow step.
    public init(_ kind: Step.Kind) { rawValue = kind.keyword }

    public var description: String { rawValue }

    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
}

extension Double {
    func rounded(toPlaces places: Int) -> Double {
        let m = pow(10.0, Double(places))
        return (self * m).rounded() / m
    }
}

/// JSON coding shared by the report and the journal: snake_case keys, sorted, stable.
extension DeviceRecord {
    /// The record as the report writes it, as one line of JSON (for stores that keep records apart from
    /// a report: the line database's outcomes, a station's spool).
    public func jsonText() -> String { String(decoding: RecordEncoder.compact(self), as: UTF8.self) }

    /// A record read back from `jsonText()` (or from a report's `devices` entry), through the engine's
    /// `RecordDecoder` (every number range-checked; an error says where).
    public static func read(json: some DataProtocol) throws -> DeviceRecord {
        try RecordDecoder().decode(DeviceRecord.self, from: Array(json))
    }
}

enum EngineJSON {
    static func encoder(pretty: Bool) -> JSONEncoder {
        let e = JSONEncoder()
        e.keyEncodingStrategy = .convertToSnakeCase
        e.outputFormatting = pretty ? [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        return e
    }

    static func decoder() -> JSONDecoder {
        let d = JSONDecoder()
        d.keyDecodingStrategy = .convertFromSnakeCase
        return d
    }
}

extension RunReport {
    /// Writes the report by the output-path rule (`AtomicFile`): a regular file is replaced atomically (a
    /// temporary file beside it, fsync, rename, fsync of the directory); a FIFO or device is written as it is.
    public func write(to path: String) throws {
        // Streamed in chunks of about 1 MiB: at 10,000 devices the whole text (~40 MB) and its copy
        // were most of the run's peak memory.
        try AtomicFile.write(to: path) { file in
            try RecordEncoder.stream(self, pretty: true, chunk: 1 << 20) { try file.write($0) }
            try file.write([0x0A])
        }
    }

    /// Reads a report back.
    public static func read(from path: String) throws -> RunReport {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return try EngineJSON.decoder().decode(RunReport.self, from: data)
    }
}
