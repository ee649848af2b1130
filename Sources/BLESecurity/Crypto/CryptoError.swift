/// A failure of a cryptographic operation: which operation, what went wrong, and OpenSSL's own words.
public struct CryptoError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is.
    public enum Kind: Sendable, Hashable {
        /// libcrypto refused or failed (allocation, provider, internal error); `detail` holds its error strings.
        case library
        /// The caller passed a value of the wrong size or range (a key that is not 16 bytes, ...).
        case invalidInput
        /// A peer's P-256 public key is unusable: off the curve, the point at infinity, or a coordinate ≥ p.
        case invalidPublicKey
    }

    public var kind: Kind
    /// The operation, as a reader would name it ("AES-CMAC", "P-256 ECDH").
    public var operation: String
    /// What went wrong; for `.library`, OpenSSL's error strings joined by "; ".
    public var detail: String

    public init(_ kind: Kind, operation: String, detail: String) {
        self.kind = kind
        self.operation = operation
        self.detail = detail
    }

    public var description: String { "\(operation): \(detail)" }
}
