import BLE

/// The central (initiator) side of the Security Manager (Bluetooth Core v5.4, Vol 3, Part H) as a
/// value-type state machine: pairing (LE Secure Connections Just Works, Passkey Entry and OOB; LE
/// legacy Just Works and Passkey Entry when allowed), key distribution, encryption with a stored bond,
/// Security Requests and the 30 s SMP timeout.
///
/// The executor (the HCI host) owns one per link and knows nothing of SMP: it feeds `Event`s — the
/// session's request for a level, every PDU received on L2CAP CID 0x0006, the controller's encryption
/// events, timer expiries — and carries out the `SMPAction`s returned, in order. Randomness and key
/// pairs come from an injected `SMPRandomSource`, so a whole pairing runs in a test with fixed inputs.
///
/// A request for a level while a procedure runs joins it: the procedure's `.completed` or `.failed`
/// answers every request, and the executor compares the level reached with what each asked for.
public struct SMPCentral: Sendable {
    /// What happens to the link, as the executor reports it.
    public enum Event: Sendable, Hashable {
        /// The session needs `level`: encrypt with a stored bond that meets it, else pair.
        case secure(SecurityLevel)
        /// Pair now for `level`, even if a stored bond exists (a lost bond re-made, when the workflow allows it).
        case pair(SecurityLevel)
        /// A PDU arrived on the Security Manager channel (L2CAP CID 0x0006).
        case received([UInt8])
        /// HCI Encryption Change with status success; `keySize` from the v2 event or Read Encryption Key Size.
        case encryptionChanged(enabled: Bool, keySize: Int?)
        /// HCI Encryption Change (or LE Enable Encryption's Command Status) with a failure status.
        case encryptionFailed(status: UInt8)
        /// HCI Encryption Key Refresh Complete with status success (encryption restarted on an encrypted link).
        case keyRefreshComplete
        /// The Security Manager timer armed as `id` fired.
        case timerExpired(UInt64)
    }

    /// HCI status PIN or Key Missing (Vol 1 Part F 2.6): the peripheral has no key for the EDIV/Rand given.
    public static let pinOrKeyMissing: UInt8 = 0x06

    /// The abilities, policy and addresses this machine pairs with; `storedBond` follows new bonds.
    public private(set) var configuration: SMPCentralConfiguration
    /// The link's security now.
    public private(set) var security: LinkSecurity = .none
    /// True after an SMP timeout: no pairing on this link until it is reconnected (Vol 3 Part H 3.4).
    public private(set) var isChannelClosed = false

    private var random: any SMPRandomSource
    private var state: State = .idle
    private var timer = SMPTimerState()
    /// Encryption with the stored bond failed with PIN or Key Missing: the bond is not offered again.
    private var storedBondLost = false

    private enum State: Sendable {
        case idle
        case encrypting(Bond)
        case pairing(Pairing)
    }

    private struct Pairing: Sendable {
        var target: SecurityLevel
        /// A session asked for `target` and fails if it cannot be reached; a Security Request pairs as well as it can.
        var strict: Bool
        let request: SMPPairingParameters
        var stage: PairingStage = .featureExchange
        var features: PairingFeatures?
        var sc: SecureConnectionsExchange?
        var legacy: LegacyExchange?
        var receiver = KeyReceiver(keys: [])
        /// Key PDUs that arrived before the controller reported encryption.
        var early: [SMPPDU] = []

        var isPasskeyEntry: Bool {
            if case .passkeyEntry = features?.method { return true }
            return false
        }
    }

    public init(configuration: SMPCentralConfiguration, random: any SMPRandomSource = SystemRandom()) {
        self.configuration = configuration
        self.random = random
    }

    /// True while pairing or encryption is in progress.
    public var isBusy: Bool {
        if case .idle = state { return false }
        return true
    }

    /// Changes what this side brings to the next procedure (passkey, OOB data, legacy, bonding, the
    /// Security Request policy) — a session that asks for more than the link was set up with. Refused
    /// (false) while a procedure runs: its parameters are already with the peer. The link's addresses
    /// and the bond it offers stay as they are (a bond made on this link is the one offered).
    @discardableResult
    public mutating func reconfigure(_ change: (inout SMPCentralConfiguration) -> Void) -> Bool {
        guard !isBusy else { return false }
        let kept = configuration
        change(&configuration)
        configuration.localAddress = kept.localAddress
        configuration.peerAddress = kept.peerAddress
        configuration.storedBond = kept.storedBond
        return true
    }

    /// Feeds one event; returns what the executor must do, in order.
    public mutating func handle(_ event: Event) -> [SMPAction] {
        switch event {
        case .secure(let level): return secure(level, forcePairing: false)
        case .pair(let level): return secure(max(level, .encrypted), forcePairing: true)
        case .received(let bytes): return received(bytes)
        case .encryptionChanged(let enabled, let keySize): return enabled ? encryptionOn(keySize: keySize) : encryptionOff()
        case .encryptionFailed(let status): return encryptionFailed(status)
        case .keyRefreshComplete: return encryptionOn(keySize: nil)
        case .timerExpired(let id): return timerExpired(id)
        }
    }

    // MARK: - Asking for a level

    private mutating func secure(_ level: SecurityLevel, forcePairing: Bool) -> [SMPAction] {
        guard case .idle = state else { return [] }
        if !forcePairing && security.level >= level {
            return [.completed(SMPOutcome(security: security, method: nil, bond: nil, usedStoredBond: false))]
        }
        if !forcePairing, let bond = usableBond(for: level) {
            state = .encrypting(bond)
            return [.startEncryption(bond.encryptionKey)]
        }
        return startPairing(target: level, strict: true)
    }

    /// The stored bond, if it gives `level` under this policy (legacy bonds only when legacy is allowed).
    private func usableBond(for level: SecurityLevel) -> Bond? {
        guard !storedBondLost, let bond = configuration.storedBond, bond.level >= level,
              bond.secureConnections || configuration.allowLegacy,
              bond.keySize >= configuration.minimumKeySize else { return nil }
        return bond
    }

    private mutating func startPairing(target: SecurityLevel, strict: Bool) -> [SMPAction] {
        if isChannelClosed {
            return [.failed(SMPFailure(.channelClosed, origin: .local, detail: "SMP timed out earlier on this link; reconnect to pair"))]
        }
        if strict && target == .authenticated && configuration.achievableLevel < .authenticated {
            return [.failed(SMPFailure(.authenticationRequirements, origin: .local,
                                       detail: "authenticated pairing needs the device's passkey, its OOB data, or a display on this side"))]
        }
        let request = pairingRequest(target: target)
        state = .pairing(Pairing(target: target, strict: strict, request: request))
        return [.send(.pairingRequest(request)), timer.restart()]
    }

    private func pairingRequest(target: SecurityLevel) -> SMPPairingParameters {
        var auth: SMPAuthRequirements = [.secureConnections, .ct2]
        if configuration.bondable { auth.insert(.bonding) }
        if target == .authenticated || configuration.passkey != nil || configuration.displaysPasskey { auth.insert(.mitm) }
        var initiatorKeys: SMPKeyDistribution = []
        var responderKeys: SMPKeyDistribution = []
        if configuration.bondable {
            if configuration.localIdentity != nil { initiatorKeys.insert(.identityKey) }
            responderKeys = [.encryptionKey, .identityKey]
            if configuration.requestSigningKey { responderKeys.insert(.signingKey) }
        }
        return SMPPairingParameters(ioCapability: configuration.ioCapability, oobDataFlag: configuration.oobData == nil ? 0 : 1,
                                    authRequirements: auth, maxEncryptionKeySize: 16,
                                    initiatorKeys: initiatorKeys, responderKeys: responderKeys)
    }

    // MARK: - PDUs

    private mutating func received(_ bytes: [UInt8]) -> [SMPAction] {
        if isChannelClosed { return [] }
        let pdu: SMPPDU
        do {
            pdu = try SMPPDU(decoding: bytes)
        } catch {
            guard case .pairing = state else { return [] }
            return finish(.failed(SMPFailure(.malformedPDU, origin: .local, reason: .invalidParameters, detail: error.description)))
        }
        guard case .pairing(var p) = state else { return receivedOutsidePairing(pdu) }
        switch pdu {
        case .pairingFailed(let failed):
            return finish(.failed(.fromPeer(failed.reason, passkeyEntry: p.isPasskeyEntry)))
        case .keypressNotification, .securityRequest:
            return []
        case .unknown(let code, _):
            return finish(.failed(SMPFailure(.commandNotSupported, origin: .local, reason: .commandNotSupported, detail: "the device sent \(code)")))
        default:
            let step: PairingStep
            do { step = try advance(&p, pdu) } catch { step = .failed(error) }
            return finish(step, p)
        }
    }

    private mutating func receivedOutsidePairing(_ pdu: SMPPDU) -> [SMPAction] {
        switch pdu {
        case .securityRequest(let request):
            return securityRequest(request.authRequirements)
        case .pairingRequest:
            // A central does not pair as the responder.
            return [.send(.pairingFailed(SMPPairingFailed(reason: .pairingNotSupported)))]
        case .unknown:
            // An unknown command is answered as the specification says (Vol 3 Part H 3.3).
            return [.send(.pairingFailed(SMPPairingFailed(reason: .commandNotSupported)))]
        default:
            return [] // a late PDU of a finished or failed pairing
        }
    }

    private mutating func securityRequest(_ auth: SMPAuthRequirements) -> [SMPAction] {
        guard case .idle = state else { return [] }
        let required: SecurityLevel = auth.contains(.mitm) ? .authenticated : .encrypted
        switch configuration.securityRequestPolicy {
        case .ignore:
            return []
        case .reject:
            return [.send(.pairingFailed(SMPPairingFailed(reason: .pairingNotSupported)))]
        case .encryptOnly, .encryptOrReject:
            guard security.level < required else { return [] }
            guard let bond = usableBond(for: .encrypted) else {
                return configuration.securityRequestPolicy == .encryptOrReject
                    ? [.send(.pairingFailed(SMPPairingFailed(reason: .pairingNotSupported)))] : []
            }
            state = .encrypting(bond)
            return [.startEncryption(bond.encryptionKey)]
        case .pairOrEncrypt:
            if security.level >= required { return [] }
            if let bond = usableBond(for: required) {
                state = .encrypting(bond)
                return [.startEncryption(bond.encryptionKey)]
            }
            return startPairing(target: min(required, configuration.achievableLevel), strict: false)
        }
    }

    private mutating func advance(_ p: inout Pairing, _ pdu: SMPPDU) throws(SMPFailure) -> PairingStep {
        switch (p.stage, pdu) {
        case (.featureExchange, .pairingResponse(let response)): return try featuresExchanged(&p, response)
        case (.publicKey, .pairingPublicKey(let key)): return try publicKeyReceived(&p, key.key)
        case (.confirm, .pairingConfirm(let confirm)): return try confirmReceived(&p, confirm.value)
        case (.random, .pairingRandom(let value)): return try randomReceived(&p, value.value)
        case (.dhKeyCheck, .pairingDHKeyCheck(let check)): return try dhKeyCheckReceived(&p, check.value)
        case (.encryption, _) where pdu.isKeyDistribution:
            p.early.append(pdu)
            return .next([])
        case (.keyDistribution, _): return try keyReceived(&p, pdu)
        default: throw unexpected(pdu, waitingFor: p.stage)
        }
    }

    /// Phase 1 done: check the response, choose the method, start phase 2.
    private mutating func featuresExchanged(_ p: inout Pairing, _ response: SMPPairingParameters) throws(SMPFailure) -> PairingStep {
        if let bad = PairingFeatures.invalidField(in: response) {
            throw SMPFailure(.invalidParameters, origin: .local, reason: .invalidParameters, detail: "the Pairing Response has a reserved or out-of-range \(bad)")
        }
        let f = PairingFeatures(request: p.request, response: response)
        if !f.secureConnections && !configuration.allowLegacy {
            throw SMPFailure(.legacyPairingRefused, origin: .local, reason: .authenticationRequirements,
                             detail: "the device supports only LE legacy pairing, which is not allowed here")
        }
        if f.keySize < configuration.minimumKeySize {
            throw SMPFailure(.encryptionKeySize, origin: .local, reason: .encryptionKeySize,
                             detail: "the device offers \(f.keySize)-octet keys; at least \(configuration.minimumKeySize) are required")
        }
        if p.strict && p.target == .authenticated && !f.method.isAuthenticated {
            throw SMPFailure(.authenticationRequirements, origin: .local, reason: .authenticationRequirements,
                             detail: "the device (\(response.ioCapability)) and this side (\(p.request.ioCapability)) can only pair with Just Works, which is not authenticated")
        }
        p.features = f
        var actions: [SMPAction] = []
        var passkey: UInt32 = 0
        switch f.method {
        case .justWorks:
            break
        case .passkeyEntry(let roles):
            if roles == .initiatorDisplays {
                let shown = Passkey.fromRandom(try random.pairingBytes(4))
                actions.append(.displayPasskey(shown))
                passkey = shown.value
            } else {
                guard let known = configuration.passkey else {
                    throw SMPFailure(.passkeyEntryFailed, origin: .local, reason: .passkeyEntryFailed,
                                     detail: "the device shows a passkey to enter, and none is configured")
                }
                passkey = known.value
            }
        case .numericComparison:
            throw SMPFailure(.numericComparisonFailed, origin: .local, reason: .numericComparisonFailed,
                             detail: "Numeric Comparison needs a person to confirm six digits")
        case .outOfBand:
            guard f.secureConnections, p.request.oobDataPresent, configuration.oobData != nil else {
                throw SMPFailure(.oobNotAvailable, origin: .local, reason: .oobNotAvailable,
                                 detail: "the device expects OOB data this side does not have")
            }
        }
        if f.secureConnections {
            let keyPair = try random.pairingKeyPair()
            var sc = SecureConnectionsExchange(isInitiator: true, features: f, keyPair: keyPair,
                                               initiatorAddress: configuration.localAddress, responderAddress: configuration.peerAddress)
            sc.passkey = passkey
            if case .passkeyEntry = f.method { sc.ra = UInt128(passkey); sc.rb = UInt128(passkey) }
            if case .outOfBand = f.method { sc.rb = configuration.oobData?.random ?? 0 }
            p.sc = sc
            p.stage = .publicKey
            actions.append(.send(.pairingPublicKey(SMPPairingPublicKey(key: keyPair.publicKey))))
        } else {
            var legacy = LegacyExchange(isInitiator: true, features: f, initiatorAddress: configuration.localAddress,
                                        responderAddress: configuration.peerAddress, tk: UInt128(passkey))
            legacy.localRandom = try random.pairingNonce()
            let mconfirm = try legacy.confirm(legacy.localRandom)
            p.legacy = legacy
            p.stage = .confirm
            actions.append(.send(.pairingConfirm(SMPPairingConfirm(value: mconfirm))))
        }
        return .next(actions)
    }

    /// LE Secure Connections: the responder's public key arrived (after ours).
    private mutating func publicKeyReceived(_ p: inout Pairing, _ key: P256PublicKey) throws(SMPFailure) -> PairingStep {
        guard var sc = p.sc, let f = p.features else { throw internalFailure("public key without a Secure Connections exchange") }
        try sc.acceptPeerKey(key)
        var actions: [SMPAction] = []
        switch f.method {
        case .justWorks, .numericComparison:
            sc.localNonce = try random.pairingNonce()
            p.stage = .confirm // the responder commits first (Cb)
        case .passkeyEntry:
            sc.round = 0
            sc.localNonce = try random.pairingNonce()
            actions.append(.send(.pairingConfirm(SMPPairingConfirm(value: try sc.localConfirm(z: sc.passkeyBit)))))
            p.stage = .confirm
        case .outOfBand:
            let oob = configuration.oobData ?? OOBData(random: 0, confirm: 0)
            let expected = try crypto { () throws(CryptoError) in try SMPCrypto.f4(u: key.x, v: key.x, x: oob.random, z: 0) }
            guard expected == oob.confirm else {
                throw SMPFailure(.confirmValueFailed, origin: .local, reason: .confirmValueFailed,
                                 detail: "the device's public key does not match its OOB data")
            }
            sc.localNonce = try random.pairingNonce()
            actions.append(.send(.pairingRandom(SMPPairingRandom(value: sc.localNonce))))
            p.stage = .random
        }
        p.sc = sc
        return .next(actions)
    }

    private mutating func confirmReceived(_ p: inout Pairing, _ value: UInt128) throws(SMPFailure) -> PairingStep {
        p.stage = .random
        if var sc = p.sc {
            sc.peerConfirm = value
            p.sc = sc
            return .next([.send(.pairingRandom(SMPPairingRandom(value: sc.localNonce)))])
        }
        guard var legacy = p.legacy else { throw internalFailure("confirm without an exchange") }
        legacy.peerConfirm = value
        p.legacy = legacy
        return .next([.send(.pairingRandom(SMPPairingRandom(value: legacy.localRandom)))])
    }

    private mutating func randomReceived(_ p: inout Pairing, _ value: UInt128) throws(SMPFailure) -> PairingStep {
        guard let f = p.features else { throw internalFailure("random before the feature exchange") }
        if var sc = p.sc {
            sc.peerNonce = value
            switch f.method {
            case .justWorks, .numericComparison:
                guard try sc.peerConfirmMatches(z: 0) else {
                    throw SMPFailure(.confirmValueFailed, origin: .local, reason: .confirmValueFailed,
                                     detail: "the device's confirm value does not match its random value")
                }
            case .passkeyEntry:
                guard try sc.peerConfirmMatches(z: sc.passkeyBit) else {
                    throw SMPFailure(.wrongPasskey, origin: .local, reason: .confirmValueFailed,
                                     detail: "the device's confirm value for passkey bit \(sc.round) does not match: the passkeys differ")
                }
                if sc.round < 19 {
                    sc.round += 1
                    sc.localNonce = try random.pairingNonce()
                    let confirm = try sc.localConfirm(z: sc.passkeyBit)
                    p.sc = sc
                    p.stage = .confirm
                    return .next([.send(.pairingConfirm(SMPPairingConfirm(value: confirm)))])
                }
            case .outOfBand:
                break
            }
            try sc.deriveKeys()
            let ea = try sc.localCheck()
            p.sc = sc
            p.stage = .dhKeyCheck
            return .next([.send(.pairingDHKeyCheck(SMPPairingDHKeyCheck(value: ea)))])
        }
        guard var legacy = p.legacy else { throw internalFailure("random without an exchange") }
        legacy.peerRandom = value
        guard try legacy.confirm(value) == legacy.peerConfirm else {
            throw SMPFailure(p.isPasskeyEntry ? .wrongPasskey : .confirmValueFailed, origin: .local, reason: .confirmValueFailed,
                             detail: p.isPasskeyEntry ? "the device's confirm value does not match: the passkeys differ"
                                                      : "the device's confirm value does not match its random value")
        }
        let stk = try legacy.shortTermKey()
        p.legacy = legacy
        p.stage = .encryption
        return .next([.startEncryption(SMPEncryptionKey(ltk: stk, ediv: 0, rand: 0, keySize: f.keySize))])
    }

    private mutating func dhKeyCheckReceived(_ p: inout Pairing, _ value: UInt128) throws(SMPFailure) -> PairingStep {
        guard let sc = p.sc, let f = p.features else { throw internalFailure("DHKey check without an exchange") }
        guard try sc.peerCheckMatches(value) else {
            throw SMPFailure(.dhKeyCheckFailed, origin: .local, reason: .dhKeyCheckFailed, detail: "the device's DHKey check value does not match")
        }
        p.stage = .encryption
        return .next([.startEncryption(SMPEncryptionKey(ltk: Key128(sc.ltk).masked(toSize: f.keySize), ediv: 0, rand: 0, keySize: f.keySize))])
    }

    private mutating func keyReceived(_ p: inout Pairing, _ pdu: SMPPDU) throws(SMPFailure) -> PairingStep {
        guard p.receiver.accept(pdu) else { throw unexpected(pdu, waitingFor: .keyDistribution) }
        return p.receiver.isComplete ? try completed(p) : .next([])
    }

    /// Key distribution done on the peer's side: hand over ours, make the bond.
    private func completed(_ p: Pairing) throws(SMPFailure) -> PairingStep {
        guard let f = p.features else { throw internalFailure("completion before the feature exchange") }
        let ours = KeyMaterial(identity: configuration.localIdentity).pdus(for: f.initiatorKeys).map { SMPAction.send($0) }
        var bond: Bond?
        if f.bonding {
            let peer = p.receiver.identityAddress ?? configuration.peerAddress
            if let sc = p.sc {
                bond = Bond(peer: peer, ltk: Key128(sc.ltk).masked(toSize: f.keySize), keySize: f.keySize,
                            authenticated: f.method.isAuthenticated, secureConnections: true,
                            peerIRK: p.receiver.irk, peerCSRK: p.receiver.csrk,
                            usesPrivateAddress: configuration.peerAddress.isResolvablePrivate)
            } else if let ltk = p.receiver.ltk {
                bond = Bond(peer: peer, ltk: ltk, ediv: p.receiver.ediv, rand: p.receiver.rand, keySize: f.keySize,
                            authenticated: f.method.isAuthenticated, secureConnections: false,
                            peerIRK: p.receiver.irk, peerCSRK: p.receiver.csrk,
                            usesPrivateAddress: configuration.peerAddress.isResolvablePrivate)
            }
        }
        return .done(ours, SMPOutcome(security: security, method: f.method, bond: bond, usedStoredBond: false))
    }

    // MARK: - Controller events

    private mutating func encryptionOn(keySize: Int?) -> [SMPAction] {
        switch state {
        case .encrypting(let bond):
            state = .idle
            var reached = bond.linkSecurity
            if let keySize { reached.keySize = keySize }
            security = reached
            return [.completed(SMPOutcome(security: reached, method: nil, bond: nil, usedStoredBond: true))]
        case .pairing(var p) where p.stage == .encryption:
            guard let f = p.features else { return finish(.failed(internalFailure("encryption before the feature exchange"))) }
            security = LinkSecurity(level: f.level, keySize: keySize ?? f.keySize, secureConnections: f.secureConnections)
            p.receiver = KeyReceiver(keys: f.responderKeys)
            p.stage = .keyDistribution
            let early = p.early
            p.early = []
            do throws(SMPFailure) {
                for pdu in early {
                    guard p.receiver.accept(pdu) else { throw unexpected(pdu, waitingFor: .keyDistribution) }
                }
                return finish(p.receiver.isComplete ? try completed(p) : .next([]), p)
            } catch {
                return finish(.failed(error))
            }
        default:
            if security.level == .none { security = LinkSecurity(level: .encrypted, keySize: keySize ?? 0, secureConnections: false) }
            return []
        }
    }

    private mutating func encryptionOff() -> [SMPAction] {
        security = .none
        switch state {
        case .encrypting:
            state = .idle
            return [.failed(SMPFailure(.encryptionLost, origin: .controller, detail: "the controller reports encryption off"))]
        case .pairing(let p) where p.stage == .encryption || p.stage == .keyDistribution:
            return finish(.failed(SMPFailure(.encryptionLost, origin: .controller, detail: "encryption went off during key distribution")))
        default:
            return []
        }
    }

    private mutating func encryptionFailed(_ status: UInt8) -> [SMPAction] {
        switch state {
        case .encrypting(let bond):
            state = .idle
            if status == Self.pinOrKeyMissing {
                storedBondLost = true
                return [.failed(SMPFailure(.bondLost, origin: .controller,
                                           detail: "encryption with the stored key of \(bond.peer) failed with PIN or Key Missing: the device no longer has the bond"))]
            }
            return [.failed(SMPFailure(.encryptionFailed(status: status), origin: .controller, detail: "encryption with the stored bond failed"))]
        case .pairing(let p) where p.stage == .encryption:
            return finish(.failed(SMPFailure(.encryptionFailed(status: status), origin: .controller, detail: "encryption with the new key failed")))
        default:
            return []
        }
    }

    private mutating func timerExpired(_ id: UInt64) -> [SMPAction] {
        guard timer.fired(id), case .pairing = state else { return [] }
        state = .idle
        isChannelClosed = true
        return [.failed(.smpTimeout)]
    }

    // MARK: - Ending a step

    /// Applies a step's end: keeps the pairing going (restarting the timer when PDUs go out), or ends it.
    private mutating func finish(_ step: PairingStep, _ p: Pairing? = nil) -> [SMPAction] {
        switch step {
        case .next:
            if let p { state = .pairing(p) }
        case .done(_, let outcome):
            state = .idle
            security = outcome.security
            if let bond = outcome.bond {
                configuration.storedBond = bond
                storedBondLost = false
            }
        case .failed:
            state = .idle
        }
        return step.actions(timer: &timer)
    }
}

extension SMPCentral: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The procedure and the link's security; never a key, a nonce or a passkey.
    public var description: String { "SMPCentral(\(stateName), \(security))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["state": stateName, "security": security]) }

    private var stateName: String {
        switch state {
        case .idle: return procedureName(pairingStage: nil, encrypting: false, closed: isChannelClosed)
        case .encrypting: return procedureName(pairingStage: nil, encrypting: true, closed: isChannelClosed)
        case .pairing(let p): return procedureName(pairingStage: p.stage, encrypting: false, closed: isChannelClosed)
        }
    }
}
