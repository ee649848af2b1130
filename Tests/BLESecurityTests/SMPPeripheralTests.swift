import BLE
@testable import BLESecurity
import Testing

@Suite struct SMPPeripheralTests {
    static func request(_ hex: String) throws -> SMPPeripheral.Event { .received(try bytes(hex)) }

    @Test func itAnswersAPairingRequestWithItsFeaturesAndStartsTheTimer() throws {
        var p = Fixture.peripheral(io: .displayOnly, passkey: Passkey(42), random: FixedRandom(seed: 0, keyPairs: [try SpecKeys.pairB()]))
        let actions = p.handle(try Self.request("01 02 00 2d 10 02 03"))
        #expect(actions.count == 3)
        #expect(actions.first?.sentBytes == (try bytes("02 00 00 29 10 02 02")))
        #expect(actions.dropFirst().first == .displayPasskey(try #require(Passkey(42))))
        if case .startTimer(let timer)? = actions.last { #expect(timer.duration == .seconds(30)) } else { Issue.record("\(actions)") }
    }

    @Test func aDisplayedPasskeyIsDrawnWhenNoneIsConfigured() throws {
        var p = Fixture.peripheral(io: .displayOnly, random: FixedRandom(seed: 0, keyPairs: [try SpecKeys.pairB()]))
        let actions = p.handle(try Self.request("01 02 00 2d 10 02 03"))
        // Bytes 01 02 03 04 → 0x01020304 mod 1 000 000.
        #expect(actions.contains(.displayPasskey(try #require(Passkey(UInt32(0x0102_0304 % 1_000_000))))))
    }

    @Test func aSecureConnectionsOnlyDeviceRefusesLegacy() throws {
        var config = Fixture.peripheral(random: FixedRandom(seed: 0, keyPairs: [])).configuration
        config.secureConnectionsOnly = true
        var p = SMPPeripheral(configuration: config, random: FixedRandom(seed: 0, keyPairs: []))
        let actions = p.handle(try Self.request("01 03 00 01 10 00 01"))
        #expect(actions.first == .send(.pairingFailed(SMPPairingFailed(reason: .authenticationRequirements))))
        if case .failed(let failure)? = actions.last { #expect(failure.kind == .authenticationRequirements) } else { Issue.record("\(actions)") }
    }

    @Test func aDeviceThatRequiresMITMRefusesJustWorks() throws {
        var p = Fixture.peripheral(io: .displayOnly, requireMITM: true, random: FixedRandom(seed: 0, keyPairs: []))
        let actions = p.handle(try Self.request("01 03 00 29 10 02 03"))
        #expect(actions.first == .send(.pairingFailed(SMPPairingFailed(reason: .authenticationRequirements))))
    }

    @Test func aDeviceThatRefusesToPairAnswersWithItsReason() throws {
        var config = Fixture.peripheral(random: FixedRandom(seed: 0, keyPairs: [])).configuration
        config.refusePairing = .repeatedAttempts
        var h = PairingHarness(central: Fixture.central(random: FixedRandom(seed: 0, keyPairs: [])),
                               peripheral: SMPPeripheral(configuration: config, random: FixedRandom(seed: 0, keyPairs: [])))
        h.run(.secure(.encrypted))
        #expect(h.codes == ["C:01", "P:05"] && h.wire[1].bytes == [0x05, 0x09])
        #expect(h.centralFailure?.kind == .repeatedAttempts && h.centralFailure?.origin == .peer)
        #expect(h.peripheralFailure?.kind == .repeatedAttempts && h.peripheralFailure?.origin == .local)
    }

    @Test func reservedRequestValuesAreRefusedWithInvalidParameters() throws {
        for hex in ["01 07 00 29 10 02 03", "01 03 02 29 10 02 03", "01 03 00 29 06 02 03", "01 03 00 29 11 02 03"] {
            var p = Fixture.peripheral(random: FixedRandom(seed: 0, keyPairs: []))
            let actions = p.handle(try Self.request(hex))
            #expect(actions.first == .send(.pairingFailed(SMPPairingFailed(reason: .invalidParameters))), "\(hex)")
        }
    }

    @Test func aLongTermKeyRequestIsAnsweredFromTheStoredBondOnly() throws {
        let bond = Bond(peer: Fixture.centralAddress, ltk: Key128(0xABCD), ediv: 0x0102, rand: 0x0304, keySize: 16,
                        authenticated: true, secureConnections: false)
        var p = Fixture.peripheral(storedBond: bond, random: FixedRandom(seed: 0, keyPairs: []))
        #expect(p.handle(.longTermKeyRequested(ediv: 0x0102, rand: 0x0305)) == [.replyLongTermKey(nil)])
        #expect(p.handle(.longTermKeyRequested(ediv: 0x0102, rand: 0x0304)) == [.replyLongTermKey(Key128(0xABCD))])
        let done = p.handle(.encryptionChanged(enabled: true, keySize: 16))
        #expect(done == [.completed(SMPOutcome(security: bond.linkSecurity, method: nil, bond: nil, usedStoredBond: true))])
        #expect(p.security.level == .authenticated)
    }

    @Test func aSecurityRequestAsksForTheLevel() {
        var p = Fixture.peripheral(random: FixedRandom(seed: 0, keyPairs: []))
        #expect(p.handle(.requestSecurity(.authenticated)) == [.send(.securityRequest(SMPSecurityRequest(
            authRequirements: [.bonding, .mitm, .secureConnections, .ct2])))])
        #expect(p.handle(.requestSecurity(.none)) == [])
    }

    @Test func aCentralWithAWrongPasskeyIsRefusedAtTheFirstDifferingBit() throws {
        // 123456 and 123457 differ in bit 0: the first round fails.
        var h = PairingHarness(
            central: Fixture.central(passkey: Passkey(123457), random: FixedRandom(seed: 0, keyPairs: [try SpecKeys.pairA()])),
            peripheral: Fixture.peripheral(io: .displayOnly, passkey: Passkey(123456), random: FixedRandom(seed: 0x80, keyPairs: [try SpecKeys.pairB()])))
        h.run(.secure(.authenticated))
        #expect(h.codes == ["C:01", "P:02", "C:0c", "P:0c", "C:03", "P:03", "C:04", "P:05"])
        #expect(h.peripheralFailure?.detail.contains("bit 0") == true)
    }

    @Test func itsTimerEndsAStalledPairing() throws {
        var p = Fixture.peripheral(random: FixedRandom(seed: 0, keyPairs: [try SpecKeys.pairB()]))
        let actions = p.handle(try Self.request("01 03 00 29 10 02 03"))
        guard case .startTimer(let timer)? = actions.last else { Issue.record("\(actions)"); return }
        let expired = p.handle(.timerExpired(timer.id))
        if case .failed(let failure)? = expired.last { #expect(failure.kind == .timeout) } else { Issue.record("\(expired)") }
        #expect(p.isChannelClosed)
        #expect(p.handle(try Self.request("01 03 00 29 10 02 03")) == [])
    }
}

extension SMPAction {
    /// The bytes of a `.send`, for short assertions.
    var sentBytes: [UInt8]? {
        if case .send(let pdu) = self { return pdu.bytes }
        return nil
    }
}
