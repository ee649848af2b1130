import Engine
import Foundation
import EngineTestSupport
import TestSupport
import Workflow

/// Hand-made audit reports (docs/report.md's record: typed captured values with `run.capture_types`,
/// measurements), written to a test line's directory.
enum AuditReportFixture {
    /// One unit of the audited fleet: firmware (nil: not read), battery (nil: not read), outcome.
    struct Unit {
        var id: String
        var firmware: String?
        var battery: Int64?
        var outcome: DeviceOutcome = .succeeded
        var kind: FailureKind?
        var rssi: Int = -60
        var duration: Double = 120
    }

    /// Twelve units: firmware 1.9.0 ×2, 2.0.0 ×3, 2.4.1 ×4, 10.0.0 ×1 (text order would put it below
    /// 2.0), one never found; batteries from 12 to 100, two below 20 (their measurement fails).
    static let units: [Unit] = [
        Unit(id: "SN-0001", firmware: "2.4.1", battery: 87),
        Unit(id: "SN-0002", firmware: "1.9.0", battery: 19, outcome: .failed, kind: .verifyFailed, rssi: -80),
        Unit(id: "SN-0003", firmware: "2.0.0", battery: 64),
        Unit(id: "SN-0004", firmware: "10.0.0", battery: 100, rssi: -45),
        Unit(id: "SN-0005", firmware: "2.4.1", battery: 55),
        Unit(id: "SN-0006", firmware: "1.9.0", battery: 71),
        Unit(id: "SN-0007", firmware: nil, battery: nil, outcome: .failed, kind: .notFound, duration: 15_000),
        Unit(id: "SN-0008", firmware: "2.0.0", battery: 12, outcome: .failed, kind: .verifyFailed),
        Unit(id: "SN-0009", firmware: "2.4.1", battery: 93),
        Unit(id: "SN-0010", firmware: "2.0.0", battery: 40),
        Unit(id: "SN-0011", firmware: "2.4.1", battery: 78),
        Unit(id: "SN-0012", firmware: "2.4.1", battery: 33),
    ]

    static let captureTypes: [String: ValueType] = ["firmware": .version, "battery": .integer(signed: false), "model": .text, "config": .bytes]

    /// The steps every found unit ran, with their timings.
    static func steps(_ u: Unit) -> [StepRecord] {
        if u.kind == .notFound {
            return [StepRecord(name: "scan", kind: "scan", outcome: .failed, attempts: 3, startMs: 0, durationMs: u.duration,
                               error: FailureRecord(kind: .notFound, step: "scan", message: "no advertisement within 5s"))] +
                ["connect", "read firmware", "read battery", "battery level", "firmware is supported", "disconnect"].map {
                    StepRecord(name: $0, kind: "read", outcome: .skipped, attempts: 0, startMs: 0, durationMs: 0)
                }
        }
        let batteryFails = (u.battery ?? 100) < 20
        return [
            StepRecord(name: "scan", kind: "scan", outcome: .succeeded, attempts: 1, startMs: 0, durationMs: 20),
            StepRecord(name: "connect", kind: "connect", outcome: .succeeded, attempts: 1, startMs: 20, durationMs: 60),
            StepRecord(name: "read firmware", kind: "read", outcome: .succeeded, attempts: 1, startMs: 80, durationMs: 10),
            StepRecord(name: "read battery", kind: "read", outcome: .succeeded, attempts: 1, startMs: 90, durationMs: 10),
            StepRecord(name: "battery level", kind: "verify", outcome: batteryFails ? .failed : .succeeded, attempts: 1, startMs: 100,
                       durationMs: 1, error: batteryFails ? FailureRecord(kind: .verifyFailed, step: "battery level",
                                                                          message: "battery level \(u.battery ?? 0) % is below min 20 %") : nil,
                       continueOnError: true),
            StepRecord(name: "firmware is supported", kind: "verify", outcome: .succeeded, attempts: 1, startMs: 101, durationMs: 1),
            StepRecord(name: "disconnect", kind: "disconnect", outcome: .succeeded, attempts: 1, startMs: 102, durationMs: 5),
        ]
    }

    static func device(_ u: Unit, index: Int) -> DeviceRecord {
        var captured: [String: JSONScalar] = ["model": "sensor-v2"]
        if let f = u.firmware { captured["firmware"] = .string(f) }
        if let b = u.battery { captured["battery"] = .integer(b) }
        captured["config"] = .string(index == 4 ? "***" : String(format: "c0ffee%02x", index + 1))
        var measurements: [MeasurementRecord] = []
        if u.kind != .notFound {
            let battery = MeasurementLimits(min: .integer(20, signed: false), max: .integer(100, signed: false))
                .check(u.battery.map { .integer($0, signed: false) }, name: "battery level", unit: "%")
            measurements.append(MeasurementRecord(step: 4, result: battery))
            let fw = MeasurementLimits(versionAtLeast: try? SemanticVersion(parsing: "1.5"))
                .check(u.firmware.flatMap { try? SemanticVersion(parsing: $0) }.map { .version($0) }, name: "firmware")
            measurements.append(MeasurementRecord(step: 5, result: fw))
        }
        let error = u.kind.map { k in
            FailureRecord(kind: k, step: k == .notFound ? "scan" : "battery level",
                          message: k == .notFound ? "no advertisement within 5s" : "battery level \(u.battery ?? 0) % is below min 20 %")
        }
        let started = wallTime(String(format: "2026-01-05T08:00:%02d.000Z", index * 2))
        return DeviceRecord(id: u.id, address: String(format: "C0:5E:00:00:00:%02X", index + 1), name: "SNS-" + u.id.suffix(4),
                            outcome: u.outcome, attempts: 1, adapter: "hci:tcp:127.0.0.1:9000", rssi: u.kind == .notFound ? nil : u.rssi,
                            started: started, durationMs: u.duration, captured: u.kind == .notFound ? [:] : captured,
                            measurements: measurements, steps: steps(u), error: error)
    }

    static func report(_ units: [Unit] = units, id: String = "run-20260105T080000-aaaaaa", started: String = "2026-01-05T08:00:00.000Z",
                       workflowSHA: String = String(repeating: "a", count: 64)) -> RunReport {
        let devices = units.enumerated().map { device($0.element, index: $0.offset) }
        let info = RunInfo(id: id, workflow: FileRef(name: "fleet-audit", path: "workflows/fleet-audit.yaml", sha256: workflowSHA),
                           inventory: FileRef(path: "inventory/line-3.yaml", sha256: String(repeating: "b", count: 64)),
                           adapters: [AdapterInfo(id: "hci:tcp:127.0.0.1:9000", simulated: false, slots: 8)], simulated: false,
                           station: "line-3-station", toolVersion: "0.1.0", options: [:], started: wallTime(started),
                           finished: wallTime("2026-01-05T08:01:00.000Z"), captureTypes: captureTypes)
        return RunReport(run: info, summary: Summary.compute(devices, wall: .seconds(60)), devices: devices)
    }

    /// Writes `report` to `dir/name` and returns the path.
    @discardableResult
    static func write(_ report: RunReport, to dir: String, name: String = "audit.json") throws -> String {
        let path = dir + "/" + name
        try report.write(to: path)
        return path
    }

    /// The same fleet written as a `provision.report/1` report: captured values as text, no types, no
    /// measurements.
    static func writeVersion1(to dir: String, name: String = "old.json") throws -> String {
        var r = report()
        r.run.captureTypes = nil
        for i in r.devices.indices {
            r.devices[i].captured = r.devices[i].captured.mapValues { .string($0.text) }
            r.devices[i].measurements = nil
        }
        let path = try write(r, to: dir, name: name)
        let text = try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(of: "\"provision.report/2\"", with: "\"provision.report/1\"")
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }
}
