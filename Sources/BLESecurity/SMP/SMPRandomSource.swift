/// Where a Security Manager state machine gets its randomness and its P-256 key pairs.
///
/// Injected, so that a whole pairing can run in a test with fixed inputs (and golden PDUs), while the
/// host uses `SystemRandom`: OpenSSL's CSPRNG and a fresh key pair per pairing.
public protocol SMPRandomSource: Sendable {
    /// `count` random bytes.
    mutating func bytes(_ count: Int) throws(CryptoError) -> [UInt8]
    /// A fresh P-256 key pair for one pairing.
    mutating func keyPair() throws(CryptoError) -> P256KeyPair
}

extension SMPRandomSource {
    /// A 128-bit random value (a nonce, a legacy random, a key).
    mutating func value128() throws(CryptoError) -> UInt128 {
        UInt128(bigEndianBytes: try bytes(16)) ?? 0
    }
}

/// OpenSSL's CSPRNG (RAND_bytes) and fresh P-256 key pairs: what a real host uses.
public struct SystemRandom: SMPRandomSource {
    public init() {}
    public mutating func bytes(_ count: Int) throws(CryptoError) -> [UInt8] { try LibCrypto.randomBytes(count) }
    public mutating func keyPair() throws(CryptoError) -> P256KeyPair { try P256KeyPair.generate() }
}
