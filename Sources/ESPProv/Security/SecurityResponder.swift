import BLESecurity

/// The device's side of protocomm's session handshake (ESP-IDF's security0.c, security1.c,
/// security2.c), for the simulator's ESP model and for tests that pit the host against a device.
///
/// A request the device refuses throws: the transport answers it with an ATT error, as ESP-IDF's NimBLE
/// transport does (its Bluedroid transport closes the link instead). A Command0 restarts the session.
package struct SecurityResponder: Sendable {
    /// What the device was provisioned with: never a password, only the SRP salt and verifier.
    package enum Parameters: Sendable {
        case none
        case proofOfPossession([UInt8])
        case srp(salt: [UInt8], verifier: [UInt8])

        var scheme: Int32 {
            switch self {
            case .none: 0
            case .proofOfPossession: 1
            case .srp: 2
            }
        }
    }

    private enum Phase: Sendable {
        case idle
        case sec1(devicePublicKey: [UInt8], clientPublicKey: [UInt8], cipher: ProtocommCipher)
        case sec2(server: SRP6aServer, username: [UInt8], clientPublicKey: [UInt8])
    }

    private let parameters: Parameters
    private let patchVersion: Int
    private var phase = Phase.idle
    private let fixed: (ephemeral: [UInt8], random: [UInt8])?

    package init(parameters: Parameters, patchVersion: Int = 1) {
        self.parameters = parameters
        self.patchVersion = patchVersion
        fixed = nil
    }

    /// With fixed randomness (known-answer tests): the X25519 private key or SRP b, and the security 1
    /// random or the security 2 nonce's first 8 bytes.
    package init(parameters: Parameters, patchVersion: Int, ephemeral: [UInt8], random: [UInt8]) {
        self.parameters = parameters
        self.patchVersion = patchVersion
        fixed = (ephemeral, random)
    }

    /// Answers one `prov-session` request; `established` is the session's cipher once the handshake is done.
    package mutating func handle(request: [UInt8]) throws(ProtocommError) -> (response: [UInt8], established: ProtocommCipher?) {
        guard let data = try? SessionData(protobuf: request) else {
            throw ProtocommError(.protocolError, "not a SessionData")
        }
        guard data.secVer.rawValue == parameters.scheme else {
            throw ProtocommError(.securityFailed, "security \(data.secVer.rawValue) asked of a security \(parameters.scheme) device")
        }
        do {
            return try answer(data)
        } catch let e as ProtocommError {
            phase = .idle
            throw e
        } catch let e as CryptoError {
            phase = .idle
            throw .crypto(e)
        } catch {
            phase = .idle
            throw ProtocommError(.protocolError, "\(error)")
        }
    }

    private func random(_ count: Int) throws -> [UInt8] {
        if let fixed { return Array(fixed.random.prefix(count)) }
        return try ESPCrypto.randomBytes(count)
    }

    private mutating func answer(_ data: SessionData) throws -> (response: [UInt8], established: ProtocommCipher?) {
        switch (parameters, data.proto) {
        case (.none, .sec0(let p)):
            guard case .sc = p.payload else { throw ProtocommError(.protocolError, "not S0SessionCmd") }
            return (SessionData(secVer: .scheme0, proto: .sec0(Sec0Payload(msg: 1, payload: .sr(StatusMessage(status: .success))))).encoded, .plaintext)

        case (.proofOfPossession(let pop), .sec1(let p)):
            switch (p.payload, phase) {
            case (.sc0(let c), _):
                guard c.clientPubkey.count == 32 else { throw ProtocommError(.protocolError, "a client key of \(c.clientPubkey.count) bytes") }
                let privateKey = try fixed?.ephemeral ?? ESPCrypto.randomBytes(32)
                let publicKey = try ESPCrypto.x25519PublicKey(privateKey: privateKey)
                var key = try ESPCrypto.x25519SharedSecret(privateKey: privateKey, peerPublicKey: c.clientPubkey)
                if !pop.isEmpty {
                    let digest = try ESPCrypto.sha256(pop)
                    for i in 0..<32 { key[i] ^= digest[i] }
                }
                let iv = try random(16)
                phase = .sec1(devicePublicKey: publicKey, clientPublicKey: c.clientPubkey, cipher: .ctr(key: key, iv: iv))
                return (SessionData(secVer: .scheme1, proto: .sec1(Sec1Payload(msg: 1, payload: .sr0(Sec1Response0(
                    status: .success, devicePubkey: publicKey, deviceRandom: iv))))).encoded, nil)
            case (.sc1(let c), .sec1(let devicePublicKey, let clientPublicKey, var cipher)):
                guard c.clientVerifyData.count == 32, try cipher.decrypt(c.clientVerifyData) == devicePublicKey else {
                    throw ProtocommError(.securityFailed, "the client's verifier does not match: a wrong proof of possession")
                }
                let verify = try cipher.encrypt(clientPublicKey)
                phase = .idle
                return (SessionData(secVer: .scheme1, proto: .sec1(Sec1Payload(msg: 3, payload: .sr1(Sec1Response1(
                    status: .success, deviceVerifyData: verify))))).encoded, cipher)
            default:
                throw ProtocommError(.protocolError, "a security 1 message out of order")
            }

        case (.srp(let salt, let verifier), .sec2(let p)):
            switch (p.payload, phase) {
            case (.sc0(let c), _):
                guard c.clientPubkey.count == SRP6a.length, !c.clientUsername.isEmpty else {
                    throw ProtocommError(.protocolError, "an A of \(c.clientPubkey.count) bytes or no username")
                }
                let server = try SRP6aServer(salt: salt, verifier: verifier, ephemeral: fixed?.ephemeral)
                phase = .sec2(server: server, username: c.clientUsername, clientPublicKey: c.clientPubkey)
                return (SessionData(secVer: .scheme2, proto: .sec2(Sec2Payload(msg: 1, payload: .sr0(Sec2Response0(
                    status: .success, devicePubkey: server.publicKey, deviceSalt: salt))))).encoded, nil)
            case (.sc1(let c), .sec2(let server, let username, let clientPublicKey)):
                let keys = try server.keys(username: username, clientPublicKey: clientPublicKey)
                guard c.clientProof == keys.clientProof else {
                    throw ProtocommError(.securityFailed, "the client's proof does not match: a wrong username or proof of possession")
                }
                let nonce = try random(8) + [0, 0, 0, 1]
                phase = .idle
                return (SessionData(secVer: .scheme2, proto: .sec2(Sec2Payload(msg: 3, payload: .sr1(Sec2Response1(
                    status: .success, deviceProof: keys.serverProof, deviceNonce: nonce))))).encoded,
                        .gcm(key: Array(keys.sessionKey.prefix(32)), nonce: nonce, patchVersion: patchVersion))
            default:
                throw ProtocommError(.protocolError, "a security 2 message out of order")
            }

        default:
            throw ProtocommError(.protocolError, "a session message for another scheme")
        }
    }
}
