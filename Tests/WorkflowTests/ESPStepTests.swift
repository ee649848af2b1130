import Foundation
import Testing
import YAML

@testable import Workflow

/// The ESP-IDF provisioning family's steps: what they parse to, the secrets they make, and each mistake
/// at its position.
@Suite struct ESPStepTests {
    private func parse(_ text: String) -> (Workflow?, [Diagnostic]) {
        WorkflowParser().parse(bytes: Array(text.utf8), path: "wf.yaml")
    }

    private func firstError(_ text: String) -> (Int, Int, String, String?)? {
        parse(text).1.first.map { ($0.line, $0.column, $0.message, $0.hint) }
    }

    static let header = "name: t\nsteps:\n  - connect: {}\n"

    @Test func theThreeStepsParseAsTheIssueSpellsThem() throws {
        let text = Self.header + """
              - wifi_scan: { capture: aps }
              - wifi_provision: { ssid: "${ssid}", passphrase: "${wifi_passphrase}", security: 2, username: wifiprov, pop: "${pop}", timeout: 45s }
              - esp_custom: { endpoint: custom-data, value: { utf8: "wifi?" }, capture: wifi_check }
            """
        let (workflow, diagnostics) = parse(text)
        #expect(diagnostics.isEmpty, "\(diagnostics)")
        let steps = try #require(workflow?.steps)
        guard case .wifiProvision(let w) = steps[2].kind else { Issue.record("not wifi_provision"); return }
        #expect(w.ssid.source == "${ssid}" && w.passphrase?.source == "${wifi_passphrase}" && w.security == 2)
        #expect(w.username?.source == "wifiprov" && w.pop?.source == "${pop}" && !w.allowInsecure)
        #expect(steps[2].effectiveTimeout == .seconds(45) && steps[2].name == "wifi_provision ${ssid}")
        // The scan before it and the custom step after it borrow its session.
        guard case .wifiScan(let s) = steps[1].kind, case .espCustom(let c) = steps[3].kind else { Issue.record("kinds"); return }
        #expect(s.capture == "aps" && s.session == w.sessionSecurity)
        #expect(c.endpoint == "custom-data" && c.capture == "wifi_check" && c.session == w.sessionSecurity && c.format == .utf8)
        #expect(steps[1].capturedName == "aps" && steps[3].capturedName == "wifi_check")
        #expect(workflow?.captureTypes["aps"] == .text && workflow?.captureTypes["wifi_ip"] == .text)
        // The passphrase and PoP variables are secret wherever their values come from.
        #expect(workflow?.secretVariables == ["wifi_passphrase", "pop"])
        #expect(workflow?.secretNames.isSuperset(of: ["wifi_passphrase", "pop"]) == true)
    }

    @Test func anInventoryWithThePassphraseInItsDefaultsHidesIt() throws {
        let (workflow, _) = parse(Self.header + "  - wifi_provision: { ssid: \"${ssid}\", passphrase: \"${psk}\", security: 1, pop: \"${pop}\" }\n")
        let inventory = Inventory(path: "i.yaml", sha256: "", baseDirectory: "/", devices: [
            InventoryDevice(id: "SN-1", vars: ["ssid": "line-5", "psk": "correct horse", "pop": "abcd1234"], mark: SourceMark(line: 1, column: 1)),
        ], defaultVars: ["psk": "correct horse"])
        let withSecrets = inventory.withSecrets(of: try #require(workflow))
        #expect(withSecrets.isSecret("psk") && withSecrets.isSecret("pop") && !withSecrets.isSecret("ssid"))
        let shown = withSecrets.redact("sent correct horse, pop abcd1234 as 636f727265637420686f727365", for: withSecrets.devices[0])
        #expect(!shown.contains("correct") && !shown.contains("abcd1234") && !shown.contains("636f72"), "\(shown)")
    }

    @Test func mistakesAreReportedAtTheirPosition() {
        let written = firstError(Self.header + "  - wifi_provision: { ssid: lab, passphrase: hunter22, security: 1, pop: \"${pop}\" }\n")
        #expect(written?.0 == 4 && written?.1 == 46)
        #expect(written?.2 == "the Wi-Fi passphrase is written out in the workflow, where it is no secret")
        let pop = firstError(Self.header + "  - wifi_provision: { ssid: lab, passphrase: \"${p}\", security: 1, pop: abcd1234 }\n")
        #expect(pop?.2 == "the proof of possession is written out in the workflow, where it is no secret")
        let insecure = firstError(Self.header + "  - wifi_provision: { ssid: lab, passphrase: \"${p}\", security: 0 }\n")
        #expect(insecure?.0 == 4 && insecure?.1 == 64 && insecure?.2 == "`security: 0` sends the Wi-Fi passphrase in the clear")
        #expect(parse(Self.header + "  - wifi_provision: { ssid: lab, passphrase: \"${p}\", security: 0, allow_insecure: true }\n").1.isEmpty)
        #expect(firstError(Self.header + "  - wifi_provision: { ssid: lab, passphrase: \"${p}\", security: 2, pop: \"${pop}\" }\n")?.2
                == "`security: 2` needs `username` (the SRP6a user the unit was built with)")
        #expect(firstError(Self.header + "  - wifi_provision: { ssid: lab, security: 3 }\n")?.2 == "`security` must be between 0 and 2, not 3")
        #expect(firstError(Self.header + "  - wifi_provision: { ssid: lab, pasphrase: \"${p}\", security: 1 }\n")?.3 == "did you mean `passphrase`?")
        #expect(firstError(Self.header + "  - wifi_provision: { passphrase: \"${p}\", security: 1 }\n")?.2 == "`wifi_provision` needs `ssid`")
        #expect(firstError(Self.header + "  - wifi_scan: { capture: aps }\n")?.2
                == "`wifi_scan` needs the session's `security` (and `username`, `pop`), or a `wifi_provision` step to take them from")
        #expect(firstError(Self.header + "  - esp_custom: { endpoint: prov-config, value: { hex: \"00\" }, security: 1, pop: \"${p}\" }\n")?.2
                == "`prov-config` is a provisioning endpoint, not a custom one")
        let early = firstError("name: t\nsteps:\n  - wifi_scan: { security: 1, pop: \"${p}\" }\n")
        #expect(early?.0 == 3 && early?.2 == "`wifi_scan` needs a connection, but no `connect` step comes before it")
    }

    @Test func aScanWithItsOwnSessionNeedsNoProvisionStep() throws {
        let (workflow, diagnostics) = parse(Self.header + "  - wifi_scan: { capture: aps, security: 1, pop: \"${pop}\" }\n")
        #expect(diagnostics.isEmpty, "\(diagnostics)")
        guard case .wifiScan(let s)? = workflow?.steps.last?.kind else { Issue.record("not a scan"); return }
        #expect(s.session?.security == 1 && s.session?.pop?.source == "${pop}")
        #expect(workflow?.secretVariables == ["pop"])
    }
}

extension ESPStepTests {
    @Test func validationChecksEveryDevicesValuesWithoutShowingThem() throws {
        let (parsed, _) = parse(Self.header + "  - wifi_provision: { ssid: \"${ssid}\", passphrase: \"${psk}\", security: 2, username: wifiprov, pop: \"${pop}\" }\n")
        let workflow = try #require(parsed)
        let mark = SourceMark(line: 3, column: 5)
        let inventory = Inventory(path: "i.yaml", sha256: "", baseDirectory: "/", devices: [
            InventoryDevice(id: "SN-1", vars: ["ssid": "line-5", "psk": "correct horse", "pop": "abcd1234"], mark: mark),
            InventoryDevice(id: "SN-2", vars: ["ssid": "line-5", "psk": "short", "pop": "abcd1234"], mark: mark),
            InventoryDevice(id: "SN-3", vars: ["ssid": String(repeating: "s", count: 33), "psk": "correct horse", "pop": ""], mark: mark),
        ])
        let diagnostics = Validator.check(workflow, against: inventory, devices: inventory.devices)
        let messages = diagnostics.map(\.message)
        #expect(messages.contains("step `wifi_provision ${ssid}`: the SSID does not fit for 1 device (SN-3): an SSID is 1 to 32 bytes, not 33"), "\(messages)")
        #expect(messages.contains("step `wifi_provision ${ssid}`: the Wi-Fi passphrase does not fit for 1 device (SN-2): a WPA passphrase is 8 to 63 characters (or 64 hex digits), not 5"))
        #expect(messages.contains("step `wifi_provision ${ssid}`: the proof of possession does not fit for 1 device (SN-3): security 2 needs a proof of possession that is not empty"))
        #expect(!messages.joined().contains("short"))
        let line = diagnostics.first { $0.message.contains("passphrase") }
        #expect(line?.line == 4 && line?.column == 53)
    }
}
