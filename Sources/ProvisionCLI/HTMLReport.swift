import BLE
import Digests
import Engine
import Foundation
import Support
import Workflow

/// The self-contained HTML report (`provision run --html PATH`, `provision report --html PATH`): one
/// file with its CSS, script and SVG charts inline and a Content-Security-Policy that forbids loading
/// anything and runs no script but its own, so it opens offline and the same anywhere (docs/report.md,
/// "The HTML report").
///
/// Sections: summary; failures by kind; where the line's time went (time per step, and a timeline of
/// each device's steps on the run's clock); distributions of captured values (versions in version
/// order, numbers as histograms with min/p50/max); measurements with their limits; the comparison
/// with an older run; every device in a filterable table.
///
/// Everything that came from a device or a file (names, values, messages) is hostile: it is shown
/// with control characters escaped (`\u{1B}`) and HTML-escaped, never as markup. The figures carry
/// `data-` attributes (`data-figure`, `data-kind`, `data-field`/`data-value`/`data-count`) so a test
/// (or a script) can read them back and check them against the JSON report.
struct HTMLReport {
    var report: RunReport
    /// The devices shown (all of them, or those `--where` selected).
    var devices: [DeviceRecord]
    /// The report file (for the footer).
    var source: String
    var comparison: ReportComparison?
    /// The `--where` expression, when there is one.
    var selection: String?
    var toolVersion: String

    /// Most devices drawn in the timeline, and listed in the device table (beyond, the table keeps the
    /// devices that did not succeed).
    static let timelineRows = 300
    static let tableRows = 5_000

    init(report: RunReport, devices: [DeviceRecord]? = nil, source: String, comparison: ReportComparison? = nil,
         selection: String? = nil, toolVersion: String = ProvisionCLI.version) {
        self.report = report
        self.devices = devices ?? report.devices
        self.source = source
        self.comparison = comparison
        self.selection = selection
        self.toolVersion = toolVersion
    }

    /// Text from a device, a file or a report, safe inside an element or an attribute.
    static func h(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for c in ControlCharacters.escaped(text).unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    static func ms(_ v: Double) -> String {
        if v >= 10_000 { return String(format: "%.1f s", v / 1000) }
        if v >= 100 { return String(format: "%.0f ms", v) }
        if v >= 1 || v == 0 { return String(format: "%.1f ms", v) }
        return String(format: "%.3f ms", v)
    }

    // MARK: - The document

    var html: String {
        let r = report.run
        let title = r.workflow.name ?? r.workflow.path
        var x = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        // Nothing may be loaded, and the only script that may run is the page's own (by its hash): even
        // if device text ever slipped through unescaped, a script or handler in it would not run.
        x += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src '\(Self.scriptHash)'; img-src data:\">\n"
        x += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        x += "<title>\(Self.h(title)) · \(Self.h(r.id)) · provision report</title>\n"
        x += "<style>\n\(Self.css)</style>\n</head>\n<body data-rendered=\"no\">\n"
        x += header
        x += summary
        x += failures
        x += time
        x += values
        x += measurements
        if comparison != nil { x += compared }
        x += deviceTable
        x += "<footer>From \(Self.h(source)) by provision \(Self.h(toolVersion)). This page loads nothing: it works offline. "
        x += "Text from devices is shown as text, control characters escaped.</footer>\n"
        x += "<script>\(Self.script)</script>\n</body>\n</html>\n"
        return x
    }

    private var header: String {
        let r = report.run
        var x = "<header>\n<h1>\(Self.h(r.workflow.name ?? r.workflow.path))"
        if r.simulated { x += " <span class=\"badge sim\" data-figure=\"simulated\">simulated</span>" }
        if r.resumed { x += " <span class=\"badge\">resumed</span>" }
        x += "</h1>\n<p class=\"meta\">run <code data-figure=\"run-id\">\(Self.h(r.id))</code> · station \(Self.h(r.station)) · "
        x += "\(Self.h(r.started.iso)) → \(Self.h(r.finished?.iso ?? "?")) · adapters \(Self.h(r.adapters.map(\.id).joined(separator: ", "))) · "
        x += "workflow \(Self.h(r.workflow.path)) <code>\(Self.h(String(r.workflow.sha256.prefix(12))))…</code> · "
        x += "inventory \(Self.h(r.inventory.path)) · provision \(Self.h(r.toolVersion))</p>\n"
        if let meta = r.metaText { x += "<p class=\"meta\" data-figure=\"run-meta\">\(Self.h(meta))</p>\n" }
        if let stop = r.stopped { x += "<p class=\"warn\">stopped: \(Self.h(stop.message))</p>\n" }
        if let hooks = r.onDevice {
            let trouble = !hooks.failed.isEmpty || hooks.notRun != nil
            x += "<p class=\"\(trouble ? "warn" : "meta")\" data-figure=\"on-device\">on-device: \(Self.h(hooks.sentence))</p>\n"
        }
        if let selection {
            x += "<p class=\"warn\" data-figure=\"selection\">showing the \(devices.count) of \(report.devices.count) device(s) where <code>\(Self.h(selection))</code></p>\n"
        }
        x += "<nav><a href=\"#summary\">Summary</a> <a href=\"#failures\">Failures</a> <a href=\"#time\">Time</a> "
        x += "<a href=\"#values\">Values</a> <a href=\"#measurements\">Measurements</a> "
        if comparison != nil { x += "<a href=\"#compare\">Compared</a> " }
        x += "<a href=\"#devices\">Devices</a></nav>\n</header>\n"
        return x
    }

    private var outcomeCounts: [String: Int] {
        var c: [String: Int] = [:]
        for o in DeviceOutcome.allCases { c[o.rawValue] = 0 }
        for d in devices { c[d.outcome.rawValue, default: 0] += 1 }
        return c
    }

    private var summary: String {
        let counts = outcomeCounts
        var x = "<section id=\"summary\">\n<h2>Summary</h2>\n<div class=\"cards\">\n"
        x += "<div class=\"card\"><span class=\"n\" data-figure=\"total\">\(devices.count)</span> devices</div>\n"
        for (o, style) in [("succeeded", "ok"), ("failed", "bad"), ("skipped", "dim"), ("interrupted", "warn")] {
            x += "<div class=\"card \(style)\"><span class=\"n\" data-figure=\"\(o)\">\(counts[o] ?? 0)</span> \(o)</div>\n"
        }
        x += "</div>\n<p>"
        let s = report.summary
        x += String(format: "Wall time %.1f s, %.0f devices/min", s.wallMs / 1000, s.devicesPerMinute)
        if let d = s.durationMs {
            x += " · device time p50 \(Self.ms(d.p50)), p95 \(Self.ms(d.p95)), max \(Self.ms(d.max))"
        }
        if let rt = s.attRoundTripsPerDevice { x += String(format: " · %.1f ATT round trips per device", rt) }
        x += "</p>\n</section>\n"
        return x
    }

    private var failures: String {
        var kinds: [String: Int] = [:]
        for d in devices { if let e = d.error { kinds[e.kind.rawValue, default: 0] += 1 } }
        var x = "<section id=\"failures\">\n<h2>Failures by kind</h2>\n"
        guard !kinds.isEmpty else { return x + "<p class=\"ok\">No device failed.</p>\n</section>\n" }
        let most = max(1, kinds.values.max() ?? 1)
        x += "<table class=\"bars\">\n<thead><tr><th>kind</th><th class=\"num\">devices</th><th></th></tr></thead>\n<tbody>\n"
        for (kind, n) in kinds.sorted(by: { ($0.value, $1.key) > ($1.value, $0.key) }) {
            x += "<tr data-kind=\"\(Self.h(kind))\"><td>\(Self.h(kind))</td><td class=\"num\" data-count=\"\(n)\">\(n)</td>"
            x += "<td>\(Self.bar(n, of: most, style: "bad"))</td></tr>\n"
        }
        x += "</tbody>\n</table>\n"
        // Which steps failed, and why.
        var byStep: [String: Int] = [:]
        for d in devices { if let e = d.error { byStep["\(e.kind.rawValue) at \(e.step ?? "?")", default: 0] += 1 } }
        x += "<details><summary>by step</summary><ul>\n"
        for (what, n) in byStep.sorted(by: { ($0.value, $1.key) > ($1.value, $0.key) }) {
            x += "<li>\(Self.h(what)): \(n)</li>\n"
        }
        x += "</ul></details>\n</section>\n"
        return x
    }

    /// A horizontal bar `n / of` wide.
    static func bar(_ n: Int, of most: Int, style: String = "") -> String {
        bar(share: most > 0 ? Double(n) / Double(most) : 0, style: style)
    }

    /// A horizontal bar `share` (0...1) of the full width; a share above 0 is at least visible.
    static func bar(share: Double, style: String = "") -> String {
        let pct = share.isFinite ? min(100, max(0, share * 100)) : 0
        return "<span class=\"bar \(style)\" style=\"width:\(String(format: "%.1f", max(share > 0 ? 0.5 : 0, pct)))%\"></span>"
    }

    // MARK: - Time

    private struct StepTime {
        var name: String
        var kind: String
        var durations: [Double] = []
        var failed = 0
    }

    private var time: String {
        var x = "<section id=\"time\">\n<h2>Where the line's time went</h2>\n"
        // Per step, in workflow order: the time devices spent in it.
        var order: [String] = []
        var steps: [String: StepTime] = [:]
        for d in devices {
            for s in d.steps where s.outcome == .succeeded || s.outcome == .failed {
                if steps[s.name] == nil {
                    order.append(s.name)
                    steps[s.name] = StepTime(name: s.name, kind: s.kind.rawValue)
                }
                steps[s.name]?.durations.append(s.durationMs)
                if s.outcome == .failed { steps[s.name]?.failed += 1 }
            }
        }
        guard !order.isEmpty else { return x + "<p>No step ran.</p>\n</section>\n" }
        let totals = order.map { name in steps[name].map { $0.durations.reduce(0, +) } ?? 0 }
        let all = max(0.000_001, totals.reduce(0, +))
        let most = totals.max() ?? 1
        x += "<table class=\"bars\">\n<thead><tr><th>step</th><th>kind</th><th class=\"num\">devices</th><th class=\"num\">total</th>"
        x += "<th class=\"num\">share</th><th class=\"num\">p50</th><th class=\"num\">p95</th><th class=\"num\">max</th><th class=\"num\">failed</th><th></th></tr></thead>\n<tbody>\n"
        for (name, total) in zip(order, totals) {
            guard let st = steps[name] else { continue }
            let sorted = st.durations.sorted()
            // Nearest rank, the one percentile definition (`Percentile`, docs/report.md).
            func pct(_ p: Int) -> Double { Percentile.of(sorted, percent: p) ?? 0 }
            x += "<tr data-step=\"\(Self.h(name))\"><td>\(Self.h(name))</td><td><span class=\"key k-\(Self.kindClass(st.kind))\"></span>\(Self.h(st.kind))</td>"
            x += "<td class=\"num\">\(sorted.count)</td><td class=\"num\">\(Self.ms(total))</td>"
            x += "<td class=\"num\">\(String(format: "%.1f", total * 100 / all)) %</td><td class=\"num\">\(Self.ms(pct(50)))</td>"
            x += "<td class=\"num\">\(Self.ms(pct(95)))</td><td class=\"num\">\(Self.ms(sorted.last ?? 0))</td><td class=\"num\">\(st.failed)</td>"
            x += "<td>\(Self.bar(share: most > 0 ? total / most : 0))</td></tr>\n"
        }
        x += "</tbody>\n</table>\n"
        x += timeline
        x += "</section>\n"
        return x
    }

    /// Every device's steps on the run's clock (SVG): a row per device, a segment per step coloured by
    /// its kind, failed steps outlined.
    private var timeline: String {
        let runStart = report.run.started
        var rows = devices.compactMap { d -> (DeviceRecord, Double)? in
            guard let t = d.started, !d.steps.isEmpty else { return nil }
            return (d, Double(t.millisecondsSince1970 - runStart.millisecondsSince1970))
        }
        guard !rows.isEmpty else { return "" }
        let total = rows.count
        if rows.count > Self.timelineRows {
            // The devices that did not succeed, then the slowest, in start order.
            let notOK = rows.filter { $0.0.outcome != .succeeded }
            let rest = rows.filter { $0.0.outcome == .succeeded }.sorted { ($0.0.durationMs ?? 0) > ($1.0.durationMs ?? 0) }
            rows = Array((notOK + rest).prefix(Self.timelineRows)).sorted { $0.1 < $1.1 }
        }
        let end = rows.map { r in r.1 + (r.0.durationMs ?? r.0.steps.map { $0.startMs + $0.durationMs }.max() ?? 0) }.max() ?? 1
        let span = max(1, end - min(0, rows.map(\.1).min() ?? 0))
        let rowHeight = 14.0, label = 120.0, width = 1000.0
        let height = Double(rows.count) * rowHeight + 24
        func xPos(_ ms: Double) -> Double { label + max(0, ms) / span * (width - label - 10) }
        var x = "<h3>Timeline</h3>\n"
        if rows.count < total { x += "<p class=\"dim\">\(rows.count) of \(total) devices: those that did not succeed, then the slowest.</p>\n" }
        x += "<svg class=\"timeline\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" width=\"100%\" role=\"img\" aria-label=\"device timeline\">\n"
        // Axis: five ticks.
        for i in 0...4 {
            let t = span * Double(i) / 4
            let px = xPos(t)
            x += "<line x1=\"\(Self.f(px))\" y1=\"0\" x2=\"\(Self.f(px))\" y2=\"\(Self.f(height - 14))\" class=\"tick\"/>"
            let anchor = i == 4 ? " style=\"text-anchor:end\"" : ""
            x += "<text x=\"\(Self.f(px))\" y=\"\(Self.f(height - 2))\" class=\"axis\"\(anchor)>\(Self.h(Self.ms(t)))</text>\n"
        }
        for (i, row) in rows.enumerated() {
            let (d, offset) = row
            let y = Double(i) * rowHeight
            x += "<g data-device=\"\(Self.h(d.id))\"><text x=\"0\" y=\"\(Self.f(y + 10))\" class=\"label \(d.outcome == .succeeded ? "" : "bad")\">\(Self.h(String(d.id.prefix(18))))</text>"
            for s in d.steps where s.outcome == .succeeded || s.outcome == .failed {
                let x0 = xPos(offset + s.startMs)
                let w = max(0.6, xPos(offset + s.startMs + s.durationMs) - x0)
                x += "<rect x=\"\(Self.f(x0))\" y=\"\(Self.f(y + 2))\" width=\"\(Self.f(w))\" height=\"\(Self.f(rowHeight - 4))\" class=\"k-\(Self.kindClass(s.kind.rawValue))\(s.outcome == .failed ? " failed" : "")\">"
                x += "<title>\(Self.h(d.id)) · \(Self.h(s.name)) · \(Self.h(Self.ms(s.durationMs))) · \(s.outcome.rawValue)</title></rect>"
            }
            x += "</g>\n"
        }
        x += "</svg>\n<p class=\"legend\">"
        for kind in Set(rows.flatMap { $0.0.steps.map(\.kind.rawValue) }).sorted() {
            x += "<span class=\"key k-\(Self.kindClass(kind))\"></span>\(Self.h(kind)) "
        }
        x += "<span class=\"key failedkey\"></span>failed</p>\n"
        return x
    }

    static func kindClass(_ kind: String) -> String {
        let known = ["scan", "connect", "read", "write", "write_blob", "subscribe", "await", "verify", "disconnect", "pair", "set", "wait"]
        return known.contains(kind) ? kind : "other"
    }

    static func f(_ v: Double) -> String { String(format: "%.1f", v) }

    // MARK: - Values

    private var values: String {
        var x = "<section id=\"values\">\n<h2>Captured values</h2>\n"
        let fields = ReportFields(report)
        let keys = Set(devices.flatMap { $0.captured.keys }).sorted()
        guard !keys.isEmpty else { return x + "<p>No value was captured.</p>\n</section>\n" }
        if fields.untypedCaptures { x += "<p class=\"dim\">This report's captured values have no types (an older report): they are shown as text.</p>\n" }
        x += "<div class=\"grid\">\n"
        for key in keys {
            guard let g = try? Grouping(devices, by: "captured." + key, fields: fields) else { continue }
            x += distribution(g, name: key)
        }
        x += "</div>\n</section>\n"
        return x
    }

    /// One field's distribution: bars per value (versions in order, text most frequent first, at most
    /// 25), or for numbers a histogram with min/p50/max.
    private func distribution(_ g: Grouping, name: String) -> String {
        var x = "<div class=\"dist\" data-field=\"\(Self.h(name))\">\n<h3>\(Self.h(name)) <span class=\"dim\">\(Self.h(g.type.type.name)), "
        x += "\(g.devices - g.missing) of \(g.devices) with a value</span></h3>\n"
        if let s = g.statistics {
            x += "<p>min <b data-stat=\"min\">\(Self.h(s.min.description))</b> · p50 <b data-stat=\"p50\">\(Self.h(s.p50.description))</b> · "
            x += "max <b data-stat=\"max\">\(Self.h(s.max.description))</b></p>\n"
            x += Self.histogram(g)
        }
        let shown = g.groups.prefix(25)
        if g.statistics == nil, g.groups.count > 12, g.groups.allSatisfy({ $0.count == 1 }) {
            // Every device its own value (serial numbers): bars would say nothing.
            x += "<p data-distinct=\"\(g.groups.count)\">\(g.groups.count) distinct values, each on one device.</p>\n"
        } else if g.statistics == nil || g.groups.count <= 12 {
            let most = max(1, g.groups.map(\.count).max() ?? 1, g.missing)
            x += "<table class=\"bars\">\n<tbody>\n"
            for group in shown {
                x += "<tr data-value=\"\(Self.h(group.value.description))\"><td>\(Self.h(group.value.description))</td>"
                x += "<td class=\"num\" data-count=\"\(group.count)\">\(group.count)</td><td>\(Self.bar(group.count, of: most))</td></tr>\n"
            }
            if g.missing > 0 {
                x += "<tr data-missing=\"\(g.missing)\"><td class=\"dim\">(no value)</td><td class=\"num\">\(g.missing)</td><td>\(Self.bar(g.missing, of: most, style: "dim"))</td></tr>\n"
            }
            x += "</tbody>\n</table>\n"
            if g.groups.count > shown.count { x += "<p class=\"dim\">\(g.groups.count - shown.count) more values</p>\n" }
        }
        x += "</div>\n"
        return x
    }

    /// A histogram as SVG columns with their counts and ranges.
    static func histogram(_ g: Grouping) -> String {
        let bins = g.histogram
        guard !bins.isEmpty else { return "" }
        let most = Double(max(1, bins.map(\.count).max() ?? 1))
        let w = 36.0, top = 90.0
        let width = Double(bins.count) * w + 10
        var x = "<svg class=\"hist\" viewBox=\"0 0 \(Int(width)) \(Int(top + 30))\" width=\"\(Int(width))\" role=\"img\" aria-label=\"histogram\">\n"
        for (i, b) in bins.enumerated() {
            let bh = Double(b.count) / most * top
            let x0 = 5 + Double(i) * w
            let label = Grouping.label(b)
            x += "<g data-bin=\"\(h(label))\" data-count=\"\(b.count)\"><rect x=\"\(f(x0 + 2))\" y=\"\(f(top - bh + 12))\" width=\"\(f(w - 4))\" height=\"\(f(bh))\" class=\"col\">"
            x += "<title>\(h(label)): \(b.count)</title></rect>"
            x += "<text x=\"\(f(x0 + w / 2))\" y=\"\(f(top - bh + 10))\" class=\"count\">\(b.count)</text>"
            x += "<text x=\"\(f(x0 + w / 2))\" y=\"\(f(top + 24))\" class=\"axis\">\(h(Grouping.bound(b.from)))</text></g>\n"
        }
        x += "</svg>\n"
        return x
    }

    // MARK: - Measurements

    private var measurements: String {
        var x = "<section id=\"measurements\">\n<h2>Measurements</h2>\n"
        var order: [String] = []
        var byName: [String: [(DeviceRecord, MeasurementRecord)]] = [:]
        for d in devices {
            for m in d.measurements ?? [] {
                if byName[m.result.name] == nil { order.append(m.result.name) }
                byName[m.result.name, default: []].append((d, m))
            }
        }
        guard !order.isEmpty else { return x + "<p>No measurement was recorded (no <code>verify</code> ran).</p>\n</section>\n" }
        x += "<table>\n<thead><tr><th>measurement</th><th>limits</th><th>unit</th><th class=\"num\">pass</th><th class=\"num\">fail</th>"
        x += "<th>values</th></tr></thead>\n<tbody>\n"
        for name in order {
            let all = byName[name] ?? []
            let pass = all.filter { $0.1.result.passed }.count
            // Limits written with `${…}` differ per device: say so, with one of them.
            let each = Set(all.map { $0.1.result.limits.description(unit: $0.1.result.unit) })
            let first = all.first.map { $0.1.result.limits.description(unit: $0.1.result.unit) } ?? ""
            let limits = each.count > 1 ? "per device, e.g. \(first)" : first
            let unit = all.first?.1.result.unit ?? ""
            let values = all.compactMap(\.1.result.value).sorted { (try? TypedValue.compare($0, .less, $1)) ?? false }
            var range = ""
            if let lo = values.first, let hi = values.last {
                let p50 = Percentile.of(values, percent: 50) ?? lo
                range = lo == hi ? lo.description : "\(lo.description) … \(p50.description) … \(hi.description)"
            }
            x += "<tr data-measurement=\"\(Self.h(name))\"><td>\(Self.h(name))</td><td>\(Self.h(limits))</td><td>\(Self.h(unit))</td>"
            x += "<td class=\"num ok\" data-pass=\"\(pass)\">\(pass)</td><td class=\"num bad\" data-fail=\"\(all.count - pass)\">\(all.count - pass)</td>"
            x += "<td>\(Self.h(range))</td></tr>\n"
        }
        x += "</tbody>\n</table>\n"
        let failed = order.flatMap { byName[$0] ?? [] }.filter { !$0.1.result.passed }
        if !failed.isEmpty {
            x += "<h3>Failed measurements</h3>\n<table>\n<thead><tr><th>device</th><th>measurement</th><th>message</th></tr></thead>\n<tbody>\n"
            for (d, m) in failed.prefix(Self.tableRows) {
                x += "<tr><td>\(Self.h(d.id))</td><td>\(Self.h(m.result.name))</td><td>\(Self.h(m.result.message))</td></tr>\n"
            }
            x += "</tbody>\n</table>\n"
        }
        x += "</section>\n"
        return x
    }

    // MARK: - Comparison

    private var compared: String {
        guard let c = comparison else { return "" }
        var x = "<section id=\"compare\">\n<h2>Compared with \(Self.h(c.older.id))</h2>\n"
        x += "<p>older run started \(Self.h(c.older.started.iso)); this run \(Self.h(c.newer.started.iso)).</p>\n"
        if c.workflowChanged { x += "<p class=\"warn\">The workflow changed between the runs.</p>\n" }
        x += "<table>\n<thead><tr><th>outcome</th><th class=\"num\">before</th><th class=\"num\">after</th></tr></thead>\n<tbody>\n"
        for o in DeviceOutcome.allCases.map(\.rawValue) {
            x += "<tr data-outcome=\"\(o)\"><td>\(o)</td><td class=\"num\" data-before=\"\(c.outcomesBefore[o] ?? 0)\">\(c.outcomesBefore[o] ?? 0)</td>"
            x += "<td class=\"num\" data-after=\"\(c.outcomesAfter[o] ?? 0)\">\(c.outcomesAfter[o] ?? 0)</td></tr>\n"
        }
        x += "</tbody>\n</table>\n"
        x += "<p><b data-figure=\"differ\">\(c.entries.count)</b> of \(c.total) device(s) differ.</p>\n"
        if !c.entries.isEmpty {
            x += "<table>\n<thead><tr><th>device</th><th>field</th><th>before</th><th>after</th></tr></thead>\n<tbody>\n"
            for e in c.entries.prefix(Self.tableRows) {
                if let only = e.onlyIn {
                    x += "<tr><td>\(Self.h(e.id))</td><td colspan=\"3\">only in the \(only) run (\(Self.h(e.outcome ?? "-")))</td></tr>\n"
                }
                for ch in e.changes {
                    x += "<tr><td>\(Self.h(e.id))</td><td>\(Self.h(ch.field))</td><td>\(Self.h(ch.before == .null ? "-" : ch.before.text))</td>"
                    x += "<td>\(Self.h(ch.after == .null ? "-" : ch.after.text))</td></tr>\n"
                }
            }
            x += "</tbody>\n</table>\n"
        }
        x += "</section>\n"
        return x
    }

    // MARK: - Devices

    private var deviceTable: String {
        let keys = Set(devices.flatMap { $0.captured.keys }).sorted()
        var rows = devices
        var note = ""
        if rows.count > Self.tableRows {
            let notOK = rows.filter { $0.outcome != .succeeded }
            rows = Array((notOK + rows.filter { $0.outcome == .succeeded }).prefix(Self.tableRows))
            note = "<p class=\"dim\">\(rows.count) of \(devices.count) devices: every one that did not succeed, then the first that did.</p>\n"
        }
        var x = "<section id=\"devices\">\n<h2>Devices</h2>\n" + note
        x += "<p class=\"controls\"><input id=\"filter\" type=\"search\" placeholder=\"filter: id, value, message…\"> "
        x += "<label><input id=\"notok\" type=\"checkbox\"> only devices that did not succeed</label> <span id=\"shown\"></span></p>\n"
        x += "<table id=\"device-table\">\n<thead><tr><th>id</th><th>name</th><th>outcome</th><th>error</th><th>step</th><th>message</th>"
        x += "<th>adapter</th><th class=\"num\">RSSI</th><th class=\"num\">time</th><th class=\"num\">attempts</th>"
        for k in keys { x += "<th>\(Self.h(k))</th>" }
        x += "</tr></thead>\n<tbody>\n"
        for d in rows {
            x += "<tr data-outcome=\"\(d.outcome.rawValue)\"><td>\(Self.h(d.id))</td><td>\(Self.h(d.name ?? ""))</td>"
            x += "<td class=\"o-\(d.outcome.rawValue)\">\(d.outcome.rawValue)</td><td>\(Self.h(d.error?.kind.rawValue ?? ""))</td>"
            x += "<td>\(Self.h(d.error?.step ?? ""))</td><td>\(Self.h(d.error?.message ?? d.skipReason ?? ""))</td>"
            x += "<td>\(Self.h(d.adapter ?? ""))</td><td class=\"num\">\(d.rssi.map(String.init) ?? "")</td>"
            x += "<td class=\"num\">\(d.durationMs.map(Self.ms) ?? "")</td><td class=\"num\">\(d.attempts)</td>"
            for k in keys { x += "<td>\(Self.h(d.captured[k].map { report.run.shown(captured: k, $0) } ?? ""))</td>" }
            x += "</tr>\n"
        }
        x += "</tbody>\n</table>\n</section>\n"
        return x
    }

    // MARK: - Style and script

    static let css = """
        :root { --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; --dim: #6e7781; --bar: #0969da; }
        body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1200px; padding: 0 16px 32px; color: #1f2328; }
        header { border-bottom: 1px solid #d0d7de; margin-bottom: 8px; }
        h1 { font-size: 24px; margin: 16px 0 4px; } h2 { font-size: 18px; margin: 24px 0 8px; border-bottom: 1px solid #eaeef2; }
        h3 { font-size: 15px; margin: 12px 0 4px; }
        nav a { margin-right: 12px; } .meta { color: var(--dim); margin: 0 0 8px; }
        code { font: 12px ui-monospace, monospace; background: #f6f8fa; padding: 1px 4px; border-radius: 4px; }
        .badge { font-size: 12px; padding: 2px 8px; border-radius: 10px; background: #ddf4ff; vertical-align: middle; }
        .badge.sim { background: #fff8c5; }
        .cards { display: flex; gap: 12px; flex-wrap: wrap; }
        .card { border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 16px; min-width: 110px; }
        .card .n { display: block; font-size: 26px; font-weight: 600; }
        .ok, .card.ok .n { color: var(--ok); } .bad, .card.bad .n { color: var(--bad); }
        .warn, .card.warn .n { color: var(--warn); } .dim, .card.dim .n { color: var(--dim); }
        table { border-collapse: collapse; margin: 4px 0 12px; }
        th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #eaeef2; vertical-align: top; }
        th { background: #f6f8fa; cursor: default; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
        table.bars td:last-child { width: 260px; } table.bars td:first-child { white-space: nowrap; }
        .bar { display: inline-block; height: 10px; background: var(--bar); border-radius: 2px; }
        .bar.bad { background: var(--bad); } .bar.dim { background: #afb8c1; }
        .grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(360px, 1fr)); gap: 16px; }
        .dist { border: 1px solid #eaeef2; border-radius: 6px; padding: 4px 12px; overflow-x: auto; }
        svg text { font: 10px system-ui, sans-serif; fill: #1f2328; }
        svg .axis { text-anchor: middle; fill: var(--dim); } svg .count { text-anchor: middle; }
        svg .label.bad { fill: var(--bad); } svg .tick { stroke: #eaeef2; }
        svg .col { fill: var(--bar); } svg rect.failed { stroke: var(--bad); stroke-width: 1.5; }
        .key { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 10px; border-radius: 2px; }
        .failedkey { border: 2px solid var(--bad); width: 8px; height: 8px; }
        .k-scan { fill: #8c959f; background: #8c959f; } .k-connect { fill: #0969da; background: #0969da; }
        .k-read { fill: #1a7f37; background: #1a7f37; } .k-write, .k-write_blob { fill: #bc4c00; background: #bc4c00; }
        .k-subscribe { fill: #8250df; background: #8250df; } .k-await { fill: #bf3989; background: #bf3989; }
        .k-verify { fill: #4ac26b; background: #4ac26b; } .k-disconnect { fill: #d0d7de; background: #d0d7de; }
        .k-pair { fill: #9a6700; background: #9a6700; } .k-set, .k-wait, .k-other { fill: #57606a; background: #57606a; }
        .o-succeeded { color: var(--ok); } .o-failed { color: var(--bad); } .o-interrupted { color: var(--warn); } .o-skipped { color: var(--dim); }
        #device-table { font-size: 12px; } .controls input[type=search] { width: 280px; padding: 3px 6px; }
        footer { margin-top: 32px; color: var(--dim); font-size: 12px; }

        """

    /// `sha256-…` of the script, for the Content-Security-Policy.
    static let scriptHash = "sha256-" + Data(SHA256.hash(Array(script.utf8))).base64EncodedString()

    /// The page's only script: the device table's filter. It reads the page's own text, never data
    /// put into script.
    static let script = """
        (function () {
          var filter = document.getElementById('filter');
          var notok = document.getElementById('notok');
          var shown = document.getElementById('shown');
          var rows = Array.prototype.slice.call(document.querySelectorAll('#device-table tbody tr'));
          function apply() {
            var t = filter.value.toLowerCase(), n = 0;
            rows.forEach(function (r) {
              var show = (!notok.checked || r.getAttribute('data-outcome') !== 'succeeded') &&
                         (!t || r.textContent.toLowerCase().indexOf(t) >= 0);
              r.hidden = !show;
              if (show) { n += 1; }
            });
            shown.textContent = n + ' of ' + rows.length + ' shown';
          }
          filter.addEventListener('input', apply);
          notok.addEventListener('change', apply);
          apply();
          document.body.setAttribute('data-rendered', 'yes');
        })();

        """
}
