import BLE
import Foundation
import Testing
import YAML
@testable import Workflow

private let securityInventory = """
    secrets: [passkey, oob_c, oob_r]
    devices:
      - { id: SN-1, name: S1, vars: { passkey: "012345", oob_c: "00112233445566778899aabbccddeeff", oob_r: "0f0e0d0c0b0a09080706050403020100", plain: "123456" } }
      - { id: SN-2, name: S2, vars: { passkey: "999999", oob_c: "ffeeddccbbaa99887766554433221100", oob_r: "000102030405060708090a0b0c0d0e0f", plain: "654321" } }

    """

extension GoldenCase {
    /// The security options of `connect` and `pair`, and the secrets they take from the inventory.
    static let security: [GoldenCase] = [
        GoldenCase("unknown security level",
            workflow: "name: t\nsteps:\n  - connect: { security: encrypt }\n",
            inventory: securityInventory, inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 3, 26, "`security` is `none`, `encrypted`, `authenticated`, `auto` on `connect`, not `encrypt`", "did you mean `encrypted`?")),
        GoldenCase("a passkey written in the workflow",
            workflow: "name: t\nsteps:\n  - connect: { security: authenticated, passkey: \"123456\" }\n",
            inventory: securityInventory, inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 3, 50, "the passkey is written out in the workflow, where it is no secret",
                     "give each device its value in the inventory, list the variable in `secrets:`, and write `\"${name}\"` here")),
        GoldenCase("a passkey variable that is not secret",
            workflow: "name: t\nsteps:\n  - connect: { security: authenticated, passkey: \"${plain}\" }\n",
            inventory: securityInventory, inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 3, 51, "the passkey comes from `${plain}`, which the inventory does not declare secret",
                     "add `plain` to `secrets:` in $DIR/inv.yaml, so its value never reaches a report, a journal or a log")),
        GoldenCase("a passkey declared in vars: but not secret",
            workflow: "name: t\nvars:\n  plain: utf8\nsteps:\n  - connect: { security: authenticated, passkey: \"${plain}\" }\n",
            inventory: securityInventory, inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 5, 51, "the passkey comes from `${plain}`, which `vars:` does not declare secret",
                     "add `secret: true` to its declaration (at $DIR/wf.yaml:3:3), so its value never reaches a report, a journal or a log")),
        GoldenCase("a passkey declared secret in vars: that is not six digits",
            workflow: "name: t\nvars:\n  pin: { utf8: [1, 8], secret: true }\nsteps:\n  - connect: { security: authenticated, passkey: \"${pin}\" }\n",
            inventory: "devices:\n  - { id: SN-1, name: S1, vars: { pin: \"123456\" } }\n  - { id: SN-2, name: S2, vars: { pin: \"12345\" } }\n",
            inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 5, 51, "step `connect`: the passkey is not six digits for 1 device: SN-2", "fix it in the inventory; SN-2 is at $DIR/inv.yaml:3:5")),
        GoldenCase("a passkey that is not six digits",
            workflow: "name: t\nsteps:\n  - connect: { security: authenticated, passkey: \"${passkey}\" }\n",
            inventory: "secrets: [passkey]\ndevices:\n  - { id: SN-1, name: S1, vars: { passkey: \"123456\" } }\n  - { id: SN-2, name: S2, vars: { passkey: \"12345\" } }\n",
            inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 3, 51, "step `connect`: the passkey is not six digits for 1 device: SN-2", "fix it in the inventory; SN-2 is at $DIR/inv.yaml:4:5")),
        GoldenCase("OOB data that is not 16 bytes",
            workflow: "name: t\nsteps:\n  - connect: { security: authenticated, oob: { confirm: \"${oob_c}\", random: \"${oob_r}\" } }\n",
            inventory: "secrets: [oob_c, oob_r]\ndevices:\n  - { id: SN-1, name: S1, vars: { oob_c: \"0011\", oob_r: \"000102030405060708090a0b0c0d0e0f\" } }\n",
            inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 3, 58, "step `connect`: the OOB `confirm` value is not 16 bytes (32 hex digits) for 1 device: SN-1",
                     "fix it in the inventory; SN-1 is at $DIR/inv.yaml:3:5")),
        GoldenCase("OOB data with one half",
            workflow: "name: t\nsteps:\n  - connect: { security: authenticated, oob: { confirm: \"${oob_c}\" } }\n",
            inventory: securityInventory, inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 3, 46, "`oob` needs both `confirm` and `random` (the device's C and r, 16 bytes each)", nil)),
        GoldenCase("authenticated without a passkey or OOB data",
            workflow: "name: t\nsteps:\n  - connect: { security: authenticated }\n",
            inventory: securityInventory, inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 3, 26, "`security: authenticated` needs the device's `passkey` or its `oob` data",
                     "without either only Just Works is possible, which is not authenticated: add `passkey: \"${passkey}\"` (an inventory secret)")),
        GoldenCase("pairing options on a link that is never secured",
            workflow: "name: t\nsteps:\n  - connect: { passkey: \"${passkey}\" }\n",
            inventory: securityInventory, inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 3, 25, "`passkey` has no use with `security: none`: this step never pairs or encrypts",
                     "secure the link with `security: encrypted` or `authenticated`, or only when the device asks with `security: auto`")),
        GoldenCase("upgrade on a link that is never secured",
            workflow: "name: t\nsteps:\n  - connect: { security: none, upgrade: true }\n",
            inventory: securityInventory, inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 3, 41, "`upgrade` has no use with `security: none`: this step never pairs or encrypts",
                     "secure the link with `security: encrypted` or `authenticated`, or only when the device asks with `security: auto`")),
        GoldenCase("auto without upgrade",
            workflow: "name: t\nsteps:\n  - connect: { security: auto, upgrade: false }\n",
            inventory: securityInventory, inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 3, 41, "`security: auto` secures the link only when the device refuses a request; `upgrade: false` turns that off",
                     "use `security: none` for a link that is never secured")),
        GoldenCase("pair with auto",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - pair: { security: auto }\n",
            inventory: securityInventory, inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 4, 23, "`security` is `encrypted`, `authenticated` on `pair`, not `auto`",
                     "a `pair` step secures the link; to secure only when the device asks, use `security: auto` on `connect`")),
        GoldenCase("pair before connect",
            workflow: "name: t\nsteps:\n  - pair: {}\n  - connect: {}\n",
            inventory: securityInventory, inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 3, 5, "`pair` needs a connection, but no `connect` step comes before it", "add `- connect: {}` before this step")),
        GoldenCase("a lost-bond policy that does not exist",
            workflow: "name: t\nsteps:\n  - connect: { security: encrypted, on_bond_lost: repair }\n",
            inventory: securityInventory, inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 3, 51, "`on_bond_lost` is `fail` or `pair`, not `repair`",
                     "`fail`: the device fails with `bond_lost`; `pair`: it is paired again")),
        GoldenCase("pairing failures in a retry policy",
            workflow: "name: t\nsteps:\n  - connect: { security: encrypted, retry: { attempts: 3, on: [timeout, pairing_failed] } }\n",
            inventory: securityInventory, inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 3, 73, "`pairing_failed` cannot be retried",
                     "a failed pairing is never retried: a wrong passkey tried again can lock the device out (devices count failed attempts)")),
        GoldenCase("a passkey read from the device",
            workflow: "name: t\nsteps:\n  - connect: {}\n  - read: { id: code, service: FFF0, characteristic: FFF5, as: utf8 }\n  - pair: { security: authenticated, passkey: \"${code}\" }\n",
            inventory: securityInventory, inventoryName: "inv.yaml", limit: nil,
            expect: ("wf.yaml", 5, 48, "the passkey comes from `${code}`, a value read from the device", "a passkey or OOB data comes from the inventory, as a secret")),
    ]
}

@Suite struct StepSecurityTests {
    @Test("a broken security option reports its first error at the exact line and column", arguments: GoldenCase.security)
    func brokenSecurityOptionReportsExactPosition(_ c: GoldenCase) throws {
        try GoldenDiagnosticTests().brokenInputReportsExactPosition(c)
    }

    private func validate(_ workflow: String, inventory text: String = securityInventory) throws -> ValidationResult {
        let dir = try TemporaryDirectory()
        try dir.write("wf.yaml", workflow)
        try dir.write("inv.yaml", text)
        return Validator.validate(workflowPath: dir.path + "/wf.yaml", inventoryPath: dir.path + "/inv.yaml")
    }

    @Test func everyOptionParses() throws {
        let result = try validate("""
            name: t
            steps:
              - connect:
                  security: authenticated
                  passkey: "${passkey}"
                  oob: { confirm: "${oob_c}", random: "${oob_r}" }
                  legacy: true
                  bond: false
                  on_bond_lost: pair
                  upgrade: true
              - pair: { security: encrypted }
            """)
        #expect(result.errors.isEmpty, "\(result.errors)")
        let steps = try #require(result.workflow?.steps)
        guard case .connect(let c) = steps[0].kind else { Issue.record("not a connect"); return }
        #expect(c.security.level == .authenticated && c.security.legacy && !c.security.bond && c.security.onBondLost == .pair && c.security.upgrade)
        #expect(c.security.passkey?.referencedNames == ["passkey"] && c.security.oob?.confirm.referencedNames == ["oob_c"])
        #expect(steps[1].security?.level == .encrypted && steps[1].name == "pair encrypted")
    }

    @Test func aPasskeyMayBeAWorkflowSecretDeclaredInVars() throws {
        // No `secrets:` in the inventory: `secret: true` in `vars:` hides the value as well.
        let result = try validate("""
            name: t
            vars:
              pin: { utf8: 6, secret: true }
            steps:
              - connect: { security: authenticated, passkey: "${pin}" }
            """, inventory: "devices:\n  - { id: SN-1, name: S1, vars: { pin: \"012345\" } }\n")
        #expect(result.errors.isEmpty, "\(result.errors)")
        #expect(result.diagnostics.isEmpty, "\(result.diagnostics)")
        #expect(result.workflow?.secretNames == ["pin"])
    }

    @Test func autoMeansUpgradeAndNoneIsTheDefault() throws {
        let result = try validate("name: t\nsteps:\n  - connect: { security: auto }\n  - disconnect\n  - connect: {}\n")
        let steps = try #require(result.workflow?.steps)
        #expect(steps[0].security == Step.Security(level: .auto, upgrade: true))
        #expect(steps[2].security == Step.Security.none)
        #expect(Step.Security.Level.auto.securityLevel == .none && Step.Security.Level.authenticated.securityLevel == .authenticated)
    }

    @Test func theRequestCarriesTheDevicesSecretsRendered() throws {
        let security = Step.Security(level: .authenticated, passkey: try Template(parsing: "${passkey}"),
                                     oob: .init(confirm: try Template(parsing: "${c}"), random: try Template(parsing: "${r}"), mark: SourceMark(line: 1, column: 1)),
                                     legacy: true, bond: false, onBondLost: .pair)
        let values = ["passkey": "004217", "c": "00112233445566778899aabbccddeeff", "r": "0f0e0d0c0b0a09080706050403020100"]
        let request = try security.request(level: .authenticated) { values[$0] }
        #expect(request.passkey?.value == 4217 && request.allowLegacy && !request.bond && request.pairIfBondLost)
        #expect(request.oob == OOBData(random: 0x0F0E_0D0C_0B0A_0908_0706_0504_0302_0100, confirm: 0x0011_2233_4455_6677_8899_AABB_CCDD_EEFF))
        // A value that is not six digits / 16 bytes is an input error that does not show the value.
        #expect(throws: ValueError("the passkey is not six digits")) { try security.request(level: .authenticated) { $0 == "passkey" ? "4217" : values[$0] } }
        #expect(throws: ValueError("the OOB `random` value is not 16 bytes (32 hex digits)")) {
            try security.request(level: .authenticated) { $0 == "r" ? "0011" : values[$0] }
        }
    }

    @Test func passkeysAreExactlySixDigits() {
        #expect(Step.Security.passkey("000000")?.value == 0)
        #expect(Step.Security.passkey("12345") == nil && Step.Security.passkey("1234567") == nil && Step.Security.passkey("12345a") == nil)
        #expect(Step.Security.oobValue("00112233445566778899AABBCCDDEEFF") == 0x0011_2233_4455_6677_8899_AABB_CCDD_EEFF)
        #expect(Step.Security.oobValue("0011") == nil)
    }
}
