import BLE
@testable import BLESecurity
import Testing

/// Pairings between `SMPCentral` and `SMPPeripheral` over `PairingHarness`, and the central's own rules.
@Suite struct SMPCentralTests {
    static let passkey = Passkey(123456)

    static func harness(centralPasskey: Passkey? = nil, peripheralIO: SMPIOCapability = .noInputNoOutput,
                        peripheralPasskey: Passkey? = nil, allowLegacy: Bool = false, peripheralSC: Bool = true,
                        pairs: Int = 1) throws -> PairingHarness {
        let a = try SpecKeys.pairA(), b = try SpecKeys.pairB()
        return PairingHarness(
            central: Fixture.central(passkey: centralPasskey, allowLegacy: allowLegacy,
                                     random: FixedRandom(seed: 0x00, keyPairs: Array(repeating: a, count: pairs))),
            peripheral: Fixture.peripheral(io: peripheralIO, passkey: peripheralPasskey, secureConnections: peripheralSC,
                                           random: FixedRandom(seed: 0x80, keyPairs: Array(repeating: b, count: pairs))))
    }

    // MARK: - Whole exchanges

    @Test func secureConnectionsJustWorksSendsExactlyTheGoldenPDUs() throws {
        var h = try Self.harness()
        h.run(.secure(.encrypted))
        #expect(h.wire.map(\.description) == PairingGoldens.secureConnectionsJustWorks)
        let central = try #require(h.centralOutcome), peripheral = try #require(h.peripheralOutcome)
        #expect(central.security == LinkSecurity(level: .encrypted, keySize: 16, secureConnections: true))
        #expect(central.method == .justWorks && peripheral.method == .justWorks)
        let bond = try #require(central.bond), peerBond = try #require(peripheral.bond)
        #expect(bond.ltk == peerBond.ltk)
        #expect(bond.peer == Fixture.peripheralAddress && bond.peerIRK == Fixture.peripheralIdentity.irk)
        #expect(peerBond.peer == Fixture.centralIdentity.address && peerBond.peerIRK == Fixture.centralIdentity.irk)
        #expect(!bond.authenticated && bond.secureConnections && bond.ediv == 0 && bond.rand == 0)
        // Encryption was started once, with the LTK both sides derived.
        let started = h.centralActions.compactMap { if case .startEncryption(let key) = $0 { return key } else { return nil } }
        #expect(started == [SMPEncryptionKey(ltk: bond.ltk, ediv: 0, rand: 0, keySize: 16)])
        #expect(h.centralActions.last == .completed(central))
        #expect(h.central.configuration.storedBond == bond)
    }

    @Test func secureConnectionsPasskeyEntrySendsExactlyTheGoldenPDUs() throws {
        var h = try Self.harness(centralPasskey: Self.passkey, peripheralIO: .displayOnly, peripheralPasskey: Self.passkey)
        h.run(.secure(.authenticated))
        #expect(h.wire.map(\.description) == PairingGoldens.secureConnectionsPasskeyEntry)
        // Twenty rounds: one Confirm and one Random from each side per passkey bit.
        #expect(h.codes.filter { $0 == "C:03" }.count == 20 && h.codes.filter { $0 == "P:04" }.count == 20)
        let central = try #require(h.centralOutcome)
        #expect(central.security.level == .authenticated)
        #expect(central.method == .passkeyEntry(.responderDisplays))
        #expect(h.peripheralActions.contains(.displayPasskey(try #require(Self.passkey))))
        #expect(try #require(central.bond).authenticated)
        #expect(central.bond?.ltk == h.peripheralOutcome?.bond?.ltk)
    }

    @Test func aPairingWithTheSystemRandomSourceAgreesOnKeys() throws {
        var h = PairingHarness(central: Fixture.central(passkey: Self.passkey, random: SystemRandom()),
                               peripheral: Fixture.peripheral(io: .displayOnly, passkey: Self.passkey, random: SystemRandom()))
        h.run(.secure(.authenticated))
        let central = try #require(h.centralOutcome), peripheral = try #require(h.peripheralOutcome)
        #expect(central.security.level == .authenticated && peripheral.security.level == .authenticated)
        #expect(central.bond?.ltk == peripheral.bond?.ltk)
        // Fresh keys and nonces: nothing of the fixed exchange appears.
        #expect(h.wire.map(\.description) != PairingGoldens.secureConnectionsPasskeyEntry)
        #expect(h.wire.count == PairingGoldens.secureConnectionsPasskeyEntry.count)
    }

    @Test func secureConnectionsOOBPairsWithTheDevicesOOBData() throws {
        let b = try SpecKeys.pairB()
        let local = SMPLocalOOB(keyPair: b, random: 0x1234_5678_9ABC_DEF0_0FED_CBA9_8765_4321)
        var h = PairingHarness(central: Fixture.central(oob: try local.sharedData(), random: FixedRandom(seed: 0, keyPairs: [try SpecKeys.pairA()])),
                               peripheral: Fixture.peripheral(oob: local, random: FixedRandom(seed: 0x80, keyPairs: [])))
        h.run(.secure(.authenticated))
        let central = try #require(h.centralOutcome)
        #expect(central.method == .outOfBand && central.security.level == .authenticated)
        #expect(h.codes.prefix(6) == ["C:01", "P:02", "C:0c", "P:0c", "C:04", "P:04"])
        #expect(central.bond?.ltk == h.peripheralOutcome?.bond?.ltk)
    }

    @Test func oobDataThatDoesNotMatchTheDevicesKeyFails() throws {
        let local = SMPLocalOOB(keyPair: try SpecKeys.pairB(), random: 42)
        var wrong = try local.sharedData()
        wrong.confirm ^= 1
        var h = PairingHarness(central: Fixture.central(oob: wrong, random: FixedRandom(seed: 0, keyPairs: [try SpecKeys.pairA()])),
                               peripheral: Fixture.peripheral(oob: local, random: FixedRandom(seed: 0x80, keyPairs: [])))
        h.run(.secure(.authenticated))
        #expect(h.centralFailure?.kind == .confirmValueFailed)
        #expect(h.wire.last?.bytes == [0x05, 0x04])
        #expect(h.peripheralFailure == SMPFailure.fromPeer(.confirmValueFailed, passkeyEntry: false))
    }

    @Test func keysThatArriveBeforeTheCentralLearnsOfEncryptionAreKept() throws {
        var h = try Self.harness()
        h.peripheralLearnsEncryptionFirst = true
        h.run(.secure(.encrypted))
        #expect(h.wire.map(\.description) == PairingGoldens.secureConnectionsJustWorks)
        #expect(h.centralOutcome?.bond?.peerIRK == Fixture.peripheralIdentity.irk)
    }

    // MARK: - Failures

    @Test func aWrongPasskeyFailsOnBothSidesWithConfirmValueFailed() throws {
        var h = try Self.harness(centralPasskey: Passkey(111111), peripheralIO: .displayOnly, peripheralPasskey: Passkey(222222))
        h.run(.secure(.authenticated))
        let peripheral = try #require(h.peripheralFailure), central = try #require(h.centralFailure)
        #expect(peripheral.kind == .wrongPasskey && peripheral.origin == .local && peripheral.reason == .confirmValueFailed)
        #expect(central.kind == .wrongPasskey && central.origin == .peer && central.reason == .confirmValueFailed)
        #expect(central.category == .pairingFailed)
        #expect(h.wire.last == WirePDU(fromCentral: false, bytes: [0x05, 0x04]))
        #expect(!h.codes.contains("C:0d") && !h.centralActions.contains { if case .startEncryption = $0 { true } else { false } })
        #expect(h.centralActions.contains(.stopTimer) && h.peripheralActions.contains(.stopTimer))
        #expect(h.centralOutcome == nil && h.central.security == .none)
    }

    @Test func aPublicKeyOffTheCurveIsRefusedBeforeAnyDHKeyCheck() throws {
        var h = try Self.harness()
        h.tamperPeripheral { pdu in
            guard case .pairingPublicKey(var p) = pdu else { return pdu.bytes }
            var y = p.key.y
            y[31] ^= 0x01
            p.key = P256PublicKey(x: p.key.x, y: y) ?? p.key
            return SMPPDU.pairingPublicKey(p).bytes
        }
        h.run(.secure(.encrypted))
        let failure = try #require(h.centralFailure)
        #expect(failure.kind == .invalidPublicKey && failure.reason == .invalidParameters)
        // The peripheral sent its Confirm right after its key; it arrives after the refusal and is ignored.
        #expect(h.codes == ["C:01", "P:02", "C:0c", "P:0c", "P:03", "C:05"])
        #expect(h.wire[5].bytes == [0x05, 0x0A])
        #expect(!h.codes.contains("C:0d") && !h.codes.contains("C:04"))
    }

    @Test func ourOwnPublicKeySentBackIsRefused() throws {
        var h = try Self.harness()
        let ours = try SpecKeys.pairA().publicKey
        h.tamperPeripheral { pdu in
            if case .pairingPublicKey = pdu { return SMPPDU.pairingPublicKey(SMPPairingPublicKey(key: ours)).bytes }
            return pdu.bytes
        }
        h.run(.secure(.encrypted))
        #expect(h.centralFailure?.kind == .invalidPublicKey)
        #expect(!h.codes.contains("C:0d"))
    }

    @Test func theSMPTimeoutEndsPairingAndClosesTheChannel() throws {
        var h = try Self.harness()
        h.silencePeripheral()
        h.run(.secure(.encrypted))
        let timers = h.centralActions.compactMap { if case .startTimer(let t) = $0 { return t } else { return nil } }
        let timer = try #require(timers.last)
        #expect(timer.duration == .seconds(30))
        #expect(h.centralFailure == nil)
        // A stale arming is ignored; the current one ends the pairing without a PDU.
        #expect(h.central.handle(.timerExpired(timer.id &+ 99)) == [])
        let actions = h.central.handle(.timerExpired(timer.id))
        guard case .failed(let failure)? = actions.last, actions.count == 1 else { Issue.record("\(actions)"); return }
        #expect(failure.kind == .timeout && failure.category == .timeout)
        #expect(h.central.isChannelClosed)
        // The channel is dead until reconnect: no pairing, late PDUs ignored, a second expiry ignored.
        let again = h.central.handle(.secure(.encrypted))
        #expect(again.count == 1)
        if case .failed(let closed)? = again.first { #expect(closed.kind == .channelClosed) } else { Issue.record("\(again)") }
        #expect(h.central.handle(.received(try bytes("02030029100202"))) == [])
        #expect(h.central.handle(.timerExpired(timer.id)) == [])
    }

    @Test func aPDUOutOfOrderFailsThePairingWithUnspecifiedReason() throws {
        var central = Fixture.central(random: FixedRandom(seed: 0, keyPairs: [try SpecKeys.pairA()]))
        let start = central.handle(.secure(.encrypted))
        #expect(start.first == .send(.pairingRequest(SMPPairingParameters(
            ioCapability: .noInputNoOutput, authRequirements: [.bonding, .secureConnections, .ct2],
            initiatorKeys: [.identityKey], responderKeys: [.encryptionKey, .identityKey]))))
        let actions = central.handle(.received(try bytes("04 00112233445566778899aabbccddeeff")))
        #expect(actions.count == 3)
        #expect(actions.first == .send(.pairingFailed(SMPPairingFailed(reason: .unspecifiedReason))))
        #expect(actions.dropFirst().first == .stopTimer)
        if case .failed(let failure)? = actions.last {
            #expect(failure.kind == .unexpectedPDU)
            #expect(failure.detail == "Pairing Random while waiting for the feature exchange")
        } else { Issue.record("\(actions)") }
        #expect(!central.isBusy)
    }

    @Test func aMalformedPDUDuringPairingFailsWithInvalidParameters() throws {
        var central = Fixture.central(random: FixedRandom(seed: 0, keyPairs: []))
        _ = central.handle(.secure(.encrypted))
        let actions = central.handle(.received([0x02, 0x03, 0x00]))
        #expect(actions.first == .send(.pairingFailed(SMPPairingFailed(reason: .invalidParameters))))
        if case .failed(let failure)? = actions.last { #expect(failure.kind == .malformedPDU) } else { Issue.record("\(actions)") }
    }

    @Test func anUnknownCommandIsAnsweredWithCommandNotSupported() throws {
        var central = Fixture.central(random: FixedRandom(seed: 0, keyPairs: []))
        #expect(central.handle(.received([0x1F, 0x01])) == [.send(.pairingFailed(SMPPairingFailed(reason: .commandNotSupported)))])
    }

    @Test func legacyPairingIsRefusedUnlessAllowed() throws {
        var h = try Self.harness(peripheralSC: false)
        h.run(.secure(.encrypted))
        let failure = try #require(h.centralFailure)
        #expect(failure.kind == .legacyPairingRefused && failure.reason == .authenticationRequirements)
        #expect(failure.description.contains("LE legacy pairing"))
        #expect(h.codes == ["C:01", "P:02", "C:05"])
        #expect(h.wire[2].bytes == [0x05, 0x03])
        #expect(h.peripheralFailure?.kind == .authenticationRequirements)
    }

    @Test func legacyJustWorksPairsWhenAllowedAndKeepsTheDevicesLTK() throws {
        var h = try Self.harness(allowLegacy: true, peripheralSC: false)
        h.run(.secure(.encrypted))
        let central = try #require(h.centralOutcome), peripheral = try #require(h.peripheralOutcome)
        #expect(central.security == LinkSecurity(level: .encrypted, keySize: 16, secureConnections: false))
        #expect(h.codes == ["C:01", "P:02", "C:03", "P:03", "C:04", "P:04", "P:06", "P:07", "P:08", "P:09", "C:08", "C:09"])
        let bond = try #require(central.bond), peerBond = try #require(peripheral.bond)
        #expect(bond.ltk == peerBond.ltk && bond.ediv == peerBond.ediv && bond.rand == peerBond.rand)
        #expect(!bond.secureConnections && bond.ediv != 0)
        // Encryption first with the STK (EDIV 0, Rand 0), which is not the bond's LTK.
        guard case .startEncryption(let stk)? = h.centralActions.first(where: { if case .startEncryption = $0 { true } else { false } }) else {
            Issue.record("no encryption"); return
        }
        #expect(stk.ediv == 0 && stk.rand == 0 && stk.ltk != bond.ltk)
    }

    @Test func legacyPasskeyPairsAuthenticatedAndAWrongOneFails() throws {
        var h = try Self.harness(centralPasskey: Self.passkey, peripheralIO: .displayOnly, peripheralPasskey: Self.passkey,
                                 allowLegacy: true, peripheralSC: false)
        h.run(.secure(.authenticated))
        #expect(h.wire.map(\.description) == PairingGoldens.legacyPasskeyEntry)
        let stk = try u128("6732d3c5 340b4fa0 1b70aa86 d0c8d13a") // s1(TK, Srand, Mrand), checked with Bumble
        #expect(h.centralActions.contains(.startEncryption(SMPEncryptionKey(ltk: Key128(stk), ediv: 0, rand: 0, keySize: 16))))
        #expect(h.centralOutcome?.security.level == .authenticated)
        #expect(h.centralOutcome?.method == .passkeyEntry(.responderDisplays))

        var wrong = try Self.harness(centralPasskey: Passkey(654321), peripheralIO: .displayOnly, peripheralPasskey: Self.passkey,
                                     allowLegacy: true, peripheralSC: false)
        wrong.run(.secure(.authenticated))
        #expect(wrong.peripheralFailure?.kind == .wrongPasskey)
        #expect(wrong.centralFailure?.kind == .wrongPasskey && wrong.centralFailure?.origin == .peer)
        #expect(wrong.codes == ["C:01", "P:02", "C:03", "P:03", "C:04", "P:05"])
    }

    @Test func authenticatedWithoutAPasskeyFailsBeforeAnythingIsSent() throws {
        var central = Fixture.central(random: FixedRandom(seed: 0, keyPairs: []))
        let actions = central.handle(.secure(.authenticated))
        #expect(actions.count == 1)
        if case .failed(let failure)? = actions.first {
            #expect(failure.kind == .authenticationRequirements && failure.reason == nil)
        } else { Issue.record("\(actions)") }
    }

    @Test func authenticatedAgainstADeviceWithoutIOFailsWithAuthenticationRequirements() throws {
        var h = try Self.harness(centralPasskey: Self.passkey)
        h.run(.secure(.authenticated))
        #expect(h.centralFailure?.kind == .authenticationRequirements)
        #expect(h.codes == ["C:01", "P:02", "C:05"] && h.wire[2].bytes == [0x05, 0x03])
    }

    @Test func aKeyShorterThanTheMinimumIsRefused() throws {
        var h = PairingHarness(central: Fixture.central(random: FixedRandom(seed: 0, keyPairs: [])),
                               peripheral: Fixture.peripheral(maximumKeySize: 7, random: FixedRandom(seed: 0x80, keyPairs: [try SpecKeys.pairB()])))
        h.run(.secure(.encrypted))
        #expect(h.centralFailure?.kind == .encryptionKeySize)
        #expect(h.wire.last?.bytes == [0x05, 0x06])
    }

    @Test func everyPairingFailedReasonMapsToATypedFailure() {
        let expected: [(SMPPairingFailedReason, SMPFailure.Kind)] = [
            (.passkeyEntryFailed, .passkeyEntryFailed), (.oobNotAvailable, .oobNotAvailable),
            (.authenticationRequirements, .authenticationRequirements), (.confirmValueFailed, .confirmValueFailed),
            (.pairingNotSupported, .pairingNotSupported), (.encryptionKeySize, .encryptionKeySize),
            (.commandNotSupported, .commandNotSupported), (.unspecifiedReason, .unspecified),
            (.repeatedAttempts, .repeatedAttempts), (.invalidParameters, .invalidParameters),
            (.dhKeyCheckFailed, .dhKeyCheckFailed), (.numericComparisonFailed, .numericComparisonFailed),
            (.brEdrPairingInProgress, .brEdrPairingInProgress), (.crossTransportKeyNotAllowed, .crossTransportKeyNotAllowed),
            (.keyRejected, .keyRejected), (.busy, .busy), (SMPPairingFailedReason(rawValue: 0x77), .unspecified),
        ]
        for (reason, kind) in expected {
            let failure = SMPFailure.fromPeer(reason, passkeyEntry: false)
            #expect(failure.kind == kind && failure.origin == .peer && failure.reason == reason)
            #expect(failure.category == .pairingFailed)
            #expect(failure.description.contains(reason.name))
        }
        #expect(SMPFailure.fromPeer(.confirmValueFailed, passkeyEntry: true).kind == .wrongPasskey)
    }

    @Test func aSigningKeyIsHandedOverWhenAskedFor() throws {
        var central = Fixture.central(random: FixedRandom(seed: 0, keyPairs: [try SpecKeys.pairA()])).configuration
        central.requestSigningKey = true
        var peripheral = Fixture.peripheral(random: FixedRandom(seed: 0x80, keyPairs: [])).configuration
        peripheral.distributeSigningKey = true
        var h = PairingHarness(central: SMPCentral(configuration: central, random: FixedRandom(seed: 0, keyPairs: [try SpecKeys.pairA()])),
                               peripheral: SMPPeripheral(configuration: peripheral, random: FixedRandom(seed: 0x80, keyPairs: [try SpecKeys.pairB()])))
        h.run(.secure(.encrypted))
        #expect(h.wire[0].bytes == [0x01, 0x03, 0x00, 0x29, 0x10, 0x02, 0x07])
        #expect(h.codes.suffix(5) == ["P:08", "P:09", "P:0a", "C:08", "C:09"])
        let csrk = try #require(h.centralOutcome?.bond?.peerCSRK)
        guard case .signingInformation(let sent)? = h.wire.first(where: { $0.bytes.first == 0x0A })?.pdu else { Issue.record("no CSRK"); return }
        #expect(sent.csrk == csrk)
    }

    @Test func withoutBondingNoKeysAreHandedOverAndNoBondIsMade() throws {
        var central = Fixture.central(random: FixedRandom(seed: 0, keyPairs: [])).configuration
        central.bondable = false
        var h = PairingHarness(central: SMPCentral(configuration: central, random: FixedRandom(seed: 0, keyPairs: [try SpecKeys.pairA()])),
                               peripheral: Fixture.peripheral(random: FixedRandom(seed: 0x80, keyPairs: [try SpecKeys.pairB()])))
        h.run(.secure(.encrypted))
        #expect(h.wire[0].bytes == [0x01, 0x03, 0x00, 0x28, 0x10, 0x00, 0x00])
        #expect(h.codes.last == "P:0d")
        let outcome = try #require(h.centralOutcome)
        #expect(outcome.bond == nil && outcome.security.level == .encrypted)
    }

    // MARK: - Bonds, Security Requests, key refresh

    @Test func aStoredBondEncryptsWithoutPairing() throws {
        var first = try Self.harness()
        first.run(.secure(.encrypted))
        let bond = try #require(first.centralOutcome?.bond), peerBond = try #require(first.peripheralOutcome?.bond)
        var h = PairingHarness(central: Fixture.central(storedBond: bond, random: FixedRandom(seed: 0, keyPairs: [])),
                               peripheral: Fixture.peripheral(storedBond: peerBond, random: FixedRandom(seed: 0x80, keyPairs: [])))
        h.run(.secure(.encrypted))
        #expect(h.wire.isEmpty)
        #expect(h.centralActions.first == .startEncryption(bond.encryptionKey))
        let outcome = try #require(h.centralOutcome)
        #expect(outcome.usedStoredBond && outcome.bond == nil && outcome.method == nil)
        #expect(outcome.security == bond.linkSecurity)
        #expect(h.peripheralOutcome?.usedStoredBond == true)
        // Asking again at the level reached answers at once.
        #expect(h.central.handle(.secure(.encrypted)) == [.completed(SMPOutcome(security: bond.linkSecurity, method: nil, bond: nil, usedStoredBond: false))])
    }

    @Test func aStoredLegacyBondIsUsedOnlyWhenLegacyIsAllowed() throws {
        let legacyBond = Bond(peer: Fixture.peripheralAddress, ltk: Key128(7), ediv: 0x1234, rand: 99, keySize: 16,
                              authenticated: false, secureConnections: false)
        var strict = Fixture.central(storedBond: legacyBond, random: FixedRandom(seed: 0, keyPairs: []))
        #expect(strict.handle(.secure(.encrypted)).first == .send(.pairingRequest(SMPPairingParameters(
            ioCapability: .noInputNoOutput, authRequirements: [.bonding, .secureConnections, .ct2],
            initiatorKeys: [.identityKey], responderKeys: [.encryptionKey, .identityKey]))))
        var lenient = Fixture.central(allowLegacy: true, storedBond: legacyBond, random: FixedRandom(seed: 0, keyPairs: []))
        #expect(lenient.handle(.secure(.encrypted)) == [.startEncryption(SMPEncryptionKey(ltk: Key128(7), ediv: 0x1234, rand: 99, keySize: 16))])
    }

    @Test func aBondTheDeviceLostFailsWithBondLostAndThenPairsAgain() throws {
        var first = try Self.harness()
        first.run(.secure(.encrypted))
        let bond = try #require(first.centralOutcome?.bond)
        var h = PairingHarness(central: Fixture.central(storedBond: bond, random: FixedRandom(seed: 0, keyPairs: [try SpecKeys.pairA()])),
                               peripheral: Fixture.peripheral(random: FixedRandom(seed: 0x80, keyPairs: [try SpecKeys.pairB()])))
        h.run(.secure(.encrypted))
        #expect(h.peripheralActions == [.replyLongTermKey(nil)])
        let failure = try #require(h.centralFailure)
        #expect(failure.kind == .bondLost && failure.category == .bondLost && failure.origin == .controller)
        #expect(h.wire.isEmpty)
        // The lost bond is not offered again: the next request pairs.
        h.run(.secure(.encrypted))
        #expect(h.codes.first == "C:01")
        #expect(h.centralOutcome?.bond?.ltk == h.peripheralOutcome?.bond?.ltk)
    }

    @Test func anEncryptionFailureOtherThanAMissingKeyIsNotABondLoss() throws {
        let bond = Bond(peer: Fixture.peripheralAddress, ltk: Key128(1), keySize: 16, authenticated: false, secureConnections: true)
        var central = Fixture.central(storedBond: bond, random: FixedRandom(seed: 0, keyPairs: []))
        _ = central.handle(.secure(.encrypted))
        let actions = central.handle(.encryptionFailed(status: 0x3D))
        if case .failed(let failure)? = actions.last {
            #expect(failure.kind == .encryptionFailed(status: 0x3D) && failure.category == .encryptionFailed)
        } else { Issue.record("\(actions)") }
    }

    @Test func aSecurityRequestIsAnsweredByPairing() throws {
        var h = try Self.harness()
        h.run(.requestSecurity(.encrypted))
        #expect(h.codes.prefix(2) == ["P:0b", "C:01"])
        #expect(h.wire[0].bytes == [0x0B, 0x29])
        #expect(h.centralOutcome?.security.level == .encrypted)
    }

    @Test func aSecurityRequestForMITMPairsAsWellAsTheCentralCan() throws {
        // No passkey here: the central pairs with Just Works rather than refusing; the device decides.
        var h = try Self.harness()
        h.run(.requestSecurity(.authenticated))
        #expect(h.wire[0].bytes == [0x0B, 0x2D])
        #expect(h.centralOutcome?.method == .justWorks)
    }

    @Test func aSecurityRequestIsAnsweredWithTheStoredBondOrRefusedByPolicy() throws {
        let bond = Bond(peer: Fixture.peripheralAddress, ltk: Key128(5), keySize: 16, authenticated: false, secureConnections: true)
        var encrypting = Fixture.central(storedBond: bond, random: FixedRandom(seed: 0, keyPairs: []))
        #expect(encrypting.handle(.received([0x0B, 0x01])) == [.startEncryption(bond.encryptionKey)])
        var rejecting = Fixture.central(policy: .reject, random: FixedRandom(seed: 0, keyPairs: []))
        #expect(rejecting.handle(.received([0x0B, 0x01])) == [.send(.pairingFailed(SMPPairingFailed(reason: .pairingNotSupported)))])
        var ignoring = Fixture.central(policy: .ignore, random: FixedRandom(seed: 0, keyPairs: []))
        #expect(ignoring.handle(.received([0x0B, 0x01])) == [])
        var encryptOnly = Fixture.central(policy: .encryptOnly, random: FixedRandom(seed: 0, keyPairs: []))
        #expect(encryptOnly.handle(.received([0x0B, 0x01])) == [])
        // A Security Request during a pairing is ignored.
        var busy = Fixture.central(random: FixedRandom(seed: 0, keyPairs: []))
        _ = busy.handle(.secure(.encrypted))
        #expect(busy.handle(.received([0x0B, 0x01])) == [])
    }

    @Test func pairingAgainOnAnEncryptedLinkCompletesOnKeyRefresh() throws {
        var h = try Self.harness(pairs: 2)
        h.run(.secure(.encrypted))
        let first = try #require(h.centralOutcome)
        h.run(.pair(.encrypted))
        let second = try #require(h.centralOutcome)
        #expect(h.codes.filter { $0 == "C:01" }.count == 2)
        #expect(second.bond?.ltk != first.bond?.ltk)
        #expect(second.bond?.ltk == h.peripheralOutcome?.bond?.ltk)
        #expect(h.central.security.level == .encrypted)
    }

    @Test func aRequestDuringAPairingJoinsIt() throws {
        var central = Fixture.central(random: FixedRandom(seed: 0, keyPairs: []))
        _ = central.handle(.secure(.encrypted))
        #expect(central.isBusy)
        #expect(central.handle(.secure(.encrypted)) == [])
        #expect(central.handle(.pair(.encrypted)) == [])
    }

    @Test func thePeersLatePDUsAfterAFailureAreIgnored() throws {
        var central = Fixture.central(random: FixedRandom(seed: 0, keyPairs: []))
        _ = central.handle(.secure(.encrypted))
        _ = central.handle(.received([0x05, 0x05]))
        #expect(central.handle(.received(try bytes("02030029100202"))) == [])
        #expect(central.handle(.received([0x05, 0x08])) == [])
    }

    @Test func printingAMachineInTheMiddleOfAPairingShowsNoSecret() throws {
        var h = try Self.harness(centralPasskey: Self.passkey, peripheralIO: .displayOnly, peripheralPasskey: Self.passkey)
        h.holdEncryption = true
        h.run(.secure(.authenticated))
        guard case .startEncryption(let key)? = h.centralActions.last else { Issue.record("\(h.centralActions)"); return }
        var dumpedCentral = "", dumpedPeripheral = ""
        dump(h.central, to: &dumpedCentral)
        dump(h.peripheral, to: &dumpedPeripheral)
        #expect("\(h.central)" == "SMPCentral(pairing, waiting for encryption, none)")
        for text in ["\(h.central)", String(reflecting: h.central), dumpedCentral, "\(h.peripheral)", dumpedPeripheral,
                     "\(h.central.configuration)", String(reflecting: h.peripheral.configuration)] {
            #expect(!text.contains("123456") && !text.contains("\(Self.passkey?.value ?? 0)"))
            #expect(!text.contains("\(key.ltk.value)") && !text.contains(String(key.ltk.value, radix: 16)))
        }
    }

    @Test func printingAMachineOrItsActionsShowsNoKey() throws {
        var h = try Self.harness()
        h.run(.secure(.encrypted))
        let bond = try #require(h.centralOutcome?.bond)
        let secret = String(bond.ltk.value, radix: 16)
        var dumped = ""
        dump(h.central, to: &dumped)
        for text in ["\(h.centralActions)", "\(h.peripheralActions)", String(reflecting: h.centralActions), dumped] {
            #expect(!text.contains(secret) && !text.contains(bond.ltk.littleEndianBytes.hexString))
            #expect(!text.contains("\(bond.ltk.value)"))
        }
    }
}
