import BLE
import BLESecurity
import Testing
@testable import ESPProv

/// Known answers for protocomm security 1 and 2.
///
/// Sources:
/// - SRP salt and verifier for `wifiprov` / `abcd1234`: ESP-IDF's own test vector
///   (components/protocomm/test_apps/main/test_srp.c, `sec2_salt`, `sec2_verifier`).
/// - Everything else: computed once with Espressif's Python client, esp_prov (tools/esp_prov/security/
///   security1.py, security2.py, srp6a.py at ESP-IDF 6b503d0db5d^, the last commit that had it), with
///   cryptography 50.0.2 and protobuf 7.36.2 in Tests/Fixtures' venv, its random draws replaced by the
///   fixed values below (client X25519 key 40..5f, SRP a = 0x90 11 12 .. 2f). The device's answers
///   (device X25519 key 80..9f, random c0..cf; SRP b = 50..6f, B = (k·v + g^b) mod N, nonce e0..e7 ‖ 00000001)
///   were built in the same script from ESP-IDF's security1.c and security2.c rules, and each checked by
///   esp_prov's own verification of them.
@Suite struct SecurityKnownAnswerTests {
    private func bytes(_ hex: String, sourceLocation: SourceLocation = #_sourceLocation) -> [UInt8] {
        guard let b = [UInt8](hex: hex) else {
            Issue.record("bad hex", sourceLocation: sourceLocation)
            return []
        }
        return b
    }

    let s1ClientPrivate = "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
    let s1ClientPublic = "79a631eede1bf9c98f12032cdeadd0e7a079398fc786b88cc846ec89af85a51a"
    let s1Request0 = "10015a25a201220a2079a631eede1bf9c98f12032cdeadd0e7a079398fc786b88cc846ec89af85a51a"
    let s1DevicePrivate = "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
    let s1DevicePublic = "493e82fc74464a59268817623d2053c5eb8e2cc4a988b4fee179ec6b010d531d"
    let s1DeviceRandom = "c0c1c2c3c4c5c6c7c8c9cacbcccdcecf"
    let s1Response0 = """
        10015a390801aa01341220493e82fc74464a59268817623d2053c5eb8e2cc4a988b4fee179ec6b010d531d1a10c0c1c2\
        c3c4c5c6c7c8c9cacbcccdcecf
        """
    let s1Shared = "dcd77236231add34de0561c47859a65d304f2a8550e8df98df053cf5dfabea0b"
    let s1Key = "3519952c9a2820dcbd36ecccc6144f82d3d18acced476cda1160a2309aa083a5"
    let s1Request1 = "10015a270802b2012212206d5ebc9e8d53f85a21a3552cdfd93c6fb9e003141584f5e1356aae506993646c"
    let s1Response1 = "10015a270803ba01221a201c01ae3f8483fe8097b39be1c4a9a0d9413e8d37ce51ab345ec176dd1c2a3492"
    let s1EncryptedRequest = "6ff2"
    let s1EncryptedAnswer = "f7faf50e342c"
    /// ESP-IDF test_srp.c `sec2_salt`.
    let s2Salt = "036ee0c7bcb9eda84c9eac97d93decf4"
    /// ESP-IDF test_srp.c `sec2_verifier` (esp_prov computes the same).
    let s2Verifier = """
        7c7c85476508946dd636af37d7e8914378cffd616c59d2f83908127238de9e24a470261cdfa903c2b270e7b13224da11\
        1d9718dc607208cc9ac90c4827e2ae89aa1625b804d21a9b3a8f37f6e43a712ee127866eadce28ff5446601fb99687dc\
        5740a7d46cc97754dc1682f0ed356ac470ad3d90b5819470d7bc65b2d518e02ec3a5f968dd647bb8b73c9cfc00d8717e\
        b79a7cb1b7c2c318342932433e0099e98294e3d82ab09629b7df0e5f08334076529132009f972c896c391ec828054417\
        3f68028a9f4461d1f5a17e5a70d2c72381cb3868e42c20bc40577617bd08b896bc26eb32466935058c1570d91be9becc\
        a938a667f0ad5013197264bf52c234e21b11797472bd345bb1e2fd6673fe716474d04ebc51241940870e9240e621e72d\
        4e37762f2ee268c789e8321342068484534ab30c1b4c8d1c519719abae77ffdbecf0109534336bcb3e840fb9d85fb8a0\
        b855533e70f718f5ce7b4ebf27cecea8b3be40c5c532293e71649ede8cf675a1e6f653c831a878de5040f762de36b2ba
        """
    let s2A = "901112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f"
    let s2BigA = """
        fab3ff7e58b03b56bff4e2fb80f018f4773043e15498a42f7fa7a8277a8f7ca8e82a49108fe6694ff959e29b2b6d43c2\
        d38598adb2acb1072cee7adab0e679c2a26b4bd31c79f60bf4585f6961271603a7bdf767aefc181517cbbff97c6bbb58\
        7dfcd251c043f1e1836d9cd5c497d8f41afdffa388dbd1df18bcee14e1ec24d400587040fef9396001c0ed7fa3eb02a9\
        df99f7c37c28fe8870021efce5a3c9b3110c3afcbbc457f84bac5a4ea1499cac697c3ce596cfe60ca434d1f287889e55\
        bacc20ce7a4815defb87a997653df405395e946357e13f40a6f70af903d6af6a75e4dea4da9c20cfc3d86ac258bed7f2\
        0261e05e5f95d19046ab076a756c314c70823092e955acdd9a1672930ec9d192b872785c427a7a65b9ece4f4a1e842ac\
        e04c0096d6791a0f85f6097944ef9dd1ed4baf821cfccb557844187086d205c09334187be6884b58206728643c48cf09\
        9fa9c901bfa3a1a6f315e4576d8b96ab1a8ec20760ce84b10f8638fb507201ab5c2dbb5a4c7709006f6a3606e6c2e077
        """
    let s2Request0 = """
        1002629103a2018d030a087769666970726f76128003fab3ff7e58b03b56bff4e2fb80f018f4773043e15498a42f7fa7\
        a8277a8f7ca8e82a49108fe6694ff959e29b2b6d43c2d38598adb2acb1072cee7adab0e679c2a26b4bd31c79f60bf458\
        5f6961271603a7bdf767aefc181517cbbff97c6bbb587dfcd251c043f1e1836d9cd5c497d8f41afdffa388dbd1df18bc\
        ee14e1ec24d400587040fef9396001c0ed7fa3eb02a9df99f7c37c28fe8870021efce5a3c9b3110c3afcbbc457f84bac\
        5a4ea1499cac697c3ce596cfe60ca434d1f287889e55bacc20ce7a4815defb87a997653df405395e946357e13f40a6f7\
        0af903d6af6a75e4dea4da9c20cfc3d86ac258bed7f20261e05e5f95d19046ab076a756c314c70823092e955acdd9a16\
        72930ec9d192b872785c427a7a65b9ece4f4a1e842ace04c0096d6791a0f85f6097944ef9dd1ed4baf821cfccb557844\
        187086d205c09334187be6884b58206728643c48cf099fa9c901bfa3a1a6f315e4576d8b96ab1a8ec20760ce84b10f86\
        38fb507201ab5c2dbb5a4c7709006f6a3606e6c2e077
        """
    let s2K = """
        a9c2e2559bf0ebb53f0cbbf62282906bede7f2182f00678211fbd5bde5b285033a4993503b87397f9be5ec02080fedbc\
        0835587ad039060879b8621e8c3659e0
        """
    let s2B = "505152535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f"
    let s2BigB = """
        d4c95711512e6cdc19024d6cb9a9210677f2e6c3a98af761715c5374548d1554304b6c2041cae86e092fc2127695cb30\
        d6158d1552fe4c1704c0ffb7b0b0636325ca711806088ff6e0243468cceb7f3794a9672660fc332fe9a221714ddb4fec\
        f0e04a532efb8f7c232b6ec358f75d3040832631f4b630c853282810f8f59a3d82b34078ad7361a1b84d8ae95d899a8e\
        a2fbf05441d35435ddd247fc979156bdba485c64255675d916c0d40adb9eea04d065bebb290f499f24091e7dd68f0bc2\
        42efebc6e2b28d76bb793f2823258f0523922f14f448780b65c2202af0cd0166c95a3d6a6c7bcb0d2653f701c0de9cce\
        19768c601057ffeab3447d0e61f4073406a99edfbf80e94c9673554e11536baf849e321c6780ba883ba5397e9e271829\
        7e5365ff33f602065d36df8e1ad8582d2e95ea94eb864b627449bebe90053dbb1367176103726fd5c8edc8b8a384850c\
        ff4d598fc80df556a0e072d6b603c1c25c07963cfdd86a2bb6f683715eb011b5d9d5534dc5e33fb66fcfa97bde519bcb
        """
    let s2Response0 = """
        1002629b030801aa019503128003d4c95711512e6cdc19024d6cb9a9210677f2e6c3a98af761715c5374548d1554304b\
        6c2041cae86e092fc2127695cb30d6158d1552fe4c1704c0ffb7b0b0636325ca711806088ff6e0243468cceb7f3794a9\
        672660fc332fe9a221714ddb4fecf0e04a532efb8f7c232b6ec358f75d3040832631f4b630c853282810f8f59a3d82b3\
        4078ad7361a1b84d8ae95d899a8ea2fbf05441d35435ddd247fc979156bdba485c64255675d916c0d40adb9eea04d065\
        bebb290f499f24091e7dd68f0bc242efebc6e2b28d76bb793f2823258f0523922f14f448780b65c2202af0cd0166c95a\
        3d6a6c7bcb0d2653f701c0de9cce19768c601057ffeab3447d0e61f4073406a99edfbf80e94c9673554e11536baf849e\
        321c6780ba883ba5397e9e2718297e5365ff33f602065d36df8e1ad8582d2e95ea94eb864b627449bebe90053dbb1367\
        176103726fd5c8edc8b8a384850cff4d598fc80df556a0e072d6b603c1c25c07963cfdd86a2bb6f683715eb011b5d9d5\
        534dc5e33fb66fcfa97bde519bcb1a10036ee0c7bcb9eda84c9eac97d93decf4
        """
    let s2Request1 = """
        100262470802b201420a403d09a8c0ce7f4ee026600f545f0d61a05f74ced5810a16df9cb09fdd3048a0fa01d46cedb3\
        e474b7abdb8c79015bc70493cf338567e7b9e52bcfdcc67b324a36
        """
    let s2U = """
        3028048716f90209719464d45d69ff174fa79264018d1e90fff7f86b1e4e90afe6d7006d45e87ba7631667717c039908\
        8d01e4ae4fc883633bfe15af7d8685b7
        """
    let s2S = """
        ab706727dd2956f07390786a0998ee47c2f7ba4be36b8122bacad5f145333f8c679c6049dde0743d00f3a93a6ee986a1\
        8ab1d1aedcc51be2e5897c3793fd01ed2c2a65663a3f6b3f8cff1b2b41001a0ee0091ca5a123aaa8a1421a943ffb9402\
        8cb4aa3f7be1878313937a514825eed2f62e444f358d60b1754cd99017d5aaccde572d840f28639463cc145e772b8b72\
        878d735c44b8364a846b33b3f83ad0bc76aa42bdc8f2976c31e3bc87f53b1349b0a7567eb1a17628c630f8dd988149b7\
        ba6112f2082e47534d6472e9b17d16c597937c73ef950a4790bc537efcebe816df6d01968b276cf2b3ae5b113f131281\
        8bc068c5378835fe3a161562f145a1a1c4635b6aca19e052da69901df8cddd88386bd2dfc516ccbd505bfcf225cc8804\
        820b69a4ffd4ccc9639c05c09eeaad490cf67c65fe34c6c93699fb207af6d031e41e13f0fd63095fadca162a35c95bb3\
        227a8c81bfdfbb5912fda3e7dc6efb1194d7f2476cea16f7b826c3ac6b85f4691ceabb50100563ea4f95c5f3ab4941dd
        """
    let s2SessionKey = """
        a9f43884030669018ac9bc21a9f2db6022c0f35d1c102bf7c1c39786631b9b0f88619c090e993c549fa0daa4b77c0f8e\
        cadfbd822593dd68f86280c3bb4b9289
        """
    let s2M = """
        3d09a8c0ce7f4ee026600f545f0d61a05f74ced5810a16df9cb09fdd3048a0fa01d46cedb3e474b7abdb8c79015bc704\
        93cf338567e7b9e52bcfdcc67b324a36
        """
    let s2HAMK = """
        303d46a4e3ad2c095945481cc191a68710190da4773ba1381371fe512a8c18090c8cbad634444c7bb4e532522a77b5c5\
        ecdade722a3773daf4b1ff4c694fc15c
        """
    let s2Response1 = """
        100262550803ba01501240303d46a4e3ad2c095945481cc191a68710190da4773ba1381371fe512a8c18090c8cbad634\
        444c7bb4e532522a77b5c5ecdade722a3773daf4b1ff4c694fc15c1a0ce0e1e2e3e4e5e6e700000001
        """
    let s2Nonce = "e0e1e2e3e4e5e6e700000001"
    let s2EncryptedRequest = "81b69e704467cbd43db0c8d5b1fbf264a4b4"
    let s2EncryptedAnswer = "8a2c855314a92d2cf1476818d8695d5b9a2aef49f884"
    /// WiFiConfigPayload(cmd_get_status) and its answer (sta_state Connecting): what the KATs encrypt.
    let plainRequest = "5200"
    let plainAnswer = "08015a021001"
    let pop = Array("abcd1234".utf8)
    let username = Array("wifiprov".utf8)

    // MARK: - Security 1

    @Test func x25519KeysAndTheSharedSecretMatch() throws {
        #expect(try ESPCrypto.x25519PublicKey(privateKey: bytes(s1ClientPrivate)).hexString == s1ClientPublic)
        #expect(try ESPCrypto.x25519PublicKey(privateKey: bytes(s1DevicePrivate)).hexString == s1DevicePublic)
        #expect(try ESPCrypto.x25519SharedSecret(privateKey: bytes(s1ClientPrivate), peerPublicKey: bytes(s1DevicePublic)).hexString == s1Shared)
        #expect(try ESPCrypto.x25519SharedSecret(privateKey: bytes(s1DevicePrivate), peerPublicKey: bytes(s1ClientPublic)).hexString == s1Shared)
    }

    @Test func theProofOfPossessionIsHashedIntoTheKey() throws {
        let digest = try ESPCrypto.sha256(pop)
        #expect(zip(bytes(s1Shared), digest).map { $0 ^ $1 }.hexString == s1Key)
    }

    @Test func security1HandshakeMatchesEspProvByteForByte() throws {
        var host = SecurityHandshake(credentials: .proofOfPossession(pop), patchVersion: 0, ephemeral: bytes(s1ClientPrivate))
        #expect(try host.start().hexString == s1Request0)
        guard case .send(let request1) = try host.handle(response: bytes(s1Response0)) else { Issue.record("no request 1"); return }
        #expect(request1.hexString == s1Request1)
        #expect(host.awaitingProofAnswer)
        guard case .established(var cipher) = try host.handle(response: bytes(s1Response1)) else { Issue.record("not established"); return }
        // The keystream goes on from byte 64 for both directions.
        #expect(try cipher.encrypt(bytes(plainRequest)).hexString == s1EncryptedRequest)
        #expect(try cipher.decrypt(bytes(s1EncryptedAnswer)).hexString == plainAnswer)
    }

    @Test func security1DeviceAnswersAsEspIdfDoes() throws {
        var device = SecurityResponder(parameters: .proofOfPossession(pop), patchVersion: 0,
                                       ephemeral: bytes(s1DevicePrivate), random: bytes(s1DeviceRandom))
        let first = try device.handle(request: bytes(s1Request0))
        #expect(first.response.hexString == s1Response0)
        #expect(first.established == nil)
        let second = try device.handle(request: bytes(s1Request1))
        #expect(second.response.hexString == s1Response1)
        var cipher = try #require(second.established)
        #expect(try cipher.decrypt(bytes(s1EncryptedRequest)).hexString == plainRequest)
        #expect(try cipher.encrypt(bytes(plainAnswer)).hexString == s1EncryptedAnswer)
    }

    @Test func aesCTRCarriesThePartialBlockAcrossMessages() throws {
        let key = bytes(s1Key), iv = bytes(s1DeviceRandom)
        let whole = try ESPCrypto.aes256CTR(key: key, iv: iv, offset: 0, [UInt8](repeating: 0, count: 100))
        var cipher = ProtocommCipher.ctr(key: key, iv: iv)
        var pieces: [UInt8] = []
        for size in [7, 25, 1, 32, 35] { pieces += try cipher.encrypt([UInt8](repeating: 0, count: size)) }
        #expect(pieces == whole)
        // A counter block whose low bytes are all 0xff carries into the bytes above them (as mbedTLS does).
        let high = [UInt8](repeating: 0xFF, count: 16)
        let block1 = try ESPCrypto.aes256CTR(key: key, iv: high, offset: 16, [UInt8](repeating: 0, count: 16))
        let zero = try ESPCrypto.aes256CTR(key: key, iv: [UInt8](repeating: 0, count: 16), offset: 0, [UInt8](repeating: 0, count: 16))
        #expect(block1 == zero)
    }

    @Test func aWrongProofOfPossessionFailsOnBothSides() throws {
        var host = SecurityHandshake(credentials: .proofOfPossession(Array("wrong-pop".utf8)), patchVersion: 0, ephemeral: bytes(s1ClientPrivate))
        var device = SecurityResponder(parameters: .proofOfPossession(pop), patchVersion: 0,
                                       ephemeral: bytes(s1DevicePrivate), random: bytes(s1DeviceRandom))
        let r0 = try device.handle(request: try host.start())
        guard case .send(let request1) = try host.handle(response: r0.response) else { Issue.record("no request 1"); return }
        #expect(throws: ProtocommError(.securityFailed, "the client's verifier does not match: a wrong proof of possession")) {
            _ = try device.handle(request: request1)
        }
        #expect(host.refused("ATT error 0x04").kind == .securityFailed)
        // A device that answers without knowing the proof of possession is caught by the host.
        var impostor = SecurityHandshake(credentials: .proofOfPossession(pop), patchVersion: 0, ephemeral: bytes(s1ClientPrivate))
        _ = try impostor.start()
        _ = try impostor.handle(response: bytes(s1Response0))
        var forged = try SessionData(protobuf: bytes(s1Response1))
        if case .sec1(var p) = forged.proto, case .sr1(var r) = p.payload {
            r.deviceVerifyData[0] ^= 1
            p.payload = .sr1(r)
            forged.proto = .sec1(p)
        }
        #expect(throws: ProtocommError.self) { _ = try impostor.handle(response: forged.encoded) }
    }

    // MARK: - Security 2

    @Test func theVerifierMatchesEspIdfsTestVector() throws {
        #expect(try SRP6a.verifier(username: username, password: pop, salt: bytes(s2Salt)).hexString == s2Verifier)
    }

    @Test func srpValuesMatchEspProv() throws {
        #expect(try SRP6a.multiplier().hexString == s2K)
        let client = try SRP6aClient(username: username, password: pop, ephemeral: bytes(s2A))
        #expect(client.publicKey.hexString == s2BigA)
        let server = try SRP6aServer(salt: bytes(s2Salt), verifier: bytes(s2Verifier), ephemeral: bytes(s2B))
        #expect(server.publicKey.hexString == s2BigB)
        let keys = try client.keys(salt: bytes(s2Salt), serverPublicKey: bytes(s2BigB))
        #expect(keys.scrambler.hexString == s2U)
        #expect(keys.premasterSecret.hexString == s2S)
        #expect(keys.sessionKey.hexString == s2SessionKey)
        #expect(keys.clientProof.hexString == s2M)
        #expect(keys.serverProof.hexString == s2HAMK)
        // The device reaches the same values from the verifier alone.
        let deviceKeys = try server.keys(username: username, clientPublicKey: bytes(s2BigA))
        #expect(deviceKeys == keys)
    }

    @Test func security2HandshakeMatchesEspProvByteForByte() throws {
        var host = SecurityHandshake(credentials: .srp(username: username, password: pop), patchVersion: 1, ephemeral: bytes(s2A))
        #expect(try host.start().hexString == s2Request0)
        guard case .send(let request1) = try host.handle(response: bytes(s2Response0)) else { Issue.record("no request 1"); return }
        #expect(request1.hexString == s2Request1)
        guard case .established(var cipher) = try host.handle(response: bytes(s2Response1)) else { Issue.record("not established"); return }
        // Patch version 1: the nonce counts 1 for the request, 2 for the answer.
        #expect(try cipher.encrypt(bytes(plainRequest)).hexString == s2EncryptedRequest)
        #expect(try cipher.decrypt(bytes(s2EncryptedAnswer)).hexString == plainAnswer)
    }

    @Test func security2DeviceAnswersAsEspIdfDoes() throws {
        var device = SecurityResponder(parameters: .srp(salt: bytes(s2Salt), verifier: bytes(s2Verifier)), patchVersion: 1,
                                       ephemeral: bytes(s2B), random: bytes(String(s2Nonce.prefix(16))))
        #expect(try device.handle(request: bytes(s2Request0)).response.hexString == s2Response0)
        let second = try device.handle(request: bytes(s2Request1))
        #expect(second.response.hexString == s2Response1)
        var cipher = try #require(second.established)
        #expect(try cipher.decrypt(bytes(s2EncryptedRequest)).hexString == plainRequest)
        #expect(try cipher.encrypt(bytes(plainAnswer)).hexString == s2EncryptedAnswer)
    }

    @Test func aesGCMRefusesAnAlteredMessageAndKeepsItsState() throws {
        let key = Array(bytes(s2SessionKey).prefix(32))
        var cipher = ProtocommCipher.gcm(key: key, nonce: bytes(s2Nonce), patchVersion: 1)
        var altered = bytes(s2EncryptedRequest)
        altered[0] ^= 0x80
        #expect(throws: ProtocommError.self) { _ = try cipher.decrypt(altered) }
        #expect(throws: ProtocommError.self) { _ = try cipher.decrypt([1, 2, 3]) }
        // Nothing moved: the real request still opens with the first nonce.
        #expect(try cipher.decrypt(bytes(s2EncryptedRequest)).hexString == plainRequest)
        // Patch version 0 never moves the nonce.
        var fixed = ProtocommCipher.gcm(key: key, nonce: bytes(s2Nonce), patchVersion: 0)
        let first = try fixed.encrypt([1, 2, 3])
        #expect(try fixed.encrypt([1, 2, 3]) == first)
    }

    @Test func aWrongPasswordOrUsernameFailsTheProof() throws {
        for credentials in [SecurityCredentials.srp(username: username, password: Array("abcd1235".utf8)),
                            .srp(username: Array("wifiprov2".utf8), password: pop)] {
            var host = SecurityHandshake(credentials: credentials)
            var device = SecurityResponder(parameters: .srp(salt: bytes(s2Salt), verifier: bytes(s2Verifier)))
            let r0 = try device.handle(request: try host.start())
            guard case .send(let request1) = try host.handle(response: r0.response) else { Issue.record("no request 1"); continue }
            #expect(throws: ProtocommError.self) { _ = try device.handle(request: request1) }
            #expect(host.refused("ATT error 0x04").kind == .securityFailed)
        }
    }

    @Test func freshSessionsAgreeForEveryScheme() throws {
        let verifier = try SRP6a.verifier(username: username, password: pop, salt: bytes(s2Salt))
        let cases: [(SecurityCredentials, SecurityResponder.Parameters)] = [
            (.none, .none), (.proofOfPossession(pop), .proofOfPossession(pop)), (.proofOfPossession([]), .proofOfPossession([])),
            (.srp(username: username, password: pop), .srp(salt: bytes(s2Salt), verifier: verifier)),
        ]
        for (credentials, parameters) in cases {
            var host = SecurityHandshake(credentials: credentials, patchVersion: 1)
            var device = SecurityResponder(parameters: parameters, patchVersion: 1)
            var request = try host.start()
            var hostCipher: ProtocommCipher?
            var deviceCipher: ProtocommCipher?
            for _ in 0..<3 where hostCipher == nil {
                let answer = try device.handle(request: request)
                if let c = answer.established { deviceCipher = c }
                switch try host.handle(response: answer.response) {
                case .send(let next): request = next
                case .established(let c): hostCipher = c
                }
            }
            guard var h = hostCipher, var d = deviceCipher else { Issue.record("\(credentials) not established"); continue }
            for size in [0, 1, 17, 200] {
                let message = (0..<size).map { UInt8(truncatingIfNeeded: $0 * 7) }
                #expect(try d.decrypt(try h.encrypt(message)) == message)
                #expect(try h.decrypt(try d.encrypt(message)) == message)
            }
        }
    }

    @Test func secretsAreNeverPrinted() throws {
        let client = try SRP6aClient(username: username, password: pop, ephemeral: bytes(s2A))
        let keys = try client.keys(salt: bytes(s2Salt), serverPublicKey: bytes(s2BigB))
        let handshake = SecurityHandshake(credentials: .srp(username: username, password: pop))
        let cipher = ProtocommCipher.gcm(key: Array(bytes(s2SessionKey).prefix(32)), nonce: bytes(s2Nonce), patchVersion: 1)
        let texts = [String(describing: client), String(reflecting: client), String(describing: keys), String(reflecting: keys),
                     String(describing: handshake), String(reflecting: handshake), String(describing: cipher), String(reflecting: cipher),
                     String(describing: SecurityCredentials.proofOfPossession(pop)), String(reflecting: SecurityCredentials.proofOfPossession(pop))]
        for text in texts {
            #expect(!text.contains("abcd1234"), "\(text)")
            #expect(!text.contains(String(s2SessionKey.prefix(16))), "\(text)")
            #expect(!text.contains(pop.hexString), "\(text)")
        }
    }

    @Test func x25519RefusesALowOrderPoint() {
        // The all-zero point has order 1: no shared secret.
        #expect(throws: CryptoError.self) {
            _ = try ESPCrypto.x25519SharedSecret(privateKey: bytes(s1ClientPrivate), peerPublicKey: [UInt8](repeating: 0, count: 32))
        }
    }
}
