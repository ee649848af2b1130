import BLESecurity

/// The credentials of a protocomm security scheme. Secret: printing them shows none.
public enum SecurityCredentials: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    /// Security 0: no key, no proof.
    case none
    /// Security 1: the proof of possession (empty: a device provisioned without one).
    case proofOfPossession([UInt8])
    /// Security 2: the SRP6a username and password (ESP-IDF calls the password the PoP too).
    case srp(username: [UInt8], password: [UInt8])

    /// The scheme these credentials are for (0, 1, 2).
    public var scheme: Int {
        switch self {
        case .none: 0
        case .proofOfPossession: 1
        case .srp: 2
        }
    }

    public var description: String { "security \(scheme) (credentials hidden)" }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// The host's side of protocomm's session handshake on `prov-session`, as a value (ESP-IDF's
/// protocomm security0.c, security1.c, security2.c; esp_prov's Security0/1/2).
///
/// `start()` gives the first request; each answer goes to `handle(response:)`, which gives the next
/// request or the session's cipher. A request the device refuses (an ATT error, or the link closed in
/// answer) goes to `refused(_:)`: at the proof step that is how a device says the proof of possession is
/// wrong, so it becomes `security_failed`.
///
/// | scheme | request 1 | answer 1 | request 2 | answer 2 |
/// |---|---|---|---|---|
/// | 0 | S0SessionCmd | S0SessionResp | — | — |
/// | 1 | SessionCmd0(client X25519 key) | SessionResp0(device key, 16-byte random) | SessionCmd1(device key under AES-CTR) | SessionResp1(client key under AES-CTR) |
/// | 2 | S2SessionCmd0(username, A) | S2SessionResp0(B, salt) | S2SessionCmd1(M) | S2SessionResp1(H_AMK, 12-byte nonce) |
public struct SecurityHandshake: Sendable, CustomStringConvertible, CustomReflectable {
    /// What the host does next.
    public enum Step: Sendable, Equatable {
        /// Write these bytes to `prov-session` and read its answer.
        case send([UInt8])
        /// The session is secured: encrypt every later request with this.
        case established(ProtocommCipher)
    }

    private enum Phase: Sendable {
        case idle
        case sec0Sent
        case sec1Sent0(privateKey: [UInt8], publicKey: [UInt8])
        case sec1Sent1(publicKey: [UInt8], cipher: ProtocommCipher)
        case sec2Sent0(SRP6aClient)
        case sec2Sent1(SRP6aKeys)
        case done
    }

    private let credentials: SecurityCredentials
    private let patchVersion: Int
    private var phase = Phase.idle
    /// Fixed ephemeral secrets for known-answer tests: security 1's X25519 private key, security 2's a.
    private let ephemeral: [UInt8]?

    /// A handshake for `credentials`; `patchVersion` is proto-ver's `sec_patch_ver`.
    public init(credentials: SecurityCredentials, patchVersion: Int = 0) {
        self.init(credentials: credentials, patchVersion: patchVersion, ephemeral: nil)
    }

    init(credentials: SecurityCredentials, patchVersion: Int, ephemeral: [UInt8]?) {
        self.credentials = credentials
        self.patchVersion = patchVersion
        self.ephemeral = ephemeral
    }

    /// True while the answer awaited is the one to the host's proof (security 1 and 2's second request).
    public var awaitingProofAnswer: Bool {
        switch phase {
        case .sec1Sent1, .sec2Sent1: true
        default: false
        }
    }

    /// The first request.
    public mutating func start() throws(ProtocommError) -> [UInt8] {
        switch credentials {
        case .none:
            phase = .sec0Sent
            return SessionData(secVer: .scheme0, proto: .sec0(Sec0Payload(msg: 0, payload: .sc(EmptyMessage())))).encoded
        case .proofOfPossession:
            let privateKey = try crypto { () throws(CryptoError) in
                if let ephemeral { return ephemeral }
                return try ESPCrypto.randomBytes(32)
            }
            let publicKey = try crypto { () throws(CryptoError) in try ESPCrypto.x25519PublicKey(privateKey: privateKey) }
            phase = .sec1Sent0(privateKey: privateKey, publicKey: publicKey)
            return SessionData(secVer: .scheme1, proto: .sec1(Sec1Payload(msg: 0, payload: .sc0(Sec1Command0(clientPubkey: publicKey))))).encoded
        case .srp(let username, let password):
            let client = try crypto { () throws(CryptoError) in
                if let ephemeral { return try SRP6aClient(username: username, password: password, ephemeral: ephemeral) }
                return try SRP6aClient(username: username, password: password)
            }
            phase = .sec2Sent0(client)
            return SessionData(secVer: .scheme2, proto: .sec2(Sec2Payload(msg: 0, payload: .sc0(Sec2Command0(
                clientUsername: username, clientPubkey: client.publicKey))))).encoded
        }
    }

    /// The device's answer to the last request.
    public mutating func handle(response: [UInt8]) throws(ProtocommError) -> Step {
        let data: SessionData
        do {
            data = try SessionData(protobuf: response)
        } catch {
            throw ProtocommError(.protocolError, "prov-session answered bytes that are not a SessionData (\(error))")
        }
        guard data.secVer.rawValue == Int32(credentials.scheme) else {
            throw ProtocommError(.securityFailed, "the device answered for security \(data.secVer.rawValue), not \(credentials.scheme)")
        }
        switch (phase, data.proto) {
        case (.sec0Sent, .sec0(let p)):
            guard case .sr(let r) = p.payload else { throw unexpected("S0SessionResp") }
            guard r.status == .success else { throw refusedStatus(r.status) }
            phase = .done
            return .established(.plaintext)

        case (.sec1Sent0(let privateKey, let publicKey), .sec1(let p)):
            guard case .sr0(let r) = p.payload else { throw unexpected("SessionResp0") }
            guard r.status == .success else { throw refusedStatus(r.status) }
            guard r.devicePubkey.count == 32, r.deviceRandom.count == 16 else {
                throw ProtocommError(.protocolError, "SessionResp0 has a \(r.devicePubkey.count)-byte key and a \(r.deviceRandom.count)-byte random (32 and 16 expected)")
            }
            guard case .proofOfPossession(let pop) = credentials else { throw unexpected("security 1") }
            var key = try crypto { () throws(CryptoError) in try ESPCrypto.x25519SharedSecret(privateKey: privateKey, peerPublicKey: r.devicePubkey) }
            if !pop.isEmpty {
                let digest = try crypto { () throws(CryptoError) in try ESPCrypto.sha256(pop) }
                for i in 0..<32 { key[i] ^= digest[i] }
            }
            var cipher = ProtocommCipher.ctr(key: key, iv: r.deviceRandom)
            LibCrypto.cleanse(&key)
            let verify = try cipher.encrypt(r.devicePubkey)
            phase = .sec1Sent1(publicKey: publicKey, cipher: cipher)
            return .send(SessionData(secVer: .scheme1, proto: .sec1(Sec1Payload(msg: 2, payload: .sc1(Sec1Command1(clientVerifyData: verify))))).encoded)

        case (.sec1Sent1(let publicKey, var cipher), .sec1(let p)):
            guard case .sr1(let r) = p.payload else { throw unexpected("SessionResp1") }
            guard r.status == .success else { throw ProtocommError(.securityFailed, "the device refused the proof of possession (status \(r.status))") }
            guard r.deviceVerifyData.count == 32, try cipher.decrypt(r.deviceVerifyData) == publicKey else {
                throw ProtocommError(.securityFailed, "the device did not prove it holds the same proof of possession")
            }
            phase = .done
            return .established(cipher)

        case (.sec2Sent0(let client), .sec2(let p)):
            guard case .sr0(let r) = p.payload else { throw unexpected("S2SessionResp0") }
            guard r.status == .success else { throw refusedStatus(r.status) }
            guard !r.devicePubkey.isEmpty, r.devicePubkey.count <= SRP6a.length, !r.deviceSalt.isEmpty, r.deviceSalt.count <= 64 else {
                throw ProtocommError(.protocolError, "S2SessionResp0 has a \(r.devicePubkey.count)-byte B and a \(r.deviceSalt.count)-byte salt")
            }
            let keys: SRP6aKeys
            do {
                keys = try client.keys(salt: r.deviceSalt, serverPublicKey: r.devicePubkey)
            } catch where error.kind == .invalidPublicKey {
                throw ProtocommError(.securityFailed, "the device's SRP public value is unsafe (\(error.detail))")
            } catch {
                throw .crypto(error)
            }
            phase = .sec2Sent1(keys)
            return .send(SessionData(secVer: .scheme2, proto: .sec2(Sec2Payload(msg: 2, payload: .sc1(Sec2Command1(clientProof: keys.clientProof))))).encoded)

        case (.sec2Sent1(let keys), .sec2(let p)):
            guard case .sr1(let r) = p.payload else { throw unexpected("S2SessionResp1") }
            guard r.status == .success else { throw ProtocommError(.securityFailed, "the device refused the SRP proof (status \(r.status))") }
            guard r.deviceProof == keys.serverProof else {
                throw ProtocommError(.securityFailed, "the device did not prove it holds the verifier for this username and proof of possession")
            }
            guard r.deviceNonce.count == 12 else {
                throw ProtocommError(.protocolError, "S2SessionResp1 has a \(r.deviceNonce.count)-byte nonce (12 expected)")
            }
            phase = .done
            return .established(.gcm(key: Array(keys.sessionKey.prefix(32)), nonce: r.deviceNonce, patchVersion: patchVersion))

        case (.idle, _), (.done, _):
            throw ProtocommError(.protocolError, "an answer on prov-session with no request outstanding")
        default:
            throw unexpected("the scheme's next answer")
        }
    }

    /// The device refused the last request (an ATT error, or it closed the link in answer): at the proof
    /// step a wrong proof of possession (`security_failed`), before it a device that does not speak this
    /// scheme (also `security_failed`: nothing was agreed, nothing can be sent).
    public func refused(_ reason: String) -> ProtocommError {
        if awaitingProofAnswer {
            return ProtocommError(.securityFailed, "the device refused the proof of possession (\(reason))")
        }
        return ProtocommError(.securityFailed, "the device refused a security \(credentials.scheme) session (\(reason))")
    }

    private func unexpected(_ wanted: String) -> ProtocommError {
        ProtocommError(.protocolError, "prov-session answered something other than \(wanted)")
    }

    private func refusedStatus(_ status: ProtocommStatus) -> ProtocommError {
        ProtocommError(.securityFailed, "the device refused the session (status \(status))")
    }

    private func crypto<T>(_ body: () throws(CryptoError) -> T) throws(ProtocommError) -> T {
        do {
            return try body()
        } catch {
            throw .crypto(error)
        }
    }

    public var description: String { "SecurityHandshake(\(credentials))" }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
