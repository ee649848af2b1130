import CLibCrypto
import Support

/// SHA-256 (FIPS 180-4), computed by libcrypto (EVP): never hand-written here.
///
/// Fingerprints workflow and inventory files (so a report names exactly what ran), the blobs the
/// simulated devices receive, the station identity derived from a controller's address, and the HTML
/// report's script.
public struct SHA256: Sendable {
    /// A digest's length in bytes.
    public static let length = 32

    /// A running digest's libcrypto context, copied before it is changed when shared (value semantics).
    private final class Context: @unchecked Sendable {  // reason: the context is only touched through the owning value, which copies it before mutating a shared one
        let ctx: OpaquePointer

        init() {
            guard let ctx = EVP_MD_CTX_new(), EVP_DigestInit_ex(ctx, EVP_sha256(), nil) == 1 else {
                preconditionFailure("libcrypto could not start a SHA-256 digest")
            }
            self.ctx = ctx
        }

        init(copying other: Context) {
            guard let ctx = EVP_MD_CTX_new(), EVP_MD_CTX_copy_ex(ctx, other.ctx) == 1 else {
                preconditionFailure("libcrypto could not copy a SHA-256 digest")
            }
            self.ctx = ctx
        }

        deinit { EVP_MD_CTX_free(ctx) }
    }

    private var context = Context()

    /// A digest fed in parts (`update`), read with `finalize`.
    public init() {}

    /// Feeds more bytes.
    public mutating func update<Bytes: Collection>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        if !isKnownUniquelyReferenced(&context) { context = Context(copying: context) }
        let ctx = context.ctx
        let fed: Int32? = bytes.withContiguousStorageIfAvailable { b in EVP_DigestUpdate(ctx, b.baseAddress, b.count) }
        let ok = fed ?? Array(bytes).withUnsafeBytes { EVP_DigestUpdate(ctx, $0.baseAddress, $0.count) }
        precondition(ok == 1, "libcrypto could not feed a SHA-256 digest")
    }

    /// The digest of everything fed so far (the value can go on being fed afterwards).
    public mutating func finalize() -> [UInt8] {
        let done = Context(copying: context)
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = out.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(done.ctx, $0.baseAddress, &length) }
        precondition(ok == 1 && length == 32, "libcrypto could not finish a SHA-256 digest")
        return out
    }

    /// The 32-byte digest of `bytes`.
    public static func hash<Bytes: Collection>(_ bytes: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        if let digest = bytes.withContiguousStorageIfAvailable({ digest(UnsafeRawBufferPointer($0)) }) { return digest }
        return Array(bytes).withUnsafeBytes { digest($0) }
    }

    /// The digest of `bytes` as 64 lower-case hex digits.
    public static func hexDigest<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        hash(bytes).hexString
    }

    private static func digest(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        // An empty buffer may have no address; libcrypto wants one even for zero bytes.
        let empty: UInt8 = 0
        let ok = withUnsafePointer(to: empty) { fallback in
            out.withUnsafeMutableBufferPointer { o in
                EVP_Digest(bytes.baseAddress ?? UnsafeRawPointer(fallback), bytes.count, o.baseAddress, &length, EVP_sha256(), nil)
            }
        }
        // EVP_Digest with the built-in SHA-256 fails only when libcrypto cannot allocate its context: the
        // process cannot go on meaningfully (no input reaches this; it is not a parser).
        precondition(ok == 1 && length == 32, "libcrypto could not compute SHA-256")
        return out
    }
}
