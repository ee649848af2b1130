import BLESecurity
import CLibCrypto

/// The big numbers of one SRP computation, on libcrypto's BIGNUM API, freed together (and cleared with
/// BN_clear_free) when the arena goes. Numbers are opaque BIGNUM pointers that never leave the arena's
/// owner; values cross into Swift as big-endian bytes only.
final class BigNumberArena {
    private let context: OpaquePointer
    private var owned: [OpaquePointer] = []
    private let operation: String

    init(_ operation: String) throws(CryptoError) {
        self.operation = operation
        ERR_clear_error()
        guard let context = BN_CTX_new() else { throw LibCrypto.failure(operation, "BN_CTX_new") }
        self.context = context
    }

    deinit {
        for n in owned { BN_clear_free(n) }
        BN_CTX_free(context)
    }

    private func adopt(_ n: OpaquePointer?, _ what: String) throws(CryptoError) -> OpaquePointer {
        guard let n else { throw LibCrypto.failure(operation, what) }
        owned.append(n)
        return n
    }

    /// A number from big-endian bytes (no bytes is zero). `secret` marks it for constant-time exponentiation.
    func number(_ bytes: [UInt8], secret: Bool = false) throws(CryptoError) -> OpaquePointer {
        let n = try adopt(bytes.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32(clamping: $0.count), nil) }, "BN_bin2bn")
        if secret { BN_set_flags(n, BN_FLG_CONSTTIME) }
        return n
    }

    private func result(_ ok: (OpaquePointer) -> Int32, _ what: String) throws(CryptoError) -> OpaquePointer {
        let r = try adopt(BN_new(), "BN_new")
        guard ok(r) == 1 else { throw LibCrypto.failure(operation, what) }
        return r
    }

    /// a^p mod m; a secret exponent uses the constant-time ladder.
    func modExp(_ a: OpaquePointer, _ p: OpaquePointer, _ m: OpaquePointer) throws(CryptoError) -> OpaquePointer {
        try result({ BN_mod_exp($0, a, p, m, context) }, "BN_mod_exp")
    }

    func modMul(_ a: OpaquePointer, _ b: OpaquePointer, _ m: OpaquePointer) throws(CryptoError) -> OpaquePointer {
        try result({ BN_mod_mul($0, a, b, m, context) }, "BN_mod_mul")
    }

    func modAdd(_ a: OpaquePointer, _ b: OpaquePointer, _ m: OpaquePointer) throws(CryptoError) -> OpaquePointer {
        try result({ BN_mod_add($0, a, b, m, context) }, "BN_mod_add")
    }

    /// (a − b) mod m, never negative.
    func modSub(_ a: OpaquePointer, _ b: OpaquePointer, _ m: OpaquePointer) throws(CryptoError) -> OpaquePointer {
        try result({ BN_mod_sub($0, a, b, m, context) }, "BN_mod_sub")
    }

    /// a mod m, never negative.
    func mod(_ a: OpaquePointer, _ m: OpaquePointer) throws(CryptoError) -> OpaquePointer {
        try result({ BN_nnmod($0, a, m, context) }, "BN_nnmod")
    }

    func mul(_ a: OpaquePointer, _ b: OpaquePointer) throws(CryptoError) -> OpaquePointer {
        try result({ BN_mul($0, a, b, context) }, "BN_mul")
    }

    /// a + b; `secret` marks the sum for constant-time exponentiation.
    func add(_ a: OpaquePointer, _ b: OpaquePointer, secret: Bool = false) throws(CryptoError) -> OpaquePointer {
        let r = try result({ BN_add($0, a, b) }, "BN_add")
        if secret { BN_set_flags(r, BN_FLG_CONSTTIME) }
        return r
    }

    func isZero(_ a: OpaquePointer) -> Bool { BN_is_zero(a) == 1 }

    /// Big-endian bytes without leading zeros (zero is one zero byte, as esp_prov's long_to_bytes writes it).
    func bytes(_ a: OpaquePointer) throws(CryptoError) -> [UInt8] {
        let count = (Int(BN_num_bits(a)) + 7) / 8
        return count == 0 ? [0] : try bytes(a, padded: count)
    }

    /// Big-endian bytes, left-padded with zeros to `length` (throws if the number is longer).
    func bytes(_ a: OpaquePointer, padded length: Int) throws(CryptoError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: length)
        let written = out.withUnsafeMutableBufferPointer { BN_bn2binpad(a, $0.baseAddress, Int32(clamping: length)) }
        guard Int(written) == length else { throw LibCrypto.failure(operation, "BN_bn2binpad: the number does not fit \(length) bytes") }
        return out
    }
}
