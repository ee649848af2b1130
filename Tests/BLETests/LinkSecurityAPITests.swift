@testable import BLE
import Testing

@Suite struct LinkSecurityAPITests {
    @Test func printingARequestShowsNeitherThePasskeyNorTheOOBData() throws {
        let passkey = try #require(Passkey("123456"))
        let oob = OOBData(random: 0x1234_5678_9ABC_DEF0_1122_3344_5566_7788, confirm: 0xCAFE)
        let request = SecurityRequest(level: .authenticated, passkey: passkey, oob: oob)
        for text in [request.description, String(reflecting: request), "\(oob)", String(reflecting: oob), "\(passkey)"] {
            #expect(!text.contains("123456") && !text.lowercased().contains("9abcdef0") && !text.lowercased().contains("cafe"))
        }
        #expect(request.description == "SecurityRequest(authenticated, passkey, OOB data)")
    }

    @Test func aPasskeyOrOOBDataMakesAuthenticatedReachable() throws {
        let passkey = try #require(Passkey("000001"))
        #expect(SecurityRequest(level: .encrypted).achievableLevel == .encrypted)
        #expect(SecurityRequest(level: .encrypted, passkey: passkey).achievableLevel == .authenticated)
        #expect(SecurityRequest(level: .encrypted, oob: OOBData(random: 1, confirm: 2)).achievableLevel == .authenticated)
    }

    @Test func aLinkThatCannotBeSecuredRefusesEveryLevelButNone() async throws {
        let link = InMemoryLink(peer: BluetoothAddress(value: 1, kind: .public), adapterID: "mem")
        #expect(try await link.secure(SecurityRequest(level: .none)) == .none)
        await #expect(throws: BLEError.security(SecurityFailure(.pairingFailed, reason: "pairing not supported",
                                                                detail: "adapter mem cannot pair or encrypt links"))) {
            try await link.secure(SecurityRequest(level: .encrypted))
        }
    }

    @Test func outcomesDescribeLevelMethodAndBond() {
        let sc = LinkSecurity(level: .authenticated, keySize: 16, secureConnections: true)
        #expect(SecurityOutcome(security: sc, method: .passkeyEntry, bond: .made).description
                == "authenticated (LE Secure Connections, 16-octet key), passkey_entry, bond made")
        #expect(SecurityOutcome(security: sc, bond: .used).description == "authenticated (LE Secure Connections, 16-octet key), stored bond used")
    }
}
