import BLE
import BLESecurity
import Foundation
import HCI
import TestSupport
import Testing

/// The HCI host's Security Manager against Bumble's own, on Bumble's virtual controllers: pairing,
/// encryption with a stored bond, a lost bond, a wrong passkey — the device side checked in its state
/// file.
@Suite("Link security over the HCI adapter against Bumble", .serialized, .timeLimit(.minutes(5)),
       .enabled(if: BumbleFleet.available, "needs Python with bumble: make venv, or set PROVISION_PYTHON"))
struct HCISecurityBumbleTests {
    /// Writes `bytes` to FFF1 over raw ATT (one `RawATT` per link: it reads the link's ATT stream);
    /// returns the response PDU.
    private func writeControl(_ att: RawATT, _ bytes: [UInt8]) async throws -> [UInt8] {
        let characteristics = try await att.characteristics()
        let fff1 = try #require(characteristics.first { $0.uuid == 0xFFF1 }?.handle)
        return try await att.request([0x12, UInt8(fff1 & 0xFF), UInt8(fff1 >> 8)] + bytes)
    }

    private func bondsPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("bonds-\(UUID().uuidString).json").path
    }

    private func pairings(_ fleet: BumbleFleet, _ id: String) throws -> [[String: Any]] {
        try fleet.state(id)["pairings"] as? [[String: Any]] ?? []
    }

    @Test func justWorksPairsBondsAndTheNextLinkEncryptsWithTheStoredKey() async throws {
        try await BumbleFleet.with(BumbleFleet.Options(devices: 1, security: .encrypted)) { fleet in
            let path = bondsPath()
            defer { try? FileManager.default.removeItem(atPath: path) }
            var options = HCIAdapter.Options()
            options.bonds = try BondStore(path: path)
            let adapter = try await HCIAdapter.open(spec: fleet.spec, options: options)
            let address = try #require(BluetoothAddress(fleet.devices[0].address, kind: .random))

            let link = try await adapter.connect(to: address, options: ConnectOptions(timeout: .seconds(10)))
            let att = RawATT(link)
            // Unencrypted, the device refuses: Error Response, Insufficient Encryption (0x0F).
            let refused = try await writeControl(att, [0x01, 0xAA])
            #expect(refused.first == 0x01 && refused.last == 0x0F)
            let paired = try await link.secure(SecurityRequest(level: .encrypted))
            #expect(paired.security == LinkSecurity(level: .encrypted, keySize: 16, secureConnections: true))
            #expect(paired.method == .justWorks && paired.bond == .made)
            #expect(try await writeControl(att, [0x01, 0xAA]) == [0x13])
            await link.disconnect()

            let again = try await adapter.connect(to: address, options: ConnectOptions(timeout: .seconds(10)))
            let encrypted = try await again.secure(SecurityRequest(level: .encrypted))
            #expect(encrypted.bond == .used && encrypted.method == nil && encrypted.security.level == .encrypted)
            #expect(try await writeControl(RawATT(again), [0x01, 0xBB]) == [0x13])
            await again.disconnect()
            await adapter.close()

            let state = try fleet.state(fleet.devices[0].id)
            #expect(try pairings(fleet, fleet.devices[0].id).count == 1)
            #expect(state["encryptions"] as? Int == 2)
            #expect(state["fff1_writes_encrypted"] as? [Bool] == [true, true])
            // The store holds the bond under this station, mode 0600.
            let store = try BondStore(path: path)
            let station = try #require(adapter.stationIdentity)
            #expect(store.bond(station: station, peer: address)?.secureConnections == true)
        }
    }

    @Test func passkeyEntryReachesAuthenticatedAndAWrongPasskeyFailsAsPairingFailed() async throws {
        try await BumbleFleet.with(BumbleFleet.Options(devices: 2, security: .authenticated, wrongPasskey: [2])) { fleet in
            let adapter = try await HCIAdapter.open(spec: fleet.spec)
            for (i, device) in fleet.devices.enumerated() {
                let address = try #require(BluetoothAddress(device.address, kind: .random))
                let digits = try #require(device.passkey)
                let passkey = try #require(Passkey(digits))
                let link = try await adapter.connect(to: address, options: ConnectOptions(timeout: .seconds(10)))
                if i == 0 {
                    let outcome = try await link.secure(SecurityRequest(level: .authenticated, passkey: passkey))
                    #expect(outcome.security.level == .authenticated && outcome.method == .passkeyEntry)
                    #expect(try await writeControl(RawATT(link), [0x01, 0x01]) == [0x13])
                } else {
                    await #expect {
                        _ = try await link.secure(SecurityRequest(level: .authenticated, passkey: passkey))
                    } throws: { error in
                        guard case BLEError.security(let f) = error else { return false }
                        return f.category == .pairingFailed && f.reason == "wrong passkey"
                    }
                }
                await link.disconnect()
            }
            await adapter.close()
            #expect(try pairings(fleet, "SN-0001").first?["mitm"] as? Bool == true)
            #expect(try pairings(fleet, "SN-0002").isEmpty)
            #expect(try fleet.state("SN-0002")["fff1_writes"] as? [String] == [])
        }
    }

    @Test func aDeviceThatForgotItsBondFailsWithBondLost() async throws {
        try await BumbleFleet.with(BumbleFleet.Options(devices: 1, security: .encrypted, forgetBond: [1])) { fleet in
            var options = HCIAdapter.Options()
            let path = bondsPath()
            defer { try? FileManager.default.removeItem(atPath: path) }
            options.bonds = try BondStore(path: path)
            let adapter = try await HCIAdapter.open(spec: fleet.spec, options: options)
            let address = try #require(BluetoothAddress(fleet.devices[0].address, kind: .random))
            let link = try await adapter.connect(to: address, options: ConnectOptions(timeout: .seconds(10)))
            #expect(try await link.secure(SecurityRequest(level: .encrypted)).bond == .made)
            await link.disconnect()

            let again = try await adapter.connect(to: address, options: ConnectOptions(timeout: .seconds(10)))
            await #expect {
                _ = try await again.secure(SecurityRequest(level: .encrypted))
            } throws: { error in
                guard case BLEError.security(let f) = error else { return false }
                return f.category == .bondLost
            }
            // Asked to pair again, it does, on the same link.
            let repaired = try await again.secure(SecurityRequest(level: .encrypted, pairAgain: true))
            #expect(repaired.bond == .made)
            await again.disconnect()
            await adapter.close()
            #expect(try pairings(fleet, "SN-0001").count == 2)
        }
    }

    @Test func aSecurityRequestIsMetWhenTheLinkWillBeSecuredAndRefusedWhenItWillNot() async throws {
        try await BumbleFleet.with(BumbleFleet.Options(devices: 2, security: .encrypted, securityRequest: [1, 2])) { fleet in
            let adapter = try await HCIAdapter.open(spec: fleet.spec)
            let first = try #require(BluetoothAddress(fleet.devices[0].address, kind: .random))
            let second = try #require(BluetoothAddress(fleet.devices[1].address, kind: .random))
            // The session will ask for encryption: the device's own request pairs the link (Just Works).
            let asked = SecurityRequest(level: .encrypted)
            let link = try await adapter.connect(to: first, options: ConnectOptions(timeout: .seconds(10), security: asked))
            let outcome = try await link.secure(asked)
            #expect(outcome.security.level == .encrypted)
            #expect(try await writeControl(RawATT(link), [0x01, 0x01]) == [0x13])
            await link.disconnect()
            // Nobody will secure this link: the request is answered Pairing Failed (Pairing Not Supported).
            let plain = try await adapter.connect(to: second, options: ConnectOptions(timeout: .seconds(10)))
            let refused = try await writeControl(RawATT(plain), [0x01, 0x01])
            #expect(refused.first == 0x01 && refused.last == 0x0F)
            await plain.disconnect()
            await adapter.close()
            #expect(try fleet.state(fleet.devices[0].id)["security_requests_sent"] as? Int == 1)
            #expect(try pairings(fleet, fleet.devices[0].id).count == 1)
            #expect(try pairings(fleet, fleet.devices[1].id).isEmpty)
            let failures = try fleet.state(fleet.devices[1].id)["pairing_failures"] as? [String]
            #expect(failures?.count == 1 && failures?.first?.contains("PAIRING_NOT_SUPPORTED") == true, "\(failures ?? [])")
        }
    }
}
