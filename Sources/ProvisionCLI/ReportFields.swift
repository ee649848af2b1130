import Engine
import Foundation
import Workflow

/// The fields of a report's devices that `provision report --where` and `--group-by` name, each with
/// its type (docs/report.md, "Fields"):
///
/// | field | type |
/// |---|---|
/// | `id`, `name`, `address`, `adapter`, `station`, `started` | text |
/// | `security.level` | one of none, encrypted, authenticated; `security.method` one of just_works, passkey_entry, oob, numeric_comparison; `security.bond` one of made, used, none |
/// | `security.key_size` | uint; `security.secure_connections`, `security.bond_lost` boolean |
/// | `outcome` | one of succeeded, failed, skipped, interrupted |
/// | `error.kind` (also `error`) | one of the error kinds; `error.step`, `error.message` text |
/// | `rssi` | int; `attempts`, `att_round_trips` uint; `duration_ms` real |
/// | `resumed`, `carried_over` | boolean |
/// | every captured value | under its name and as `captured.NAME`, typed by `run.capture_types` |
/// | `step.STEP.outcome`, `step.STEP.duration_ms`, `step.STEP.attempts` | per step, STEP its name as a slug |
/// | `measurement.NAME` (pass or fail), `measurement.NAME.value` | per verify, NAME its name as a slug |
/// | `measurements_failed` | uint: how many verifies failed |
///
/// A slug is the name in lower case with every run of other characters than letters, digits and `-`
/// made one `_` (`set configuration` → `set_configuration`); a name used twice gets `_2`, `_3`, ….
/// A captured value whose name is already a field above is only `captured.NAME`.
struct ReportFields {
    /// Every field with its type, for `Expression.check(fields:)`.
    let types: [String: FieldType]
    /// Field names in the order docs and `--help` list them.
    let names: [String]
    /// True when captured values had no types (a `provision.report/1` report): they are text.
    let untypedCaptures: Bool

    private let captureTypes: [String: ValueType]
    private let stepSlugs: [String: Int]
    private let measurementSlugs: [String: String]

    static let outcomes = DeviceOutcome.allCases.map(\.rawValue)
    static let errorKinds = FailureKind.allCases.map(\.rawValue)
    static let stepOutcomes = StepOutcome.allCases.map(\.rawValue)

    /// The built-in fields, in order, with their types.
    static let builtins: [(name: String, type: FieldType)] = [
        ("id", FieldType(.text)), ("name", FieldType(.text)), ("address", FieldType(.text)),
        ("outcome", .enumeration(outcomes)),
        ("error.kind", .enumeration(errorKinds)), ("error", .enumeration(errorKinds)),
        ("error.step", FieldType(.text)), ("error.message", FieldType(.text)),
        ("adapter", FieldType(.text)), ("rssi", FieldType(.integer(signed: true))),
        ("attempts", FieldType(.integer(signed: false))), ("duration_ms", FieldType(.real)),
        ("started", FieldType(.text)), ("att_round_trips", FieldType(.integer(signed: false))),
        ("resumed", FieldType(.boolean)), ("carried_over", FieldType(.boolean)),
        ("measurements_failed", FieldType(.integer(signed: false))),
        ("station", FieldType(.text)),
        ("security.level", .enumeration(["none", "encrypted", "authenticated"])),
        ("security.method", .enumeration(["just_works", "passkey_entry", "oob", "numeric_comparison"])),
        ("security.bond", .enumeration(["made", "used", "none"])),
        ("security.key_size", FieldType(.integer(signed: false))), ("security.secure_connections", FieldType(.boolean)),
        ("security.bond_lost", FieldType(.boolean)),
    ]

    /// The fields of a report held in memory.
    init(_ report: RunReport) {
        var catalog = ReportCatalog()
        for d in report.devices { catalog.add(d) }
        self.init(run: report.run, catalog: catalog)
    }

    /// The fields of a report from its run and what its devices hold (gathered as they streamed past).
    init(run: RunInfo, catalog: ReportCatalog) {
        var types: [String: FieldType] = [:]
        var names: [String] = []
        func add(_ name: String, _ type: FieldType) {
            guard types[name] == nil else { return }
            types[name] = type
            names.append(name)
        }
        for b in Self.builtins { add(b.name, b.type) }

        // Captured values: typed by the report, or text in an older one.
        var captureTypes = run.captureTypes ?? [:]
        untypedCaptures = run.captureTypes == nil
        for key in catalog.capturedKeys where captureTypes[key] == nil { captureTypes[key] = .text }
        self.captureTypes = captureTypes
        for key in captureTypes.keys.sorted() {
            let type = FieldType(captureTypes[key] ?? .text)
            add(key, type)
            add("captured." + key, type)
        }

        // Steps, by the names of the longest step list (every device runs the same workflow).
        var stepSlugs: [String: Int] = [:]
        for (i, slug) in Self.slugs(catalog.steps).enumerated() {
            stepSlugs[slug] = i
            add("step.\(slug).outcome", .enumeration(Self.stepOutcomes))
            add("step.\(slug).duration_ms", FieldType(.real))
            add("step.\(slug).attempts", FieldType(.integer(signed: false)))
        }
        self.stepSlugs = stepSlugs

        // Measurements, by name (their value type from the first that has one).
        var measurementSlugs: [String: String] = [:]
        for (name, slug) in zip(catalog.measurementNames, Self.slugs(catalog.measurementNames)) {
            measurementSlugs[slug] = name
            add("measurement.\(slug)", .enumeration(["pass", "fail"]))
            if let t = catalog.valueTypes[name] { add("measurement.\(slug).value", FieldType(t)) }
        }
        self.measurementSlugs = measurementSlugs
        self.types = types
        self.names = names
    }

    /// Every field's value for one device (a field with no value is absent).
    func values(_ d: DeviceRecord) -> [String: TypedValue] {
        var v: [String: TypedValue] = [:]
        v["id"] = .text(d.id)
        v["name"] = d.name.map { .text($0) }
        v["address"] = d.address.map { .text($0) }
        v["outcome"] = .text(d.outcome.rawValue)
        if let e = d.error {
            v["error.kind"] = .text(e.kind.rawValue)
            v["error"] = .text(e.kind.rawValue)
            v["error.step"] = e.step.map { .text($0) }
            v["error.message"] = .text(e.message)
        }
        v["adapter"] = d.adapter.map { .text($0) }
        v["station"] = d.station.map { .text($0) }
        if let sec = d.security {
            v["security.level"] = .text(sec.level.name)
            v["security.method"] = sec.method.map { .text($0.rawValue) }
            v["security.bond"] = .text(sec.bond.rawValue)
            v["security.key_size"] = sec.keySize.map { .integer(Int64(max(0, $0)), signed: false) }
            v["security.secure_connections"] = sec.secureConnections.map { .boolean($0) }
            v["security.bond_lost"] = .boolean(sec.bondLost == true)
        }
        v["rssi"] = d.rssi.map { .integer(Int64($0), signed: true) }
        v["attempts"] = .integer(Int64(max(0, d.attempts)), signed: false)
        v["duration_ms"] = d.durationMs.map { .real($0) }
        v["started"] = d.started.map { .text($0.iso) }
        v["att_round_trips"] = d.attRoundTrips.map { .integer(Int64(max(0, $0)), signed: false) }
        v["resumed"] = .boolean(d.resumed == true)
        v["carried_over"] = .boolean(d.carriedOver == true)
        v["measurements_failed"] = .integer(Int64((d.measurements ?? []).filter { !$0.result.passed }.count), signed: false)
        for (key, scalar) in d.captured {
            guard let value = captured(scalar, key) else { continue }
            if Self.builtins.allSatisfy({ $0.name != key }) { v[key] = value }
            v["captured." + key] = value
        }
        for (slug, i) in stepSlugs where i < d.steps.count {
            let s = d.steps[i]
            v["step.\(slug).outcome"] = .text(s.outcome.rawValue)
            v["step.\(slug).duration_ms"] = .real(s.durationMs)
            v["step.\(slug).attempts"] = .integer(Int64(max(0, s.attempts)), signed: false)
        }
        for (slug, name) in measurementSlugs {
            // The last verify of that name decides (a workflow rarely checks one name twice).
            guard let m = (d.measurements ?? []).last(where: { $0.result.name == name }) else { continue }
            v["measurement.\(slug)"] = .text(m.result.outcome.rawValue)
            if let value = m.result.value { v["measurement.\(slug).value"] = value }
        }
        return v
    }

    /// A captured value with its type; nil for a redacted secret (`***` is not a value of its type) or
    /// a value that does not read back as its declared type.
    func captured(_ scalar: JSONScalar, _ key: String) -> TypedValue? {
        if scalar == .string(Inventory.redacted) { return nil }
        if scalar == .null { return nil }
        return try? TypedValue(json: scalar, as: captureTypes[key] ?? .text)
    }

    /// The type of a field, for messages: `battery (an unsigned integer)`.
    func type(of field: String) -> FieldType? { types[field] }

    /// Slugs for names, unique in order: `set configuration` → `set_configuration`, a second one `_2`.
    static func slugs(_ names: [String], empty: String = "unnamed") -> [String] {
        var seen: [String: Int] = [:]
        return names.map { name in
            var slug = ""
            var pendingUnderscore = false
            for c in name.lowercased().unicodeScalars {
                let keep = (c >= "a" && c <= "z") || (c >= "0" && c <= "9") || c == "-"
                if keep {
                    if pendingUnderscore, !slug.isEmpty { slug += "_" }
                    pendingUnderscore = false
                    slug.unicodeScalars.append(c)
                } else {
                    pendingUnderscore = true
                }
            }
            if slug.isEmpty { slug = empty }
            let n = (seen[slug] ?? 0) + 1
            seen[slug] = n
            return n == 1 ? slug : "\(slug)_\(n)"
        }
    }
}

/// What the devices of a report hold that decides its fields, gathered one device at a time (a
/// streamed report is never held whole): the captured names, the longest step list, the measurements.
struct ReportCatalog {
    private(set) var capturedKeys: Set<String> = []
    /// The names of the longest step list seen.
    private(set) var steps: [String] = []
    /// Measurement names in the order first seen, and the type of the first value of each.
    private(set) var measurementNames: [String] = []
    private(set) var valueTypes: [String: ValueType] = [:]
    private var measured: Set<String> = []

    mutating func add(_ d: DeviceRecord) {
        for key in d.captured.keys { capturedKeys.insert(key) }
        if d.steps.count > steps.count { steps = d.steps.map(\.name) }
        for m in d.measurements ?? [] {
            if measured.insert(m.result.name).inserted { measurementNames.append(m.result.name) }
            if valueTypes[m.result.name] == nil, let v = m.result.value { valueTypes[m.result.name] = v.type }
        }
    }
}
