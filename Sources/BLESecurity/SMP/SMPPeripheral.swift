import BLE

/// The peripheral (responder) side of the Security Manager as a value-type state machine: enough for
/// the simulator's devices and for pairing `SMPCentral` against it in tests. It answers Pairing Requests
/// (LE Secure Connections Just Works, Passkey Entry and OOB; LE legacy Just Works and Passkey Entry),
/// shows its passkey, hands over its keys, answers the controller's Long Term Key Requests, and can
/// send a Security Request.
///
/// Like `SMPCentral`, it returns `SMPAction`s for an executor: PDUs to send, the timer, the key for
/// LE Long Term Key Request Reply (`.replyLongTermKey`), a passkey to display, the outcome.
public struct SMPPeripheral: Sendable {
    /// What happens to the link, as the executor reports it.
    public enum Event: Sendable, Hashable {
        /// Ask the central for `level` (sends a Security Request).
        case requestSecurity(SecurityLevel)
        /// A PDU arrived on the Security Manager channel (L2CAP CID 0x0006).
        case received([UInt8])
        /// HCI LE Long Term Key Request: the central starts encryption with this EDIV and Rand.
        case longTermKeyRequested(ediv: UInt16, rand: UInt64)
        /// HCI Encryption Change with status success.
        case encryptionChanged(enabled: Bool, keySize: Int?)
        /// HCI Encryption Key Refresh Complete with status success.
        case keyRefreshComplete
        /// The Security Manager timer armed as `id` fired.
        case timerExpired(UInt64)
    }

    /// What this device can do and requires; `storedBond` follows new bonds.
    public private(set) var configuration: SMPPeripheralConfiguration
    /// The link's security now.
    public private(set) var security: LinkSecurity = .none
    /// True after an SMP timeout: no pairing on this link until it is reconnected.
    public private(set) var isChannelClosed = false

    private var random: any SMPRandomSource
    private var state: State = .idle
    private var timer = SMPTimerState()

    private enum State: Sendable {
        case idle
        /// The controller was given the stored bond's key; waiting for Encryption Change.
        case encrypting(Bond)
        case pairing(Pairing)
    }

    private struct Pairing: Sendable {
        let features: PairingFeatures
        var stage: PairingStage
        var sc: SecureConnectionsExchange?
        var legacy: LegacyExchange?
        /// The key the controller encrypts with (LTK, or the legacy STK), once known.
        var key: Key128?
        var receiver = KeyReceiver(keys: [])
        /// Legacy EncKey this side hands over (and keeps in its bond).
        var distributed = KeyMaterial()

        var isPasskeyEntry: Bool {
            if case .passkeyEntry = features.method { return true }
            return false
        }
    }

    public init(configuration: SMPPeripheralConfiguration, random: any SMPRandomSource = SystemRandom()) {
        self.configuration = configuration
        self.random = random
    }

    /// True while pairing or encryption is in progress.
    public var isBusy: Bool {
        if case .idle = state { return false }
        return true
    }

    /// Feeds one event; returns what the executor must do, in order.
    public mutating func handle(_ event: Event) -> [SMPAction] {
        switch event {
        case .requestSecurity(let level): return requestSecurity(level)
        case .received(let bytes): return received(bytes)
        case .longTermKeyRequested(let ediv, let rand): return longTermKeyRequested(ediv: ediv, rand: rand)
        case .encryptionChanged(let enabled, let keySize): return enabled ? encryptionOn(keySize: keySize) : encryptionOff()
        case .keyRefreshComplete: return encryptionOn(keySize: nil)
        case .timerExpired(let id): return timerExpired(id)
        }
    }

    private func requestSecurity(_ level: SecurityLevel) -> [SMPAction] {
        guard case .idle = state, !isChannelClosed, level > security.level else { return [] }
        var auth: SMPAuthRequirements = []
        if configuration.bondable { auth.insert(.bonding) }
        if level == .authenticated { auth.insert(.mitm) }
        if configuration.secureConnections { auth.formUnion([.secureConnections, .ct2]) }
        return [.send(.securityRequest(SMPSecurityRequest(authRequirements: auth)))]
    }

    // MARK: - PDUs

    private mutating func received(_ bytes: [UInt8]) -> [SMPAction] {
        if isChannelClosed { return [] }
        let pdu: SMPPDU
        do {
            pdu = try SMPPDU(decoding: bytes)
        } catch {
            let failure = SMPFailure(.malformedPDU, origin: .local, reason: .invalidParameters, detail: error.description)
            if case .pairing = state { return finish(.failed(failure)) }
            return [.send(.pairingFailed(SMPPairingFailed(reason: .invalidParameters)))]
        }
        switch state {
        case .idle, .encrypting:
            switch pdu {
            case .pairingRequest(let request):
                let step: PairingStep
                do { step = try pairingRequested(request) } catch { step = .failed(error) }
                return finish(step)
            case .unknown:
                return [.send(.pairingFailed(SMPPairingFailed(reason: .commandNotSupported)))]
            default:
                return []
            }
        case .pairing(var p):
            switch pdu {
            case .pairingFailed(let failed):
                return finish(.failed(.fromPeer(failed.reason, passkeyEntry: p.isPasskeyEntry)))
            case .keypressNotification:
                return []
            case .unknown(let code, _):
                return finish(.failed(SMPFailure(.commandNotSupported, origin: .local, reason: .commandNotSupported, detail: "the central sent \(code)")))
            default:
                let step: PairingStep
                do { step = try advance(&p, pdu) } catch { step = .failed(error) }
                return finish(step, p)
            }
        }
    }

    /// Phase 1: answer the Pairing Request with this device's features, or refuse.
    private mutating func pairingRequested(_ request: SMPPairingParameters) throws(SMPFailure) -> PairingStep {
        if let reason = configuration.refusePairing {
            throw SMPFailure(SMPFailure.kind(of: reason, passkeyEntry: false), origin: .local, reason: reason,
                             detail: "this device refuses to pair (\(reason.name))")
        }
        if let bad = PairingFeatures.invalidField(in: request) {
            throw SMPFailure(.invalidParameters, origin: .local, reason: .invalidParameters, detail: "the Pairing Request has a reserved or out-of-range \(bad)")
        }
        let secureConnections = configuration.secureConnections && request.authRequirements.contains(.secureConnections)
        if configuration.secureConnectionsOnly && !secureConnections {
            throw SMPFailure(.authenticationRequirements, origin: .local, reason: .authenticationRequirements,
                             detail: "this device accepts only LE Secure Connections")
        }
        var auth: SMPAuthRequirements = []
        let bonding = configuration.bondable && request.authRequirements.isBonding
        if bonding { auth.insert(.bonding) }
        if configuration.requireMITM { auth.insert(.mitm) }
        if configuration.secureConnections { auth.formUnion([.secureConnections, .ct2]) }
        var canGive: SMPKeyDistribution = []
        if !secureConnections { canGive.insert(.encryptionKey) }
        if configuration.localIdentity != nil { canGive.insert(.identityKey) }
        if configuration.distributeSigningKey { canGive.insert(.signingKey) }
        let response = SMPPairingParameters(
            ioCapability: configuration.ioCapability, oobDataFlag: 0, authRequirements: auth,
            maxEncryptionKeySize: UInt8(clamping: configuration.maximumKeySize),
            initiatorKeys: bonding ? request.initiatorKeys.intersection([.encryptionKey, .identityKey, .signingKey]) : [],
            responderKeys: bonding ? request.responderKeys.intersection(canGive) : [])
        let f = PairingFeatures(request: request, response: response)
        if f.keySize < configuration.minimumKeySize {
            throw SMPFailure(.encryptionKeySize, origin: .local, reason: .encryptionKeySize,
                             detail: "the central offers \(f.keySize)-octet keys; this device needs \(configuration.minimumKeySize)")
        }
        if configuration.requireMITM && !f.method.isAuthenticated {
            throw SMPFailure(.authenticationRequirements, origin: .local, reason: .authenticationRequirements,
                             detail: "this device requires MITM protection and the IO capabilities allow only Just Works")
        }
        var actions: [SMPAction] = [.send(.pairingResponse(response))]
        var passkey: UInt32 = 0
        switch f.method {
        case .justWorks:
            break
        case .passkeyEntry(let roles):
            if roles == .responderDisplays {
                let shown: Passkey
                if let label = configuration.passkey { shown = label } else { shown = Passkey.fromRandom(try random.pairingBytes(4)) }
                actions.append(.displayPasskey(shown))
                passkey = shown.value
            } else {
                guard let entered = configuration.passkey else {
                    throw SMPFailure(.passkeyEntryFailed, origin: .local, reason: .passkeyEntryFailed, detail: "no passkey was entered on this device")
                }
                passkey = entered.value
            }
        case .numericComparison:
            throw SMPFailure(.numericComparisonFailed, origin: .local, reason: .numericComparisonFailed,
                             detail: "Numeric Comparison needs a person to confirm six digits")
        case .outOfBand:
            guard f.secureConnections, request.oobDataPresent, configuration.oob != nil else {
                throw SMPFailure(.oobNotAvailable, origin: .local, reason: .oobNotAvailable, detail: "this device has no OOB data for this pairing")
            }
        }
        var p = Pairing(features: f, stage: f.secureConnections ? .publicKey : .confirm)
        if f.secureConnections {
            let keyPair: P256KeyPair
            if case .outOfBand = f.method, let oob = configuration.oob { keyPair = oob.keyPair } else { keyPair = try random.pairingKeyPair() }
            var sc = SecureConnectionsExchange(isInitiator: false, features: f, keyPair: keyPair,
                                               initiatorAddress: configuration.peerAddress, responderAddress: configuration.localAddress)
            sc.passkey = passkey
            if case .passkeyEntry = f.method { sc.ra = UInt128(passkey); sc.rb = UInt128(passkey) }
            if case .outOfBand = f.method { sc.rb = configuration.oob?.random ?? 0 }
            p.sc = sc
        } else {
            p.legacy = LegacyExchange(isInitiator: false, features: f, initiatorAddress: configuration.peerAddress,
                                      responderAddress: configuration.localAddress, tk: UInt128(passkey))
        }
        state = .pairing(p)
        return .next(actions)
    }

    private mutating func advance(_ p: inout Pairing, _ pdu: SMPPDU) throws(SMPFailure) -> PairingStep {
        switch (p.stage, pdu) {
        case (.publicKey, .pairingPublicKey(let key)): return try publicKeyReceived(&p, key.key)
        case (.confirm, .pairingConfirm(let confirm)): return try confirmReceived(&p, confirm.value)
        case (.random, .pairingRandom(let value)): return try randomReceived(&p, value.value)
        case (.dhKeyCheck, .pairingDHKeyCheck(let check)): return try dhKeyCheckReceived(&p, check.value)
        case (.keyDistribution, _):
            guard p.receiver.accept(pdu) else { throw unexpected(pdu, waitingFor: .keyDistribution) }
            return p.receiver.isComplete ? completed(p) : .next([])
        default: throw unexpected(pdu, waitingFor: p.stage)
        }
    }

    /// LE Secure Connections: the central's key arrived; answer with ours.
    private mutating func publicKeyReceived(_ p: inout Pairing, _ key: P256PublicKey) throws(SMPFailure) -> PairingStep {
        guard var sc = p.sc else { throw internalFailure("public key without a Secure Connections exchange") }
        try sc.acceptPeerKey(key)
        var actions: [SMPAction] = [.send(.pairingPublicKey(SMPPairingPublicKey(key: sc.keyPair.publicKey)))]
        switch p.features.method {
        case .justWorks, .numericComparison:
            sc.localNonce = try random.pairingNonce()
            actions.append(.send(.pairingConfirm(SMPPairingConfirm(value: try sc.localConfirm(z: 0)))))
            p.stage = .random
        case .passkeyEntry:
            sc.round = 0
            p.stage = .confirm
        case .outOfBand:
            p.stage = .random
        }
        p.sc = sc
        return .next(actions)
    }

    private mutating func confirmReceived(_ p: inout Pairing, _ value: UInt128) throws(SMPFailure) -> PairingStep {
        p.stage = .random
        if var sc = p.sc {
            sc.peerConfirm = value
            sc.localNonce = try random.pairingNonce()
            let confirm = try sc.localConfirm(z: sc.passkeyBit)
            p.sc = sc
            return .next([.send(.pairingConfirm(SMPPairingConfirm(value: confirm)))])
        }
        guard var legacy = p.legacy else { throw internalFailure("confirm without an exchange") }
        legacy.peerConfirm = value
        legacy.localRandom = try random.pairingNonce()
        let sconfirm = try legacy.confirm(legacy.localRandom)
        p.legacy = legacy
        return .next([.send(.pairingConfirm(SMPPairingConfirm(value: sconfirm)))])
    }

    private mutating func randomReceived(_ p: inout Pairing, _ value: UInt128) throws(SMPFailure) -> PairingStep {
        if var sc = p.sc {
            sc.peerNonce = value
            switch p.features.method {
            case .passkeyEntry:
                guard try sc.peerConfirmMatches(z: sc.passkeyBit) else {
                    throw SMPFailure(.wrongPasskey, origin: .local, reason: .confirmValueFailed,
                                     detail: "the central's confirm value for passkey bit \(sc.round) does not match: the passkeys differ")
                }
                let nonce = sc.localNonce
                if sc.round < 19 {
                    sc.round += 1
                    p.stage = .confirm
                } else {
                    p.stage = .dhKeyCheck
                }
                p.sc = sc
                return .next([.send(.pairingRandom(SMPPairingRandom(value: nonce)))])
            case .outOfBand:
                sc.localNonce = try random.pairingNonce()
            case .justWorks, .numericComparison:
                break
            }
            p.sc = sc
            p.stage = .dhKeyCheck
            return .next([.send(.pairingRandom(SMPPairingRandom(value: sc.localNonce)))])
        }
        guard var legacy = p.legacy else { throw internalFailure("random without an exchange") }
        legacy.peerRandom = value
        guard try legacy.confirm(value) == legacy.peerConfirm else {
            throw SMPFailure(p.isPasskeyEntry ? .wrongPasskey : .confirmValueFailed, origin: .local, reason: .confirmValueFailed,
                             detail: p.isPasskeyEntry ? "the central's confirm value does not match: the passkeys differ"
                                                      : "the central's confirm value does not match its random value")
        }
        p.key = try legacy.shortTermKey()
        p.legacy = legacy
        p.stage = .encryption
        return .next([.send(.pairingRandom(SMPPairingRandom(value: legacy.localRandom)))])
    }

    private mutating func dhKeyCheckReceived(_ p: inout Pairing, _ value: UInt128) throws(SMPFailure) -> PairingStep {
        guard var sc = p.sc else { throw internalFailure("DHKey check without an exchange") }
        try sc.deriveKeys()
        guard try sc.peerCheckMatches(value) else {
            throw SMPFailure(.dhKeyCheckFailed, origin: .local, reason: .dhKeyCheckFailed, detail: "the central's DHKey check value does not match")
        }
        let eb = try sc.localCheck()
        p.key = Key128(sc.ltk).masked(toSize: p.features.keySize)
        p.sc = sc
        p.stage = .encryption
        return .next([.send(.pairingDHKeyCheck(SMPPairingDHKeyCheck(value: eb)))])
    }

    /// Key distribution done on the central's side: make the bond.
    private func completed(_ p: Pairing) -> PairingStep {
        let f = p.features
        var bond: Bond?
        if f.bonding, let key = f.secureConnections ? p.key : p.distributed.ltk {
            bond = Bond(peer: p.receiver.identityAddress ?? configuration.peerAddress, ltk: key,
                        ediv: f.secureConnections ? 0 : p.distributed.ediv, rand: f.secureConnections ? 0 : p.distributed.rand,
                        keySize: f.keySize, authenticated: f.method.isAuthenticated, secureConnections: f.secureConnections,
                        peerIRK: p.receiver.irk, peerCSRK: p.receiver.csrk)
        }
        return .done([], SMPOutcome(security: security, method: f.method, bond: bond, usedStoredBond: false))
    }

    // MARK: - Controller events

    private mutating func longTermKeyRequested(ediv: UInt16, rand: UInt64) -> [SMPAction] {
        switch state {
        case .pairing(let p) where p.stage == .encryption:
            // Pairing's key (the SC LTK or the legacy STK) is always requested with EDIV 0 and Rand 0.
            return [.replyLongTermKey(ediv == 0 && rand == 0 ? p.key : nil)]
        case .idle, .encrypting:
            if let bond = configuration.storedBond, bond.ediv == ediv, bond.rand == rand {
                state = .encrypting(bond)
                return [.replyLongTermKey(bond.encryptionKey.ltk)]
            }
            return [.replyLongTermKey(nil)]
        case .pairing:
            return [.replyLongTermKey(nil)]
        }
    }

    private mutating func encryptionOn(keySize: Int?) -> [SMPAction] {
        switch state {
        case .encrypting(let bond):
            state = .idle
            var reached = bond.linkSecurity
            if let keySize { reached.keySize = keySize }
            security = reached
            return [.completed(SMPOutcome(security: reached, method: nil, bond: nil, usedStoredBond: true))]
        case .pairing(var p) where p.stage == .encryption:
            let f = p.features
            security = LinkSecurity(level: f.level, keySize: keySize ?? f.keySize, secureConnections: f.secureConnections)
            var material = KeyMaterial(identity: configuration.localIdentity)
            do throws(SMPFailure) {
                if f.responderKeys.contains(.encryptionKey) {
                    material.ltk = Key128(UInt128(bigEndianBytes: try random.pairingBytes(16)) ?? 0).masked(toSize: f.keySize)
                    let ediv = try random.pairingBytes(2), rand = try random.pairingBytes(8)
                    material.ediv = UInt16(ediv[0]) << 8 | UInt16(ediv[1])
                    material.rand = rand.reduce(0) { $0 << 8 | UInt64($1) }
                }
                if f.responderKeys.contains(.signingKey) {
                    material.csrk = Key128(UInt128(bigEndianBytes: try random.pairingBytes(16)) ?? 0)
                }
            } catch {
                return finish(.failed(error))
            }
            p.distributed = material
            p.receiver = KeyReceiver(keys: f.initiatorKeys)
            p.stage = .keyDistribution
            let sends = material.pdus(for: f.responderKeys).map { SMPAction.send($0) }
            if p.receiver.isComplete {
                guard case .done(let last, let outcome) = completed(p) else { return finish(.next(sends), p) }
                return finish(.done(sends + last, outcome))
            }
            return finish(.next(sends), p)
        default:
            return []
        }
    }

    private mutating func encryptionOff() -> [SMPAction] {
        security = .none
        switch state {
        case .encrypting:
            state = .idle
            return [.failed(SMPFailure(.encryptionLost, origin: .controller, detail: "the controller reports encryption off"))]
        case .pairing(let p) where p.stage == .keyDistribution:
            return finish(.failed(SMPFailure(.encryptionLost, origin: .controller, detail: "encryption went off during key distribution")))
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

    private mutating func finish(_ step: PairingStep, _ p: Pairing? = nil) -> [SMPAction] {
        switch step {
        case .next:
            if let p { state = .pairing(p) }
        case .done(_, let outcome):
            state = .idle
            security = outcome.security
            if let bond = outcome.bond { configuration.storedBond = bond }
        case .failed:
            state = .idle
        }
        return step.actions(timer: &timer)
    }
}

extension SMPPeripheral: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The procedure and the link's security; never a key, a nonce or a passkey.
    public var description: String { "SMPPeripheral(\(stateName), \(security))" }
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
