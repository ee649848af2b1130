import CLibCrypto

/// SHA-256 through OpenSSL's libcrypto (EVP_Digest), streaming: never hand-written.
///
/// The image hash of an MCUboot image and the file group's hash check are computed here. One instance
/// feeds one digest; it owns its EVP context and frees it when it goes.
public final class SHA256Digest {
    private let context: OpaquePointer?
    private var failed: Bool
    private var finished = false

    /// The digest's length in bytes.
    public static let length = 32

    public init() {
        context = EVP_MD_CTX_new()
        failed = context == nil || EVP_DigestInit_ex(context, EVP_sha256(), nil) != 1
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Feeds bytes (a slice of a larger array is fed without copying).
    public func update(_ bytes: ArraySlice<UInt8>) {
        guard !failed, !finished, !bytes.isEmpty else { return }
        let ok = bytes.withUnsafeBufferPointer { EVP_DigestUpdate(context, $0.baseAddress, $0.count) == 1 }
        if !ok { failed = true }
    }

    /// The 32-byte digest (once), or nil when libcrypto failed: never a partial or made-up digest.
    public func finalize() -> [UInt8]? {
        guard !failed, !finished else { return nil }
        finished = true
        var out = [UInt8](repeating: 0, count: Self.length)
        var length: UInt32 = 0
        let ok = out.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &length) == 1 }
        return ok && length == UInt32(Self.length) ? out : nil
    }

    /// The digest of `bytes`.
    public static func hash(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        let d = SHA256Digest()
        d.update(bytes)
        return d.finalize()
    }

    public static func hash(_ bytes: [UInt8]) -> [UInt8]? { hash(bytes[...]) }
}
