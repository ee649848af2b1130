import CLibCrypto

/// A P-256 public key as SMP carries it: the X and Y coordinates, 32 bytes each.
///
/// Held most-significant octet first, as the Core specification prints them (a Pairing Public Key PDU
/// carries each coordinate least-significant octet first). Making one checks only the sizes; a peer's
/// key is checked for the curve when it is used (`P256KeyPair.sharedSecret(with:)`).
public struct P256PublicKey: Sendable, Hashable, CustomStringConvertible {
    public let x: [UInt8]
    public let y: [UInt8]

    /// From two 32-byte coordinates, most significant octet first; nil when a size is wrong.
    public init?(x: [UInt8], y: [UInt8]) {
        guard x.count == 32, y.count == 32 else { return nil }
        self.x = x
        self.y = y
    }

    /// SEC1 uncompressed form: 0x04 ‖ X ‖ Y.
    public var uncompressed: [UInt8] { [0x04] + x + y }

    public var description: String { "P256PublicKey(x: \(x.hexString))" }

    /// The prime p of P-256's field (FIPS 186-4 D.1.2.3), most significant octet first.
    static let fieldPrime: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
    ]
}

/// The ECDH shared secret, DHKey: the X coordinate of the shared point, most significant octet first.
///
/// Secret: printing it shows no byte of it.
public struct DHKey: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    let bytes: [UInt8]

    /// From 32 bytes, most significant octet first (the specification's sample data); nil otherwise.
    public init?(bigEndianBytes: [UInt8]) {
        guard bigEndianBytes.count == 32 else { return nil }
        bytes = bigEndianBytes
    }

    public var description: String { "DHKey(redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// A P-256 key pair for one pairing, held by libcrypto (which clears the private key when it frees it).
///
/// Make a fresh one per pairing (`generate()`); `init(privateKey:)` exists for the specification's
/// debug keys and for deterministic tests. The private key never leaves libcrypto.
public final class P256KeyPair: @unchecked Sendable, CustomStringConvertible { // the EVP_PKEY is immutable once made, and OpenSSL 3 allows concurrent use of one key
    private let key: OpaquePointer
    /// This pair's public key.
    public let publicKey: P256PublicKey

    private init(key: OpaquePointer, publicKey: P256PublicKey) {
        self.key = key
        self.publicKey = publicKey
    }

    deinit { EVP_PKEY_free(key) }

    public var description: String { "P256KeyPair(\(publicKey), private key hidden)" }

    /// A fresh key pair from OpenSSL's random generator.
    public static func generate() throws(CryptoError) -> P256KeyPair {
        let operation = "P-256 key generation"
        ERR_clear_error()
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw LibCrypto.failure(operation, "EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_group_name(context, "P-256") == 1 else {
            throw LibCrypto.failure(operation, "keygen init")
        }
        var made: OpaquePointer?
        guard EVP_PKEY_generate(context, &made) == 1, let key = made else { throw LibCrypto.failure(operation, "EVP_PKEY_generate") }
        do {
            return P256KeyPair(key: key, publicKey: try publicKey(of: key, operation))
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
    }

    /// The key pair with private scalar `privateKey` (32 bytes, most significant first, 1 ≤ d < n).
    public convenience init(privateKey: [UInt8]) throws(CryptoError) {
        let operation = "P-256 key import"
        guard privateKey.count == 32 else {
            throw CryptoError(.invalidInput, operation: operation, detail: "private key must be 32 bytes, not \(privateKey.count)")
        }
        ERR_clear_error()
        // The public key Q = d·G, computed by libcrypto, so that the imported pair is complete.
        guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1) else { throw LibCrypto.failure(operation, "EC_GROUP_new_by_curve_name") }
        defer { EC_GROUP_free(group) }
        guard let scalar = BN_secure_new() else { throw LibCrypto.failure(operation, "BN_secure_new") }
        defer { BN_clear_free(scalar) }
        let converted = privateKey.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, scalar) != nil }
        guard converted else { throw LibCrypto.failure(operation, "BN_bin2bn") }
        guard let point = EC_POINT_new(group) else { throw LibCrypto.failure(operation, "EC_POINT_new") }
        defer { EC_POINT_free(point) }
        guard EC_POINT_mul(group, point, scalar, nil, nil, nil) == 1 else { throw LibCrypto.failure(operation, "EC_POINT_mul") }
        var encoded = [UInt8](repeating: 0, count: 65)
        let length = encoded.withUnsafeMutableBufferPointer {
            EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, $0.baseAddress, 65, nil)
        }
        guard length == 65 else { throw LibCrypto.failure(operation, "EC_POINT_point2oct") }

        guard let builder = OSSL_PARAM_BLD_new() else { throw LibCrypto.failure(operation, "OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        let params = encoded.withUnsafeBufferPointer { pub -> UnsafeMutablePointer<OSSL_PARAM>? in
            guard OSSL_PARAM_BLD_push_utf8_string(builder, LibCrypto.cString("group"), LibCrypto.cString("P-256"), 0) == 1,
                  OSSL_PARAM_BLD_push_BN(builder, LibCrypto.cString("priv"), scalar) == 1,
                  OSSL_PARAM_BLD_push_octet_string(builder, LibCrypto.cString("pub"), pub.baseAddress, 65) == 1 else { return nil }
            return OSSL_PARAM_BLD_to_param(builder)
        }
        guard let params else { throw LibCrypto.failure(operation, "building parameters") }
        defer { OSSL_PARAM_free(params) }
        let key = try Self.fromData(params, selection: clibcrypto_selection_keypair(), operation)
        // A private key outside [1, n-1], or a public key that does not match it, is refused here.
        try Self.validate(key, privateKey: true, operation, refusal: .invalidInput, "not a valid P-256 private key")
        let x = Array(encoded[1..<33]), y = Array(encoded[33..<65])
        guard let publicKey = P256PublicKey(x: x, y: y) else {
            EVP_PKEY_free(key)
            throw CryptoError(.library, operation: operation, detail: "unexpected public key size")
        }
        self.init(key: key, publicKey: publicKey)
    }

    /// DHKey = the X coordinate of d·Q_peer, after checking the peer's key.
    ///
    /// Refuses (`CryptoError.Kind.invalidPublicKey`) the point at infinity (SMP has no encoding for it;
    /// an all-zero key is taken as it), a coordinate ≥ p, and any point not on P-256 — the invalid-curve
    /// attack (CVE-2018-5383) sends exactly such points. OpenSSL's own public-key check and its
    /// validating derive run as well.
    public func sharedSecret(with peer: P256PublicKey) throws(CryptoError) -> DHKey {
        let operation = "P-256 ECDH"
        if peer.x.allSatisfy({ $0 == 0 }) && peer.y.allSatisfy({ $0 == 0 }) {
            throw CryptoError(.invalidPublicKey, operation: operation, detail: "the peer's public key is the point at infinity")
        }
        if !peer.x.lexicographicallyPrecedes(P256PublicKey.fieldPrime) || !peer.y.lexicographicallyPrecedes(P256PublicKey.fieldPrime) {
            throw CryptoError(.invalidPublicKey, operation: operation, detail: "a coordinate of the peer's public key is not below the field prime p")
        }
        ERR_clear_error()
        let peerKey = try Self.importPublicKey(peer, operation)
        defer { EVP_PKEY_free(peerKey) }
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { throw LibCrypto.failure(operation, "EVP_PKEY_CTX_new_from_pkey") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_derive_init(context) == 1 else { throw LibCrypto.failure(operation, "EVP_PKEY_derive_init") }
        guard EVP_PKEY_derive_set_peer_ex(context, peerKey, 1) == 1 else {
            throw CryptoError(.invalidPublicKey, operation: operation, detail: LibCrypto.failure(operation, "the peer's public key was refused").detail)
        }
        var secret = [UInt8](repeating: 0, count: 32)
        var length = 32
        let ok = secret.withUnsafeMutableBufferPointer { EVP_PKEY_derive(context, $0.baseAddress, &length) == 1 }
        guard ok, length == 32 else {
            LibCrypto.cleanse(&secret)
            throw LibCrypto.failure(operation, "EVP_PKEY_derive")
        }
        guard let dhKey = DHKey(bigEndianBytes: secret) else { throw CryptoError(.library, operation: operation, detail: "unexpected secret size") }
        LibCrypto.cleanse(&secret)
        return dhKey
    }

    /// Imports a peer's public key and runs OpenSSL's public-key check (on the curve, in range, not infinity).
    private static func importPublicKey(_ peer: P256PublicKey, _ operation: String) throws(CryptoError) -> OpaquePointer {
        guard let builder = OSSL_PARAM_BLD_new() else { throw LibCrypto.failure(operation, "OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        let encoded = peer.uncompressed
        let params = encoded.withUnsafeBufferPointer { pub -> UnsafeMutablePointer<OSSL_PARAM>? in
            guard OSSL_PARAM_BLD_push_utf8_string(builder, LibCrypto.cString("group"), LibCrypto.cString("P-256"), 0) == 1,
                  OSSL_PARAM_BLD_push_octet_string(builder, LibCrypto.cString("pub"), pub.baseAddress, 65) == 1 else { return nil }
            return OSSL_PARAM_BLD_to_param(builder)
        }
        guard let params else { throw LibCrypto.failure(operation, "building parameters") }
        defer { OSSL_PARAM_free(params) }
        let key: OpaquePointer
        do {
            key = try fromData(params, selection: clibcrypto_selection_public_key(), operation)
        } catch {
            throw CryptoError(.invalidPublicKey, operation: operation, detail: "the peer's public key is not a point on P-256: \(error.detail)")
        }
        try validate(key, privateKey: false, operation, refusal: .invalidPublicKey, "the peer's public key is not a point on P-256")
        return key
    }

    /// Runs OpenSSL's key check (EVP_PKEY_check for a pair, EVP_PKEY_public_check for a public key);
    /// frees `key` and throws `refusal` when the check fails.
    private static func validate(_ key: OpaquePointer, privateKey: Bool, _ operation: String,
                                 refusal: CryptoError.Kind, _ what: String) throws(CryptoError) {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else {
            EVP_PKEY_free(key)
            throw LibCrypto.failure(operation, "EVP_PKEY_CTX_new_from_pkey")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard (privateKey ? EVP_PKEY_check(context) : EVP_PKEY_public_check(context)) == 1 else {
            EVP_PKEY_free(key)
            throw CryptoError(refusal, operation: operation, detail: LibCrypto.failure(operation, what).detail)
        }
    }

    private static func fromData(_ params: UnsafeMutablePointer<OSSL_PARAM>, selection: Int32, _ operation: String) throws(CryptoError) -> OpaquePointer {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw LibCrypto.failure(operation, "EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(context) }
        var made: OpaquePointer?
        guard EVP_PKEY_fromdata_init(context) == 1,
              EVP_PKEY_fromdata(context, &made, selection, params) == 1,
              let key = made else { throw LibCrypto.failure(operation, "EVP_PKEY_fromdata") }
        return key
    }

    /// The public key of `key`, read back from libcrypto in uncompressed form.
    private static func publicKey(of key: OpaquePointer, _ operation: String) throws(CryptoError) -> P256PublicKey {
        var encoded = [UInt8](repeating: 0, count: 65)
        var length = 0
        let ok = encoded.withUnsafeMutableBufferPointer {
            EVP_PKEY_get_octet_string_param(key, LibCrypto.cString("pub"), $0.baseAddress, 65, &length) == 1
        }
        guard ok, length == 65, encoded[0] == 0x04,
              let publicKey = P256PublicKey(x: Array(encoded[1..<33]), y: Array(encoded[33..<65])) else {
            throw LibCrypto.failure(operation, "reading the public key")
        }
        return publicKey
    }
}
