import BLE
@testable import BLESecurity
import Testing

@Suite struct SMPLoopbackTests {
    @Test func turnsCountHowOftenTheSenderChanges() throws {
        var jw = try SMPCentralTests.harness()
        jw.run(.secure(.encrypted))
        #expect(jw.turns == 9)
        var passkey = try SMPCentralTests.harness(centralPasskey: SMPCentralTests.passkey, peripheralIO: .displayOnly,
                                                  peripheralPasskey: SMPCentralTests.passkey)
        passkey.run(.secure(.authenticated))
        #expect(passkey.turns == 87)
    }

    @Test func aPeripheralWithADifferentKeyEndsInAMICFailure() throws {
        let bond = Bond(peer: Fixture.peripheralAddress, ltk: Key128(1), keySize: 16, authenticated: false, secureConnections: true)
        var other = bond
        other.ltk = Key128(2)
        other.peer = Fixture.centralAddress
        var link = SMPLoopback(central: Fixture.central(storedBond: bond, random: FixedRandom(seed: 0, keyPairs: [])),
                               peripheral: Fixture.peripheral(storedBond: other, random: FixedRandom(seed: 0x80, keyPairs: [])))
        link.run(.secure(.encrypted))
        #expect(link.centralFailure?.kind == .encryptionFailed(status: SMPLoopback.micFailure))
        #expect(!link.isEncrypted)
    }
}
