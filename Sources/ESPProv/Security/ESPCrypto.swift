import BLESecurity
import CLibCrypto

/// The primitives ESP-IDF's protocomm security uses, all from OpenSSL 3's libcrypto: SHA-256 and SHA-512,
/// X25519, AES-256 in CTR and GCM modes. Nothing here is hand-written cryptography; each function checks
/// its sizes, clears OpenSSL's error queue first and throws `CryptoError` with OpenSSL's own words.
public enum ESPCrypto {
    /// SHA-256 (FIPS 180-4) of `parts` concatenated.
    public static func sha256(_ parts: [UInt8]...) throws(CryptoError) -> [UInt8] {
        try digest("SHA-256", length: 32, parts)
    }

    /// SHA-512 (FIPS 180-4) of `parts` concatenated.
    public static func sha512(_ parts: [UInt8]...) throws(CryptoError) -> [UInt8] {
        try digest("SHA-512", length: 64, parts)
    }

    static func sha512(parts: [[UInt8]]) throws(CryptoError) -> [UInt8] {
        try digest("SHA-512", length: 64, parts)
    }

    private static func digest(_ name: StaticString, length: Int, _ parts: [[UInt8]]) throws(CryptoError) -> [UInt8] {
        let operation = "\(name)"
        ERR_clear_error()
        guard let md = EVP_MD_fetch(nil, LibCrypto.cString(name), nil) else { throw LibCrypto.failure(operation, "EVP_MD_fetch") }
        defer { EVP_MD_free(md) }
        guard let context = EVP_MD_CTX_new() else { throw LibCrypto.failure(operation, "EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestInit_ex2(context, md, nil) == 1 else { throw LibCrypto.failure(operation, "EVP_DigestInit_ex2") }
        for part in parts where !part.isEmpty {
            let ok = part.withUnsafeBufferPointer { EVP_DigestUpdate(context, $0.baseAddress, $0.count) == 1 }
            guard ok else { throw LibCrypto.failure(operation, "EVP_DigestUpdate") }
        }
        var out = [UInt8](repeating: 0, count: length)
        var written: UInt32 = 0
        let ok = out.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &written) == 1 }
        guard ok, written == UInt32(length) else { throw LibCrypto.failure(operation, "EVP_DigestFinal_ex") }
        return out
    }

    // MARK: - X25519 (RFC 7748)

    /// The public key of an X25519 private key (both 32 bytes, as RFC 7748 encodes them).
    public static func x25519PublicKey(privateKey: [UInt8]) throws(CryptoError) -> [UInt8] {
        let operation = "X25519 public key"
        let key = try x25519Key(privateKey, operation)
        defer { EVP_PKEY_free(key) }
        var out = [UInt8](repeating: 0, count: 32)
        var length = 32
        let ok = out.withUnsafeMutableBufferPointer { EVP_PKEY_get_raw_public_key(key, $0.baseAddress, &length) == 1 }
        guard ok, length == 32 else { throw LibCrypto.failure(operation, "EVP_PKEY_get_raw_public_key") }
        return out
    }

    /// The X25519 shared secret of `privateKey` and a peer's public key. A peer key of low order (whose
    /// secret would be all zeros) is refused by libcrypto and throws `invalidPublicKey`.
    public static func x25519SharedSecret(privateKey: [UInt8], peerPublicKey: [UInt8]) throws(CryptoError) -> [UInt8] {
        let operation = "X25519"
        guard peerPublicKey.count == 32 else {
            throw CryptoError(.invalidPublicKey, operation: operation, detail: "a public key is 32 bytes, not \(peerPublicKey.count)")
        }
        let key = try x25519Key(privateKey, operation)
        defer { EVP_PKEY_free(key) }
        let peer = peerPublicKey.withUnsafeBufferPointer {
            EVP_PKEY_new_raw_public_key_ex(nil, "X25519", nil, $0.baseAddress, 32)
        }
        guard let peer else { throw LibCrypto.failure(operation, "EVP_PKEY_new_raw_public_key_ex") }
        defer { EVP_PKEY_free(peer) }
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { throw LibCrypto.failure(operation, "EVP_PKEY_CTX_new_from_pkey") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_derive_init(context) == 1 else { throw LibCrypto.failure(operation, "EVP_PKEY_derive_init") }
        guard EVP_PKEY_derive_set_peer(context, peer) == 1 else {
            throw CryptoError(.invalidPublicKey, operation: operation, detail: "the peer's public key was refused")
        }
        var out = [UInt8](repeating: 0, count: 32)
        var length = 32
        let ok = out.withUnsafeMutableBufferPointer { EVP_PKEY_derive(context, $0.baseAddress, &length) == 1 }
        guard ok, length == 32 else {
            ERR_clear_error()
            throw CryptoError(.invalidPublicKey, operation: operation, detail: "the peer's public key has low order (no shared secret)")
        }
        return out
    }

    private static func x25519Key(_ privateKey: [UInt8], _ operation: String) throws(CryptoError) -> OpaquePointer {
        guard privateKey.count == 32 else {
            throw CryptoError(.invalidInput, operation: operation, detail: "a private key is 32 bytes, not \(privateKey.count)")
        }
        ERR_clear_error()
        let key = privateKey.withUnsafeBufferPointer {
            EVP_PKEY_new_raw_private_key_ex(nil, "X25519", nil, $0.baseAddress, 32)
        }
        guard let key else { throw LibCrypto.failure(operation, "EVP_PKEY_new_raw_private_key_ex") }
        return key
    }

    // MARK: - AES-256-CTR and AES-256-GCM

    /// AES-256 in CTR mode (NIST SP 800-38A) over `data`, starting `offset` bytes into the keystream of
    /// the 16-byte initial counter block `iv` (the whole block counts up, big-endian, as mbedTLS and
    /// OpenSSL both do). Encryption and decryption are the same operation.
    public static func aes256CTR(key: [UInt8], iv: [UInt8], offset: UInt64, _ data: [UInt8]) throws(CryptoError) -> [UInt8] {
        let operation = "AES-256-CTR"
        guard key.count == 32, iv.count == 16 else {
            throw CryptoError(.invalidInput, operation: operation, detail: "key and counter block must be 32 and 16 bytes, not \(key.count) and \(iv.count)")
        }
        if data.isEmpty { return [] }
        // The counter block of the block holding `offset`, then the bytes of that block already used.
        var counter = iv
        var carry = offset / 16
        for i in (0..<16).reversed() where carry > 0 {
            let sum = UInt64(counter[i]) + (carry & 0xFF)
            counter[i] = UInt8(truncatingIfNeeded: sum)
            carry = (carry >> 8) + (sum >> 8)
        }
        let skip = Int(offset % 16)
        let input = [UInt8](repeating: 0, count: skip) + data
        let output = try cipher("AES-256-CTR", operation, key: key, iv: counter, encrypt: true, input)
        return Array(output.dropFirst(skip))
    }

    /// AES-256-GCM (NIST SP 800-38D) with a 12-byte nonce and no additional data: the ciphertext followed
    /// by its 16-byte tag, as protocomm security 2 sends it.
    public static func aes256GCMSeal(key: [UInt8], nonce: [UInt8], _ plaintext: [UInt8]) throws(CryptoError) -> [UInt8] {
        let operation = "AES-256-GCM"
        guard key.count == 32, nonce.count == 12 else {
            throw CryptoError(.invalidInput, operation: operation, detail: "key and nonce must be 32 and 12 bytes, not \(key.count) and \(nonce.count)")
        }
        var tag = [UInt8](repeating: 0, count: 16)
        let sealed = try cipher("AES-256-GCM", operation, key: key, iv: nonce, encrypt: true, plaintext) { context, finished in
            guard finished else { return true }
            return tag.withUnsafeMutableBufferPointer { EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, 16, $0.baseAddress) == 1 }
        }
        return sealed + tag
    }

    /// Opens what `aes256GCMSeal` made; a ciphertext that is altered, or sealed with another key or nonce,
    /// throws `CryptoError` (`authentication failed`) and returns nothing of it.
    public static func aes256GCMOpen(key: [UInt8], nonce: [UInt8], _ sealed: [UInt8]) throws(CryptoError) -> [UInt8] {
        let operation = "AES-256-GCM"
        guard key.count == 32, nonce.count == 12 else {
            throw CryptoError(.invalidInput, operation: operation, detail: "key and nonce must be 32 and 12 bytes, not \(key.count) and \(nonce.count)")
        }
        guard sealed.count >= 16 else {
            throw CryptoError(.invalidInput, operation: operation, detail: "\(sealed.count) bytes cannot hold the 16-byte tag")
        }
        var tag = Array(sealed.suffix(16))
        do {
            return try cipher("AES-256-GCM", operation, key: key, iv: nonce, encrypt: false, Array(sealed.dropLast(16))) { context, finished in
                guard !finished else { return true }
                return tag.withUnsafeMutableBufferPointer { EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, 16, $0.baseAddress) == 1 }
            }
        } catch where error.kind == .library {
            ERR_clear_error()
            throw CryptoError(.library, operation: operation, detail: "authentication failed: the message was altered or sealed with another key")
        }
    }

    /// One pass of an EVP cipher; `hook` runs before the data (finished false) and after the final call
    /// (finished true) to set or get a GCM tag.
    private static func cipher(_ name: StaticString, _ operation: String, key: [UInt8], iv: [UInt8], encrypt: Bool, _ input: [UInt8],
                               hook: (OpaquePointer, Bool) -> Bool = { _, _ in true }) throws(CryptoError) -> [UInt8] {
        ERR_clear_error()
        guard let algorithm = EVP_CIPHER_fetch(nil, LibCrypto.cString(name), nil) else { throw LibCrypto.failure(operation, "EVP_CIPHER_fetch") }
        defer { EVP_CIPHER_free(algorithm) }
        guard let context = EVP_CIPHER_CTX_new() else { throw LibCrypto.failure(operation, "EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) } // frees and clears the key schedule
        var out = [UInt8](repeating: 0, count: input.count + 32)
        var total = 0
        let ok = key.withUnsafeBufferPointer { k in
            iv.withUnsafeBufferPointer { v in
                input.withUnsafeBufferPointer { i in
                    out.withUnsafeMutableBufferPointer { o -> Bool in
                        guard let output = o.baseAddress,
                              EVP_CipherInit_ex2(context, algorithm, k.baseAddress, v.baseAddress, encrypt ? 1 : 0, nil) == 1,
                              hook(context, false) else { return false }
                        var written: Int32 = 0
                        if let bytes = i.baseAddress, i.count > 0 {
                            guard i.count <= Int(Int32.max),
                                  EVP_CipherUpdate(context, output, &written, bytes, Int32(i.count)) == 1 else { return false }
                        }
                        var tail: Int32 = 0
                        guard EVP_CipherFinal_ex(context, output + Int(written), &tail) == 1 else { return false }
                        total = Int(written) + Int(tail)
                        return hook(context, true)
                    }
                }
            }
        }
        guard ok else { throw LibCrypto.failure(operation, encrypt ? "encryption failed" : "decryption failed") }
        guard total == input.count else { throw LibCrypto.failure(operation, "produced \(total) bytes, not \(input.count)") }
        return Array(out.prefix(total))
    }

    /// `count` bytes from OpenSSL's random generator.
    public static func randomBytes(_ count: Int) throws(CryptoError) -> [UInt8] {
        try LibCrypto.randomBytes(count)
    }
}
