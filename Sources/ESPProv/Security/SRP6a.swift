import BLE
import BLESecurity

/// SRP-6a (RFC 5054) as protocomm security 2 uses it: the 3072-bit group of RFC 5054 Appendix A (g = 5),
/// SHA-512 as H, arithmetic on libcrypto's BIGNUM API.
///
/// | value | computed as | bytes hashed |
/// |---|---|---|
/// | k | H(N ‖ PAD(g)) | PAD to 384 bytes |
/// | x | H(s ‖ H(I ‖ ":" ‖ p)) | the salt as the device sends it |
/// | v | g^x mod N | (the verifier the device keeps instead of the password) |
/// | A | g^a mod N, a of 256 bits | sent as exactly 384 bytes |
/// | B | (k·v + g^b) mod N | |
/// | u | H(PAD(A) ‖ PAD(B)) | |
/// | S | client (B − k·v)^(a + u·x) mod N; device (A·v^u)^b mod N | |
/// | K | H(S) | S without leading zeros |
/// | M | H(H(N) xor H(PAD(g)) ‖ H(I) ‖ s ‖ A ‖ B ‖ K) | A, B without leading zeros |
/// | H_AMK | H(A ‖ M ‖ K) | the device's proof |
///
/// The device (ESP-IDF's esp_srp.c) hashes the salt as stored; esp_prov turns it into an integer and back,
/// which drops a leading zero byte. This client hashes the salt as the device sent it. The device also
/// refuses an A that is not exactly 384 bytes, so `a` is drawn again until A has no leading zero byte.
public enum SRP6a {
    /// N of RFC 5054's 3072-bit group (Appendix A), most significant byte first.
    static let modulus: [UInt8] = [UInt8](hex: """
        FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD\
        EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED\
        EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F\
        83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B\
        E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510\
        15728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7\
        ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200C\
        BBE117577A615D6C770988C0BAD946E208E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF
        """) ?? []
    static let generator: [UInt8] = [5]
    /// Bytes of N: every padded value is this long.
    public static let length = 384

    static func pad(_ bytes: [UInt8]) -> [UInt8] {
        bytes.count >= length ? bytes : [UInt8](repeating: 0, count: length - bytes.count) + bytes
    }

    static func stripped(_ bytes: [UInt8]) -> [UInt8] {
        let rest = bytes.drop { $0 == 0 }
        return rest.isEmpty ? [0] : Array(rest)
    }

    /// k = H(N ‖ PAD(g)).
    static func multiplier() throws(CryptoError) -> [UInt8] {
        try ESPCrypto.sha512(modulus, pad(generator))
    }

    /// x = H(s ‖ H(I ‖ ":" ‖ p)).
    static func privateKey(salt: [UInt8], username: [UInt8], password: [UInt8]) throws(CryptoError) -> [UInt8] {
        try ESPCrypto.sha512(salt, try ESPCrypto.sha512(username, [0x3A], password))
    }

    /// The verifier v = g^x mod N a device keeps for `username` and `password` (esp_prov's
    /// `--sec2_gen_cred`, ESP-IDF's esp_srp_gen_salt_verifier), without leading zeros.
    public static func verifier(username: [UInt8], password: [UInt8], salt: [UInt8]) throws(CryptoError) -> [UInt8] {
        let arena = try BigNumberArena("SRP6a verifier")
        let x = try arena.number(try privateKey(salt: salt, username: username, password: password), secret: true)
        return try arena.bytes(try arena.modExp(try arena.number(generator), x, try arena.number(modulus)))
    }

    /// u = H(PAD(A) ‖ PAD(B)).
    static func scrambler(_ a: [UInt8], _ b: [UInt8]) throws(CryptoError) -> [UInt8] {
        try ESPCrypto.sha512(pad(a), pad(b))
    }

    /// M = H(H(N) xor H(PAD(g)) ‖ H(I) ‖ s ‖ A ‖ B ‖ K).
    static func clientProof(username: [UInt8], salt: [UInt8], a: [UInt8], b: [UInt8], key: [UInt8]) throws(CryptoError) -> [UInt8] {
        let hn = try ESPCrypto.sha512(modulus)
        let hg = try ESPCrypto.sha512(pad(generator))
        let xored = zip(hn, hg).map { $0 ^ $1 }
        return try ESPCrypto.sha512(parts: [xored, try ESPCrypto.sha512(username), salt, stripped(a), stripped(b), key])
    }

    /// H_AMK = H(A ‖ M ‖ K).
    static func serverProof(a: [UInt8], clientProof: [UInt8], key: [UInt8]) throws(CryptoError) -> [UInt8] {
        try ESPCrypto.sha512(stripped(a), clientProof, key)
    }
}

/// What both sides of an SRP-6a exchange end with: the shared key K, the client's proof M and the
/// device's proof H_AMK (64 bytes each). Secret: printing it shows none of them.
public struct SRP6aKeys: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    /// K = H(S); its first 32 bytes are the AES-256-GCM key.
    public let sessionKey: [UInt8]
    public let clientProof: [UInt8]
    public let serverProof: [UInt8]
    /// u and S, for known-answer tests.
    let scrambler: [UInt8]
    let premasterSecret: [UInt8]

    public var description: String { "SRP6aKeys(redacted)" }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// The client (host) side of SRP-6a: the ephemeral a and A, then the keys once the device's salt and B
/// are known. A value; the password and a are never printed.
public struct SRP6aClient: Sendable, CustomStringConvertible, CustomReflectable {
    let username: [UInt8]
    private let password: [UInt8]
    private let ephemeral: [UInt8]
    /// A = g^a mod N, exactly 384 bytes.
    public let publicKey: [UInt8]

    /// A client with a fresh a (256 random bits with the top bit set, as esp_prov draws it), drawn again
    /// while A would have a leading zero byte.
    public init(username: [UInt8], password: [UInt8]) throws(CryptoError) {
        while true {
            var a = try ESPCrypto.randomBytes(32)
            a[0] |= 0x80
            let candidate = try Self(username: username, password: password, ephemeral: a)
            if candidate.publicKey.count == SRP6a.length { self = candidate; return }
        }
    }

    /// A client with a given a (known-answer tests).
    init(username: [UInt8], password: [UInt8], ephemeral: [UInt8]) throws(CryptoError) {
        self.username = username
        self.password = password
        self.ephemeral = ephemeral
        let arena = try BigNumberArena("SRP6a A")
        let n = try arena.number(SRP6a.modulus)
        publicKey = try arena.bytes(try arena.modExp(try arena.number(SRP6a.generator), try arena.number(ephemeral, secret: true), n))
    }

    /// The keys for the device's salt and B; throws `invalidPublicKey` when B mod N or u is zero
    /// (RFC 5054 2.5.4: the client must abort).
    public func keys(salt: [UInt8], serverPublicKey b: [UInt8]) throws(CryptoError) -> SRP6aKeys {
        let arena = try BigNumberArena("SRP6a client")
        let n = try arena.number(SRP6a.modulus)
        let g = try arena.number(SRP6a.generator)
        let bigB = try arena.number(b)
        guard !arena.isZero(try arena.mod(bigB, n)) else {
            throw CryptoError(.invalidPublicKey, operation: "SRP6a", detail: "the device's B is 0 mod N")
        }
        let u = try SRP6a.scrambler(publicKey, b)
        let bigU = try arena.number(u)
        guard !arena.isZero(bigU) else { throw CryptoError(.invalidPublicKey, operation: "SRP6a", detail: "u is 0") }
        let x = try arena.number(try SRP6a.privateKey(salt: salt, username: username, password: password), secret: true)
        let k = try arena.number(try SRP6a.multiplier())
        let v = try arena.modExp(g, x, n)
        let base = try arena.modSub(bigB, try arena.modMul(k, v, n), n)
        let exponent = try arena.add(try arena.number(ephemeral, secret: true), try arena.mul(bigU, x), secret: true)
        let s = try arena.bytes(try arena.modExp(base, exponent, n))
        let key = try ESPCrypto.sha512(s)
        let m = try SRP6a.clientProof(username: username, salt: salt, a: publicKey, b: b, key: key)
        return SRP6aKeys(sessionKey: key, clientProof: m, serverProof: try SRP6a.serverProof(a: publicKey, clientProof: m, key: key),
                         scrambler: u, premasterSecret: s)
    }

    public var description: String { "SRP6aClient(username: \(username.count) bytes, secrets hidden)" }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// The device side of SRP-6a (for the simulator's ESP model and tests): it keeps the salt and the
/// verifier, never the password.
package struct SRP6aServer: Sendable {
    let salt: [UInt8]
    private let verifier: [UInt8]
    private let ephemeral: [UInt8]
    /// B = (k·v + g^b) mod N, without leading zeros (as ESP-IDF sends it).
    package let publicKey: [UInt8]

    package init(salt: [UInt8], verifier: [UInt8], ephemeral: [UInt8]? = nil) throws(CryptoError) {
        self.salt = salt
        self.verifier = verifier
        let b: [UInt8]
        if let ephemeral { b = ephemeral } else { b = try ESPCrypto.randomBytes(32) }
        self.ephemeral = b
        let arena = try BigNumberArena("SRP6a B")
        let n = try arena.number(SRP6a.modulus)
        let kv = try arena.modMul(try arena.number(try SRP6a.multiplier()), try arena.number(verifier), n)
        let gb = try arena.modExp(try arena.number(SRP6a.generator), try arena.number(b, secret: true), n)
        publicKey = try arena.bytes(try arena.modAdd(kv, gb, n))
    }

    /// The keys for the client's A: K and the proofs M (what the client must send) and H_AMK.
    package func keys(username: [UInt8], clientPublicKey a: [UInt8]) throws(CryptoError) -> SRP6aKeys {
        let arena = try BigNumberArena("SRP6a device")
        let n = try arena.number(SRP6a.modulus)
        let bigA = try arena.number(a)
        guard !arena.isZero(try arena.mod(bigA, n)) else {
            throw CryptoError(.invalidPublicKey, operation: "SRP6a", detail: "the client's A is 0 mod N")
        }
        let u = try SRP6a.scrambler(a, publicKey)
        let vu = try arena.modExp(try arena.number(verifier), try arena.number(u), n)
        let s = try arena.bytes(try arena.modExp(try arena.modMul(bigA, vu, n), try arena.number(ephemeral, secret: true), n))
        let key = try ESPCrypto.sha512(s)
        let m = try SRP6a.clientProof(username: username, salt: salt, a: a, b: publicKey, key: key)
        return SRP6aKeys(sessionKey: key, clientProof: m, serverProof: try SRP6a.serverProof(a: a, clientProof: m, key: key),
                         scrambler: u, premasterSecret: s)
    }
}
