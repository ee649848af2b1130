import BLE

/// The values of one LE Secure Connections pairing that both roles compute (Vol 3 Part H 2.3.5.6):
/// the DHKey, confirm values (f4), MacKey and LTK (f5) and the DHKey checks (f6).
///
/// Role-aware: "local" and "peer" map to initiator (a) and responder (b) by `isInitiator`, so the
/// central and the peripheral share every formula.
struct SecureConnectionsExchange: Sendable {
    let isInitiator: Bool
    let features: PairingFeatures
    let keyPair: P256KeyPair
    let initiatorAddress: BluetoothAddress
    let responderAddress: BluetoothAddress
    private(set) var peerKey: P256PublicKey?
    private var dhKey: DHKey?
    /// ra and rb of f6: the passkey in Passkey Entry, the OOB randoms in OOB, 0 otherwise.
    var ra: UInt128 = 0
    var rb: UInt128 = 0
    /// Passkey Entry: the passkey and the round (0...19) whose bit is being committed to.
    var passkey: UInt32 = 0
    var round = 0
    var localNonce: UInt128 = 0
    var peerNonce: UInt128 = 0
    var peerConfirm: UInt128 = 0
    private(set) var macKey: UInt128 = 0
    private(set) var ltk: UInt128 = 0

    init(isInitiator: Bool, features: PairingFeatures, keyPair: P256KeyPair,
         initiatorAddress: BluetoothAddress, responderAddress: BluetoothAddress) {
        self.isInitiator = isInitiator
        self.features = features
        self.keyPair = keyPair
        self.initiatorAddress = initiatorAddress
        self.responderAddress = responderAddress
    }

    /// Takes the peer's public key and computes the DHKey. Refuses our own key sent back to us (the
    /// reflection attack on Passkey Entry) and any key libcrypto refuses (off the curve, infinity, ≥ p).
    mutating func acceptPeerKey(_ key: P256PublicKey) throws(SMPFailure) {
        if key.x == keyPair.publicKey.x {
            throw SMPFailure(.invalidPublicKey, origin: .local, reason: .invalidParameters,
                             detail: "the peer sent back our own public key")
        }
        do {
            dhKey = try keyPair.sharedSecret(with: key)
        } catch {
            let kind: SMPFailure.Kind = error.kind == .invalidPublicKey ? .invalidPublicKey : .unspecified
            throw SMPFailure(kind, origin: .local, reason: kind == .invalidPublicKey ? .invalidParameters : .unspecifiedReason,
                             detail: error.description)
        }
        peerKey = key
    }

    /// f4(PK_local, PK_peer, N_local, z): this side's confirm value.
    func localConfirm(z: UInt8) throws(SMPFailure) -> UInt128 {
        try crypto { () throws(CryptoError) in
            try SMPCrypto.f4(u: keyPair.publicKey.x, v: peerKey?.x ?? [], x: localNonce, z: z)
        }
    }

    /// True when the peer's confirm equals f4(PK_peer, PK_local, N_peer, z).
    func peerConfirmMatches(z: UInt8) throws(SMPFailure) -> Bool {
        let expected = try crypto { () throws(CryptoError) in
            try SMPCrypto.f4(u: peerKey?.x ?? [], v: keyPair.publicKey.x, x: peerNonce, z: z)
        }
        return expected == peerConfirm
    }

    /// Passkey Entry: r_i = 0x80 | bit `round` of the passkey (2.3.5.6.3).
    var passkeyBit: UInt8 { 0x80 | UInt8((passkey >> UInt32(round)) & 1) }

    /// f5(DHKey, Na, Nb, A1, A2): MacKey and the LTK.
    mutating func deriveKeys() throws(SMPFailure) {
        guard let dhKey else { throw SMPFailure(.unspecified, origin: .local, reason: .unspecifiedReason, detail: "no DHKey yet") }
        let (na, nb) = nonces
        let keys = try crypto { () throws(CryptoError) in
            try SMPCrypto.f5(w: dhKey, n1: na, n2: nb, a1: SMPCrypto.addressValue(initiatorAddress), a2: SMPCrypto.addressValue(responderAddress))
        }
        macKey = keys.macKey
        ltk = keys.ltk
    }

    /// This side's DHKey check (Ea for the initiator, Eb for the responder).
    func localCheck() throws(SMPFailure) -> UInt128 { try check(ofInitiator: isInitiator) }

    /// True when the peer's DHKey check is the one expected.
    func peerCheckMatches(_ value: UInt128) throws(SMPFailure) -> Bool { try check(ofInitiator: !isInitiator) == value }

    /// Ea = f6(MacKey, Na, Nb, rb, IOcapA, A1, A2); Eb = f6(MacKey, Nb, Na, ra, IOcapB, A2, A1).
    private func check(ofInitiator initiator: Bool) throws(SMPFailure) -> UInt128 {
        let (na, nb) = nonces
        let a1 = SMPCrypto.addressValue(initiatorAddress), a2 = SMPCrypto.addressValue(responderAddress)
        return try crypto { () throws(CryptoError) in
            initiator
                ? try SMPCrypto.f6(w: macKey, n1: na, n2: nb, r: rb, ioCap: features.request.ioCapValue, a1: a1, a2: a2)
                : try SMPCrypto.f6(w: macKey, n1: nb, n2: na, r: ra, ioCap: features.response.ioCapValue, a1: a2, a2: a1)
        }
    }

    private var nonces: (UInt128, UInt128) { isInitiator ? (localNonce, peerNonce) : (peerNonce, localNonce) }
}

/// The values of one LE legacy pairing (Vol 3 Part H 2.3.5.5): confirm values (c1) and the STK (s1).
struct LegacyExchange: Sendable {
    let isInitiator: Bool
    let features: PairingFeatures
    let initiatorAddress: BluetoothAddress
    let responderAddress: BluetoothAddress
    /// TK: 0 for Just Works, the passkey for Passkey Entry.
    let tk: UInt128
    var localRandom: UInt128 = 0
    var peerRandom: UInt128 = 0
    var peerConfirm: UInt128 = 0

    init(isInitiator: Bool, features: PairingFeatures, initiatorAddress: BluetoothAddress, responderAddress: BluetoothAddress, tk: UInt128) {
        self.isInitiator = isInitiator
        self.features = features
        self.initiatorAddress = initiatorAddress
        self.responderAddress = responderAddress
        self.tk = tk
    }

    /// c1(TK, random, preq, pres, iat, ia, rat, ra).
    func confirm(_ random: UInt128) throws(SMPFailure) -> UInt128 {
        try crypto { () throws(CryptoError) in
            try SMPCrypto.c1(k: tk, r: random, request: features.request, response: features.response,
                             initiator: initiatorAddress, responder: responderAddress)
        }
    }

    /// STK = s1(TK, Srand, Mrand), shortened to the negotiated key size.
    func shortTermKey() throws(SMPFailure) -> Key128 {
        let (mrand, srand) = isInitiator ? (localRandom, peerRandom) : (peerRandom, localRandom)
        let stk = try crypto { () throws(CryptoError) in try SMPCrypto.s1(k: tk, r1: srand, r2: mrand) }
        return Key128(stk).masked(toSize: features.keySize)
    }
}

/// Runs a toolbox computation; a libcrypto failure ends the pairing with "unspecified reason".
func crypto<T>(_ body: () throws(CryptoError) -> T) throws(SMPFailure) -> T {
    do {
        return try body()
    } catch {
        throw SMPFailure(error.kind == .invalidPublicKey ? .invalidPublicKey : .unspecified, origin: .local,
                         reason: error.kind == .invalidPublicKey ? .invalidParameters : .unspecifiedReason,
                         detail: error.description)
    }
}
