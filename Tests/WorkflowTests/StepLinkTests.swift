import BLE
import Testing
import YAML
@testable import Workflow

/// `connect`'s link settings: what the link should get from the radio.
@Suite struct StepLinkTests {
    private func parse(_ connect: String) -> (Step.Connect?, [Diagnostic]) {
        let text = "name: t\nsteps:\n  - connect: \(connect)\n"
        let (w, d) = WorkflowParser().parse(bytes: Array(text.utf8), path: "w.yaml")
        guard case .connect(let c)? = w?.steps.first?.kind else { return (nil, d) }
        return (c, d)
    }

    @Test func theLinkSettingsParseIntoPreferences() throws {
        let (c, d) = parse("{ interval: 7.5ms..15ms, latency: 2, supervision_timeout: 4s, phy: 2M, data_length: 251 }")
        #expect(d.isEmpty, "\(d)")
        #expect(c?.link == LinkPreferences(interval: .microseconds(7500) ... .milliseconds(15), latency: 2,
                                           supervisionTimeout: .seconds(4), phy: .le2M, dataLength: 251))
        #expect(parse("{ interval: 30ms, phy: coded }").0?.link == LinkPreferences(interval: .milliseconds(30) ... .milliseconds(30), phy: .leCoded))
        #expect(parse("{ mtu: 247 }").0?.link == nil)
    }

    @Test func badLinkSettingsSayWhereAndWhat() {
        for (connect, column, words) in [
            ("{ interval: 5ms..15ms }", 26, "outside 7.5ms..4s"),
            ("{ interval: 15ms..7.5ms }", 26, "the minimum is above the maximum"),
            ("{ interval: 7.5..15ms }", 26, "`MIN..MAX` or one duration"),
            ("{ interval: 7.5ms..15ms..20ms }", 26, "`MIN..MAX` or one duration"),
            ("{ phy: 3M }", 21, "`phy` is `1M`, `2M`, `coded`, not `3M`"),
            ("{ data_length: 300 }", 29, "between 27 and 251"),
            ("{ latency: 500 }", 25, "between 0 and 499"),
            ("{ supervision_timeout: 50ms }", 37, "at least 100ms"),
            ("{ intervall: 7.5ms }", 16, "did you mean"),
        ] {
            let (_, d) = parse(connect)
            let hit = d.first { $0.message.contains(words) || ($0.hint ?? "").contains(words) }
            #expect(hit != nil, "\(connect): \(d)")
            #expect(hit?.mark.line == 3 && hit?.mark.column == column, "\(connect): \(hit.map { "\($0.mark)" } ?? "-")")
        }
    }
}
