import CLibCrypto
import Support

/// SHA-256 (FIPS 180-4), computed by libcrypto (EVP): never hand-written here.
///
/// Fingerprints workflow and inventory files (so a report names exactly what ran), the blobs the
/// simulated devices receive, the station identity derived from a controller's address, and the HTML
/// report's script.
public enum SHA256 {
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
