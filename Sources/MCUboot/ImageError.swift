import BLE

/// Why a file cannot be sent as an MCUboot image.
public enum ImageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not an MCUboot image at all (wrong magic, too short for a header).
    case notMCUboot(String)
    /// An MCUboot header whose sizes or TLV areas do not hold together.
    case malformed(String)
    /// No SHA-256 TLV: the image cannot be checked, nor matched against a device's slots.
    case noHash
    /// The SHA-256 TLV does not match the header, body and protected TLVs.
    case hashMismatch(expected: [UInt8], computed: [UInt8])
    /// libcrypto could not compute the digest.

    public var description: String {
        switch self {
        case .notMCUboot(let why): return "not an MCUboot image: \(why)"
        case .malformed(let why): return "malformed MCUboot image: \(why)"
        case .noHash: return "the MCUboot image has no SHA-256 TLV"
        case .hashMismatch(let expected, let computed):
            return "the image's SHA-256 TLV is \(expected.hexString) but its contents hash to \(computed.hexString): the file is damaged"
        }
    }
}
