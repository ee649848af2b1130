import Foundation
import Workflow

/// JUnit XML of a run (`provision run --junit PATH`), for CI and MES dashboards (docs/report.md, "JUnit").
///
/// - `<testsuites>` named after the workflow, with the run's totals (tests are steps).
/// - One `<testsuite>` per device (`name` = device id, `hostname` = the station, `timestamp` = when it
///   started), with `<properties>`: `run_id`, `station`, `workflow`, `outcome`, `meta.KEY` (the run's metadata), `adapter`, `rssi`,
///   `error.kind`, and every captured value as `captured.NAME` (secrets show `***`, as in the report).
/// - One `<testcase>` per step (`classname` = device id, `name` = `NN step name`, `time` = the step's
///   duration): a failed step has `<failure type="KIND" message="…">` (its causes as text); a step not
///   reached or skipped by its `when:` has `<skipped message="…"/>`. A `verify` step's testcase carries
///   its measurement as properties (`measurement`, `value`, `unit`, `limits`, `outcome`), and a failed
///   measurement is a failure with the measurement's message (`message="battery 19 % is below min
///   20 %"`, type the step's error kind, or `measurement` when the step did not fail). A device without steps (never started) is one testcase `device`.
/// - An interrupted device's running step is an `<error type="interrupted">`.
///
/// Written device by device: `suite(_:)` makes one device's `<testsuite>` (and counts its tests) when
/// its record is known; `header(totals:wallMs:)`, the suites in order and `footer` make the document.
struct JUnitReport {
    /// Tests, failures, errors and skipped tests (of a device, or of the run).
    struct Counts: Sendable, Equatable {
        var tests = 0, failures = 0, errors = 0, skipped = 0

        static func += (a: inout Counts, b: Counts) {
            a.tests += b.tests
            a.failures += b.failures
            a.errors += b.errors
            a.skipped += b.skipped
        }
    }

    let run: RunInfo

    /// One device's `<testsuite>` and its counts.
    func suite(_ d: DeviceRecord) -> (xml: String, counts: Counts) {
        var cases: [String] = []
        var counts = Counts()
        let byStep = Dictionary(grouping: d.measurements ?? [], by: \.step)
        if d.steps.isEmpty {
            counts.tests += 1
            var body = ""
            switch d.outcome {
            case .succeeded: break
            case .failed:
                counts.failures += 1
                body = Self.failure(d.error, fallback: "failed")
            case .skipped:
                counts.skipped += 1
                body = "      <skipped message=\"\(Self.esc(d.skipReason ?? "not started"))\"/>\n"
            case .interrupted:
                counts.errors += 1
                body = "      <error type=\"interrupted\" message=\"\(Self.esc(d.error?.message ?? "interrupted"))\"/>\n"
            }
            cases.append("    <testcase classname=\"\(Self.esc(d.id))\" name=\"device\" time=\"\(Self.seconds(d.durationMs ?? 0))\">\n\(body)    </testcase>\n")
        }
        for (i, step) in d.steps.enumerated() {
            counts.tests += 1
            var body = ""
            let measurements = byStep[i] ?? []
            if !measurements.isEmpty {
                body += "      <properties>\n"
                for m in measurements {
                    let r = m.result
                    body += Self.property("measurement", r.name)
                    if let v = r.value { body += Self.property("value", v.description) }
                    if let u = r.unit { body += Self.property("unit", u) }
                    body += Self.property("limits", r.limits.description(unit: r.unit))
                    body += Self.property("outcome", r.outcome.rawValue)
                }
                body += "      </properties>\n"
            }
            let failedMeasurement = measurements.first { !$0.result.passed }
            switch step.outcome {
            case .succeeded:
                if let m = failedMeasurement {
                    counts.failures += 1
                    body += "      <failure type=\"measurement\" message=\"\(Self.esc(m.result.message))\"/>\n"
                }
            case .failed:
                if d.outcome == .interrupted, step.error?.kind == .interrupted {
                    counts.errors += 1
                    body += "      <error type=\"interrupted\" message=\"\(Self.esc(step.error?.message ?? "interrupted"))\"/>\n"
                } else if let m = failedMeasurement {
                    counts.failures += 1
                    let kind = step.error?.kind.rawValue ?? "measurement"
                    body += "      <failure type=\"\(kind)\" message=\"\(Self.esc(m.result.message))\">\(Self.esc(step.error?.causes.joined(separator: "\n") ?? ""))</failure>\n"
                } else {
                    counts.failures += 1
                    body += Self.failure(step.error, fallback: "step failed")
                }
            case .skipped:
                counts.skipped += 1
                body += "      <skipped message=\"not reached\"/>\n"
            case .skippedByCondition:
                counts.skipped += 1
                body += "      <skipped message=\"\(Self.esc(step.skipReason ?? "its when: condition was not true"))\"/>\n"
            }
            let name = String(format: "%02d ", i + 1) + step.name
            cases.append("    <testcase classname=\"\(Self.esc(d.id))\" name=\"\(Self.esc(name))\" time=\"\(Self.seconds(step.durationMs))\">\n\(body)    </testcase>\n")
        }
        var properties = [("run_id", run.id), ("station", run.station), ("workflow", run.workflow.path), ("outcome", d.outcome.rawValue)]
        for (key, value) in (run.meta ?? [:]).sorted(by: { $0.key < $1.key }) { properties.append(("meta." + key, value)) }
        if let a = d.adapter { properties.append(("adapter", a)) }
        if let r = d.rssi { properties.append(("rssi", String(r))) }
        if let e = d.error { properties.append(("error.kind", e.kind.rawValue)) }
        for key in d.captured.keys.sorted() { properties.append(("captured." + key, d.captured[key]?.text ?? "")) }
        var suite = "  <testsuite name=\"\(Self.esc(d.id))\" tests=\"\(counts.tests)\" failures=\"\(counts.failures)\" errors=\"\(counts.errors)\""
        suite += " skipped=\"\(counts.skipped)\" time=\"\(Self.seconds(d.durationMs ?? 0))\" hostname=\"\(Self.esc(run.station))\""
        if let started = d.started { suite += " timestamp=\"\(started.iso)\"" }
        suite += ">\n    <properties>\n"
        for (k, v) in properties { suite += Self.property(k, v, indent: 6) }
        suite += "    </properties>\n" + cases.joined() + "  </testsuite>\n"
        return (suite, counts)
    }

    /// The run's document: its totals, then the devices' suites in order.
    func document(_ suites: some Sequence<String>, totals: Counts, wallMs: Double) -> String {
        var x = header(totals: totals, wallMs: wallMs)
        for s in suites { x += s }
        x += Self.footer
        return x
    }

    /// Everything before the first suite.
    func header(totals: Counts, wallMs: Double) -> String {
        let workflowName = run.workflow.name ?? run.workflow.path
        var x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        x += "<testsuites name=\"\(Self.esc(workflowName))\" tests=\"\(totals.tests)\" failures=\"\(totals.failures)\" errors=\"\(totals.errors)\""
        x += " skipped=\"\(totals.skipped)\" time=\"\(Self.seconds(wallMs))\" timestamp=\"\(run.started.iso)\">\n"
        return x
    }

    static let footer = "</testsuites>\n"

    private static func failure(_ e: FailureRecord?, fallback: String) -> String {
        let text = ([e?.step.map { "step: \($0)" } ?? ""] + (e?.causes ?? [])).filter { !$0.isEmpty }.joined(separator: "\n")
        return "      <failure type=\"\(esc(e?.kind.rawValue ?? fallback))\" message=\"\(esc(e?.message ?? fallback))\">\(esc(text))</failure>\n"
    }

    private static func property(_ name: String, _ value: String, indent: Int = 8) -> String {
        String(repeating: " ", count: indent) + "<property name=\"\(esc(name))\" value=\"\(esc(value))\"/>\n"
    }

    private static func seconds(_ ms: Double) -> String { String(format: "%.3f", ms / 1000) }

    /// XML-escaped text for an attribute or element; characters XML 1.0 forbids become `?`.
    static func esc(_ s: String) -> String {
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\n": out += "&#10;"
            case "\r": out += "&#13;"
            case "\t": out += "&#9;"
            default:
                if c.value < 0x20 || c.value == 0xFFFE || c.value == 0xFFFF { out += "?" } else { out.unicodeScalars.append(c) }
            }
        }
        return out
    }
}

extension RunReport {
    /// The run as JUnit XML (`provision run --junit PATH`).
    public func junitXML() -> String {
        let junit = JUnitReport(run: run)
        var totals = JUnitReport.Counts()
        var suites: [String] = []
        for d in devices {
            let (xml, counts) = junit.suite(d)
            suites.append(xml)
            totals += counts
        }
        return junit.document(suites, totals: totals, wallMs: summary.wallMs)
    }
}
