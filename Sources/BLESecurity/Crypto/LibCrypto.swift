import CLibCrypto

/// OpenSSL 3's libcrypto behind one small namespace: AES-128, AES-CMAC and secure random bytes.
///
/// Nothing here is hand-written cryptography: every primitive is libcrypto's. Each function checks its
/// inputs, clears OpenSSL's error queue first, and throws `CryptoError` carrying OpenSSL's error strings.
/// Keys and blocks are most-significant octet first, as AES takes them (SMP PDUs carry them reversed).
/// P-256 lives in `P256KeyPair`, which reports its errors through `failure(_:_:)` here.
public enum LibCrypto {
    // Fetched once: a fetched algorithm is immutable, reference-counted, and OpenSSL 3 shares it across threads.
    nonisolated(unsafe) private static let aes128ECB: OpaquePointer? = EVP_CIPHER_fetch(nil, "AES-128-ECB", nil) // immutable after fetch; OpenSSL shares fetched algorithms across threads
    nonisolated(unsafe) private static let cmacAlgorithm: OpaquePointer? = EVP_MAC_fetch(nil, "CMAC", nil) // immutable after fetch; OpenSSL shares fetched algorithms across threads

    /// AES-128 encryption of one 16-byte block (ECB, no padding): the Core specification's function e.
    public static func aes128Encrypt(key: [UInt8], block: [UInt8]) throws(CryptoError) -> [UInt8] {
        let operation = "AES-128"
        guard key.count == 16, block.count == 16 else {
            throw CryptoError(.invalidInput, operation: operation, detail: "key and block must be 16 bytes, not \(key.count) and \(block.count)")
        }
        ERR_clear_error()
        guard let cipher = aes128ECB else { throw failure(operation, "AES-128-ECB is not available") }
        guard let context = EVP_CIPHER_CTX_new() else { throw failure(operation, "EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) } // frees and clears the key schedule
        var out = [UInt8](repeating: 0, count: 32)
        var total: Int32 = 0
        let ok = key.withUnsafeBufferPointer { k in
            block.withUnsafeBufferPointer { b in
                out.withUnsafeMutableBufferPointer { o -> Bool in
                    guard let output = o.baseAddress,
                          EVP_EncryptInit_ex2(context, cipher, k.baseAddress, nil, nil) == 1,
                          EVP_CIPHER_CTX_set_padding(context, 0) == 1 else { return false }
                    var written: Int32 = 0
                    guard EVP_EncryptUpdate(context, output, &written, b.baseAddress, 16) == 1 else { return false }
                    var tail: Int32 = 0
                    guard EVP_EncryptFinal_ex(context, output + Int(written), &tail) == 1 else { return false }
                    total = written + tail
                    return true
                }
            }
        }
        guard ok else { throw failure(operation, "encryption failed") }
        guard total == 16 else { throw failure(operation, "produced \(total) bytes, not 16") }
        return Array(out.prefix(16))
    }

    /// AES-CMAC (RFC 4493) with a 128-bit key: OpenSSL's EVP_MAC "CMAC" over AES-128-CBC.
    public static func aesCMAC(key: [UInt8], message: [UInt8]) throws(CryptoError) -> [UInt8] {
        let operation = "AES-CMAC"
        guard key.count == 16 else {
            throw CryptoError(.invalidInput, operation: operation, detail: "key must be 16 bytes, not \(key.count)")
        }
        ERR_clear_error()
        guard let algorithm = cmacAlgorithm else { throw failure(operation, "CMAC is not available") }
        guard let context = EVP_MAC_CTX_new(algorithm) else { throw failure(operation, "EVP_MAC_CTX_new") }
        defer { EVP_MAC_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: 16)
        var length = 0
        // OSSL_PARAM keeps pointers to its key and value: both are static strings, valid for the whole call.
        var params = [
            OSSL_PARAM_construct_utf8_string(cString("cipher"), mutableCString("AES-128-CBC"), 0),
            OSSL_PARAM_construct_end(),
        ]
        let ok = key.withUnsafeBufferPointer { k in
            message.withUnsafeBufferPointer { m in
                out.withUnsafeMutableBufferPointer { o -> Bool in
                    guard EVP_MAC_init(context, k.baseAddress, 16, &params) == 1 else { return false }
                    if let bytes = m.baseAddress, m.count > 0 {
                        guard EVP_MAC_update(context, bytes, m.count) == 1 else { return false }
                    }
                    return EVP_MAC_final(context, o.baseAddress, &length, 16) == 1
                }
            }
        }
        guard ok else { throw failure(operation, "MAC computation failed") }
        guard length == 16 else { throw failure(operation, "produced \(length) bytes, not 16") }
        return out
    }

    /// `count` bytes from OpenSSL's CSPRNG (RAND_bytes).
    public static func randomBytes(_ count: Int) throws(CryptoError) -> [UInt8] {
        let operation = "RAND_bytes"
        guard count >= 0, count <= Int(Int32.max) else {
            throw CryptoError(.invalidInput, operation: operation, detail: "cannot produce \(count) bytes")
        }
        ERR_clear_error()
        var out = [UInt8](repeating: 0, count: count)
        let ok = out.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) == 1 }
        guard ok else { throw failure(operation, "the random generator failed") }
        return out
    }

    /// Overwrites `bytes` with zeros in a way the compiler cannot drop (OPENSSL_cleanse).
    ///
    /// Swift arrays are values: copies made earlier are not reached, so this clears what is practical —
    /// the buffers this layer fills for libcrypto and owns alone.
    public static func cleanse(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { OPENSSL_cleanse(base, raw.count) }
        }
    }

    /// A `CryptoError` for `operation`, with OpenSSL's queued error strings (the queue is drained).
    package static func failure(_ operation: String, _ what: String) -> CryptoError {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            messages.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        let detail = messages.isEmpty ? what : "\(what) (\(messages.joined(separator: "; ")))"
        return CryptoError(.library, operation: operation, detail: detail)
    }

    /// A C string with static storage (OSSL_PARAM keys must outlive the parameter array).
    package static func cString(_ text: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    /// The same, typed as OpenSSL's `char *` value parameters (which OpenSSL only reads).
    static func mutableCString(_ text: StaticString) -> UnsafeMutablePointer<CChar> {
        UnsafeMutablePointer(mutating: cString(text))
    }
}
