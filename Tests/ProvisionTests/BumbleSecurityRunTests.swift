import Engine
import EngineTestSupport
import Foundation
import Testing
import TestSupport

/// `provision run` over `hci:tcp:` against Bumble peripherals whose control and blob characteristics need
/// an authenticated link (Passkey Entry, each device displaying the passkey the inventory holds), with
/// Bumble's own Security Manager on the device side. Checked on the device side: one pairing each, every
/// write arriving encrypted; a second run with the same `--bonds` pairs nobody.
@Suite(.serialized, .timeLimit(.minutes(5)),
       .enabled(if: BumbleFleet.available, "needs Python with Bumble: run `make test`, or set PROVISION_PYTHON"))
struct BumbleSecurityRunTests {
    /// The fleet's devices with their passkeys as inventory secrets, config and blob.
    static func inventory(for fleet: BumbleFleet, in line: TestLine) throws -> String {
        let plain = try BumbleRunTests.inventory(for: fleet, in: line)
        var lines = try String(contentsOfFile: plain, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for (i, text) in lines.enumerated() {
            guard let d = fleet.devices.first(where: { text.contains("id: \($0.id),") }), let passkey = d.passkey else { continue }
            lines[i] = text.replacingOccurrences(of: "vars: { config:", with: "vars: { passkey: \"\(passkey)\", config:")
        }
        try Data(("secrets: [passkey]\n" + lines.joined(separator: "\n")).utf8).write(to: URL(fileURLWithPath: plain))
        return plain
    }

    /// The test workflow, every link authenticated with the device's passkey.
    static func workflow(in line: TestLine, extra: String = "") throws -> String {
        let text = TestLine.workflow(ackTimeout: "400ms", resend: "[100ms]")
            .replacingOccurrences(of: "  - connect: { mtu: 247, timeout: 1s }",
                                  with: "  - connect: { mtu: 247, timeout: 10s, security: authenticated, passkey: \"${passkey}\"\(extra) }")
        let path = line.directory + "/secure.yaml"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    private func run(_ workflow: String, _ inventory: String, _ fleet: BumbleFleet, report: String, in line: TestLine) async throws -> RunReport {
        let child = try ChildProcess(["run", workflow, "--inventory", inventory, "--adapter", fleet.spec, "--quiet", "--concurrency", "3",
                                      "--bonds", "bonds.json", "--report", report], directory: line.directory)
        let stderr = await child.stderr()
        #expect(await child.wait() == 1, "\(stderr)")
        return try RunReport.read(from: line.directory + "/" + report)
    }

    private func pairings(_ state: [String: Any]) -> Int { (state["pairings"] as? [Any])?.count ?? -1 }

    @Test func aSecuredLineIsPairedOnceAndAuditedOverItsBondsAndEveryWriteArrivesEncrypted() async throws {
        try await BumbleFleet.with(BumbleFleet.Options(devices: 6, security: .authenticated, wrongPasskey: [5], forgetBond: [6])) { fleet in
            let line = try TestLine()
            defer { line.remove() }
            let inventory = try Self.inventory(for: fleet, in: line)
            let workflow = try Self.workflow(in: line)

            let first = try await run(workflow, inventory, fleet, report: "line.json", in: line)
            for (i, device) in fleet.devices.enumerated() {
                let record = try #require(first.devices.first { $0.id == device.id })
                let state = try fleet.state(device.id)
                if i + 1 == 5 {
                    // The device shows another passkey: the pairing fails, permanently, and nothing is written.
                    #expect(record.error?.kind == .pairingFailed && record.error?.step == "connect", "\(record.error?.message ?? "")")
                    #expect(record.steps.first { $0.name == "connect" }?.attempts == 1, "a pairing failure is not retried")
                    #expect(pairings(state) == 0)
                    #expect((state["pairing_failures"] as? [String])?.count == 1)
                    #expect(state["fff1_writes"] as? [String] == [])
                    continue
                }
                #expect(record.outcome == .succeeded, "\(device.id): \(record.error?.message ?? "")")
                #expect(record.security == SecurityRecord(level: .authenticated, method: .passkeyEntry, bond: .made, keySize: 16,
                                                          secureConnections: true))
                #expect(pairings(state) == 1)
                #expect((state["pairings"] as? [[String: Any]])?.first?["mitm"] as? Bool == true)
                let control = state["fff1_writes_encrypted"] as? [Bool] ?? []
                let blob = state["fff4_chunks_encrypted"] as? [Bool] ?? []
                #expect(!control.isEmpty && control.allSatisfy { $0 } && !blob.isEmpty && blob.allSatisfy { $0 })
                #expect(state["commits"] as? Int == 1)
            }

            // The same line again with the same bonds: nobody is paired; links are encrypted with the stored
            // keys. The device that forgot its bond is reported bond_lost and not paired again.
            let second = try await run(workflow, inventory, fleet, report: "again.json", in: line)
            for (i, device) in fleet.devices.enumerated() {
                let record = try #require(second.devices.first { $0.id == device.id })
                let state = try fleet.state(device.id)
                switch i + 1 {
                case 5:
                    #expect(record.error?.kind == .pairingFailed)
                case 6:
                    #expect(record.error?.kind == .bondLost, "\(record.error?.message ?? "")")
                    #expect(pairings(state) == 1, "not paired again")
                default:
                    #expect(record.outcome == .succeeded, "\(device.id): \(record.error?.message ?? "")")
                    #expect(record.security?.bond == .used && record.security?.method == nil && record.security?.level == .authenticated)
                    #expect(pairings(state) == 1, "no new pairing")
                    #expect(state["encryptions"] as? Int == 2)
                    let control = state["fff1_writes_encrypted"] as? [Bool] ?? []
                    #expect(control.count >= 8 && control.allSatisfy { $0 })
                    #expect(state["commits"] as? Int == 2)
                }
            }
            #expect(second.summary.errors == ["pairing_failed": 1, "bond_lost": 1])
        }
    }

    @Test func aDeviceThatLostItsBondIsPairedAgainWhenTheWorkflowSaysSo() async throws {
        try await BumbleFleet.with(BumbleFleet.Options(devices: 1, security: .encrypted, forgetBond: [1])) { fleet in
            let line = try TestLine()
            defer { line.remove() }
            let inventory = try Self.inventory(for: fleet, in: line)
            let text = TestLine.workflow(ackTimeout: "400ms", resend: "[100ms]")
                .replacingOccurrences(of: "  - connect: { mtu: 247, timeout: 1s }",
                                      with: "  - connect: { mtu: 247, timeout: 10s, security: encrypted, on_bond_lost: pair }")
            let workflow = line.directory + "/encrypted.yaml"
            try Data(text.utf8).write(to: URL(fileURLWithPath: workflow))
            for report in ["one.json", "two.json"] {
                let child = try ChildProcess(["run", workflow, "--inventory", inventory, "--adapter", fleet.spec, "--quiet",
                                              "--bonds", "bonds.json", "--report", report], directory: line.directory)
                let stderr = await child.stderr()
                #expect(await child.wait() == 0, "\(stderr)")
            }
            let again = try RunReport.read(from: line.directory + "/two.json")
            #expect(again.devices.first?.security == SecurityRecord(level: .encrypted, method: .justWorks, bond: .made, keySize: 16,
                                                                    secureConnections: true, bondLost: true))
            #expect(pairings(try fleet.state(fleet.devices[0].id)) == 2)
        }
    }

    /// Every 16-byte value (32 hex digits) in a JSON document but zeros (no key): the keys of a bonds file.
    private func keys(in value: Any) -> [String] {
        if let s = value as? String { return s.count == 32 && [UInt8](hex: s) != nil && s != String(repeating: "0", count: 32) ? [s] : [] }
        if let a = value as? [Any] { return a.flatMap { keys(in: $0) } }
        if let d = value as? [String: Any] { return d.values.flatMap { keys(in: $0) } }
        return []
    }

    @Test func aTracedSecureRunShowsThePairingAndTheEncryptionButNoKey() async throws {
        try await BumbleFleet.with(BumbleFleet.Options(devices: 2, security: .authenticated)) { fleet in
            let line = try TestLine()
            defer { line.remove() }
            let inventory = try Self.inventory(for: fleet, in: line)
            let workflow = try Self.workflow(in: line)
            let child = try ChildProcess(["run", workflow, "--inventory", inventory, "--adapter", fleet.spec, "--quiet",
                                          "--bonds", "bonds.json", "--report", "r.json", "--trace", "line.btsnoop"], directory: line.directory)
            let stderr = await child.stderr()
            #expect(await child.wait() == 0, "\(stderr)")
            let report = try RunReport.read(from: line.directory + "/r.json")
            #expect(report.devices.allSatisfy { $0.security?.level == .authenticated && $0.security?.bond == .made })

            let trace = [UInt8](try Data(contentsOf: URL(fileURLWithPath: line.directory + "/line.btsnoop")))
            func contains(_ needle: [UInt8]) -> Bool {
                guard !needle.isEmpty, trace.count >= needle.count else { return false }
                return (0...(trace.count - needle.count)).contains { i in trace[i..<(i + needle.count)].elementsEqual(needle) }
            }
            // The trace holds each link's encryption (HCI_LE_Enable_Encryption, its key zeroed) and SMP traffic.
            #expect(contains([0x01, 0x19, 0x20, 0x1C]), "HCI_LE_Enable_Encryption")
            #expect(contains([0x07, 0x00, 0x06, 0x00, 0x01]), "SMP Pairing Request (L2CAP length 7, channel 6)")
            let bonds = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: line.directory + "/bonds.json")))
            let stored = keys(in: bonds)
            #expect(stored.count >= 2, "one LTK per device at least")
            for key in stored {
                let bytes = [UInt8](hex: key) ?? []
                #expect(!contains(bytes) && !contains(bytes.reversed()), "the trace holds a key of the bonds file")
            }
            // Nor a passkey, as text.
            let text = String(decoding: trace, as: UTF8.self)
            for d in fleet.devices { if let p = d.passkey { #expect(!text.contains(p)) } }
        }
    }
}
