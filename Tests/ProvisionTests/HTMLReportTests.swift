import Engine
import EngineTestSupport
import Foundation
import Testing
import Workflow
@testable import ProvisionCLI

/// The self-contained HTML report: escaped, offline, and (in a real headless browser) rendering the
/// same figures as the JSON report.
@Suite struct HTMLReportTests {
    /// The fleet of `AuditReportFixture` with hostile text from its devices.
    static func hostileReport() -> RunReport {
        var r = AuditReportFixture.report()
        r.devices[0].name = "<script>document.body.setAttribute('data-pwned','script')</script>"
        r.devices[1].captured["model"] = "\"><img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">"
        r.devices[2].error = FailureRecord(kind: .attError, step: "read </td></tr></table><b>", message: "\u{1B}[2J & <u>bold</u>")
        r.devices[2].outcome = .failed
        r.summary = Summary.compute(r.devices, wall: .seconds(60))
        return r
    }

    @Test func deviceTextIsEscapedAndNothingIsLoaded() {
        let html = HTMLReport(report: Self.hostileReport(), source: "audit.json").html
        #expect(!html.contains("<script>document"))
        #expect(html.contains("&lt;script&gt;document.body.setAttribute(&#39;data-pwned&#39;,&#39;script&#39;)&lt;/script&gt;"))
        #expect(!html.contains("<img src=x"))
        #expect(html.contains("&quot;&gt;&lt;img src=x onerror="))
        #expect(html.contains("\\u{1B}[2J &amp; &lt;u&gt;bold&lt;/u&gt;"))
        #expect(!html.unicodeScalars.contains("\u{1B}"))
        // One script, the page's own, allowed by its hash; no URL to fetch anything from.
        #expect(html.components(separatedBy: "<script").count == 2)
        #expect(html.contains("script-src '\(HTMLReport.scriptHash)'"))
        #expect(html.contains("default-src 'none'"))
        #expect(html.firstMatch(of: /(src|href)="(https?:)?\/\//) == nil)
    }

    /// A headless Chromium (or Chrome), when one is installed.
    static let browser: String? = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome", "/usr/local/bin/chromium"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Runs the browser on `page` with `arguments`, within a deadline; returns what it printed.
    static func browse(_ page: String, _ arguments: String, in dir: String) async throws -> String {
        guard let browser else { return "" }
        let r = try await ChildProcess.shell(
            "timeout 120 \(browser) --headless --disable-gpu --no-sandbox --no-first-run --disable-extensions --disable-dev-shm-usage "
                + "--user-data-dir=\(dir)/chromium-profile \(arguments) file://\(page)",
            directory: dir)
        #expect(r.status == 0, "the browser failed (status \(r.status)): \(r.stderr.suffix(2000))")
        return r.stdout
    }

    /// `data-NAME="VALUE"` attributes of the elements that have `data-KEY`.
    static func attribute(_ name: String, in dom: String) -> [String] {
        dom.matches(of: try! Regex("\(name)=\"([^\"]*)\"")).compactMap { $0.output[1].substring.map(String.init) }
    }

    @Test(.enabled(if: browser != nil, "no Chromium installed (`make test` installs it with apt; Debian package `chromium`): the page is checked without a browser only"))
    func aHeadlessBrowserRendersThePageAndItsFiguresMatchTheJSONReport() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let dir = line.directory
        // This week's report, and last week's: SN-0002 and SN-0006 were on 1.9.0 then too, SN-0008's battery was fine.
        let report = Self.hostileReport()
        try AuditReportFixture.write(report, to: dir)
        var lastWeek = AuditReportFixture.units
        lastWeek[7].battery = 60
        lastWeek[7].outcome = .succeeded
        lastWeek[7].kind = nil
        lastWeek[3].firmware = "2.4.1"
        try AuditReportFixture.write(AuditReportFixture.report(lastWeek, id: "run-20251229T080000-bbbbbb", started: "2025-12-29T08:00:00.000Z"),
                                     to: dir, name: "last-week.json")
        let made = await run(["report", "audit.json", "--compare", "last-week.json", "--html", "audit.html"], in: dir)
        #expect(made.code == 0, "\(made.err)")
        #expect(made.err.contains("html: audit.html"))

        let dom = try await Self.browse(dir + "/audit.html", "--dump-dom", in: dir)
        // It rendered: the page's script ran, and nothing from a device did.
        #expect(dom.contains("data-rendered=\"yes\""), "the page's script did not run")
        #expect(dom.firstMatch(of: /<body[^>]*data-pwned/) == nil, "a device's text ran as script")

        // The figures, read back from the rendered page, against the JSON report.
        let json = try RunReport.read(from: dir + "/audit.json")
        func figure(_ name: String) -> Int? {
            dom.firstMatch(of: try! Regex("data-figure=\"\(name)\">([0-9]+)<"))?.output[1].substring.flatMap { Int($0) }
        }
        #expect(figure("total") == json.devices.count)
        for o in DeviceOutcome.allCases {
            #expect(figure(o.rawValue) == json.summary.outcomes[o], "\(o)")
        }
        // Failures by kind.
        var kinds: [String: Int] = [:]
        for m in dom.matches(of: /<tr data-kind="([a-z_]+)"><td>[a-z_]+<\/td><td class="num" data-count="([0-9]+)">/) {
            kinds[String(m.output.1)] = Int(m.output.2)
        }
        #expect(kinds == json.summary.errors)
        // The firmware distribution, in version order.
        let firmware = try #require(dom.firstMatch(of: /<div class="dist" data-field="firmware">(.*?)<\/div>/.dotMatchesNewlines()))
        let rows = String(firmware.output.1).matches(of: /<tr data-value="([^"]*)">.*?data-count="([0-9]+)"/).map { (String($0.output.1), Int($0.output.2) ?? -1) }
        var expected: [String: Int] = [:]
        for d in json.devices { if case .string(let v)? = d.captured["firmware"] { expected[v, default: 0] += 1 } }
        #expect(rows.map(\.0) == ["1.9.0", "2.0.0", "2.4.1", "10.0.0"])
        #expect(Dictionary(uniqueKeysWithValues: rows) == expected)
        // The battery histogram's statistics and counts.
        let battery = try #require(dom.firstMatch(of: /<div class="dist" data-field="battery">(.*?)<\/div>/.dotMatchesNewlines()))
        let stats = String(battery.output.1)
        #expect(stats.contains("data-stat=\"min\">12<") && stats.contains("data-stat=\"p50\">64<") && stats.contains("data-stat=\"max\">100<"))
        let bins = Self.attribute("data-count", in: String(stats.split(separator: "<table").first ?? "")).compactMap(Int.init)
        #expect(bins.reduce(0, +) == json.devices.filter { $0.captured["battery"] != nil }.count)
        // Measurements: passes and failures per name.
        let fails = json.devices.flatMap { $0.measurements ?? [] }.filter { $0.result.name == "battery level" && !$0.result.passed }.count
        #expect(dom.contains("<tr data-measurement=\"battery level\">"))
        #expect(dom.firstMatch(of: /data-measurement="battery level">.*?data-fail="([0-9]+)"/)?.output.1 == "\(fails)"[...])
        // The comparison: SN-0002's model (the hostile one), SN-0003 failed this week, SN-0004's firmware
        // and SN-0008's outcome changed.
        #expect(dom.contains("data-figure=\"differ\">4<"))
        #expect(dom.contains("<td>SN-0004</td><td>captured.firmware</td><td>2.4.1</td><td>10.0.0</td>"))
        // Hostile text is shown as text.
        #expect(dom.contains("&lt;script&gt;document.body.setAttribute('data-pwned','script')&lt;/script&gt;"))

        // And it paints: a screenshot of the page.
        _ = try await Self.browse(dir + "/audit.html", "--screenshot=\(dir)/audit.png --window-size=1280,2000", in: dir)
        let png = FileManager.default.contents(atPath: dir + "/audit.png") ?? Data()
        #expect(png.count > 10_000 && png.prefix(4) == Data([0x89, 0x50, 0x4E, 0x47]))
    }

    @Test func runWritesTheHTMLReportToo() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 3, faults: [2: "{ firmware: \"1.9.0\" }"])
        let r = await run(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--sim-latency", "0", "--quiet",
                           "--report", "r.json", "--html", "r.html"], in: line.directory)
        #expect(r.code == 1)
        #expect(r.out.contains("html: r.html\n"))
        let html = try String(contentsOfFile: line.directory + "/r.html", encoding: .utf8)
        #expect(html.contains("data-figure=\"succeeded\">2<") && html.contains("data-figure=\"failed\">1<"))
        #expect(html.contains("<tr data-kind=\"verify_failed\">"))
        // The same check as every output: not over an input, not replaced without --force.
        let over = await run(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet", "--report", "s.json",
                              "--html", "r.html"], in: line.directory)
        #expect(over.code == 2 && over.err.contains("`--html r.html` already exists"))
        let input = await run(["report", "r.json", "--html", "r.json"], in: line.directory)
        #expect(input.code == 2 && input.err.contains("`--html r.json` is a report read here"))
    }
}
