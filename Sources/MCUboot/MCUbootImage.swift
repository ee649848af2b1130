import Digests
import BLE

/// An MCUboot image file read whole and checked: header, body, protected and unprotected TLV areas,
/// and the SHA-256 TLV verified against the bytes it covers (MCUboot design, "Image format").
///
/// ```
/// | header (ih_hdr_size) | body (ih_img_size) | protected TLVs (ih_protect_tlv_size) | TLVs (it_tlv_tot) |
///  \_____________________ covered by the SHA-256 TLV ______________________________/
/// ```
/// Two digests matter and both are computed once here: the SHA-256 TLV (`hash`), which MCUmgr's image
/// state reports as a slot's `hash`, and the SHA-256 of the whole file (`fileSHA256`), which an upload
/// names as its `sha` so that a device can continue an upload it has seen before.
public struct MCUbootImage: Sendable, Equatable {
    /// The file's bytes, exactly as they are uploaded.
    public let bytes: [UInt8]
    public let header: ImageHeader
    /// The protected TLV area, if the header declares one.
    public let protectedTLVs: ImageTLVArea?
    public let tlvs: ImageTLVArea
    /// The SHA-256 TLV: the image's identity on a device (the `hash` of its slot).
    public let hash: [UInt8]
    /// SHA-256 of the whole file: the upload's `sha`, which lets a device continue an upload it saw before.
    public let fileSHA256: [UInt8]

    public var version: ImageVersion { header.version }

    /// Reads and verifies an image; throws `ImageError` for anything that is not a whole, intact
    /// MCUboot image (trailing bytes after the last TLV area included).
    public init(bytes: [UInt8]) throws(ImageError) {
        var reader = ByteReader(bytes)
        let header = try ImageHeader(from: &reader)
        let bodyEnd = Int(header.headerSize) + Int(header.imageSize)
        guard bodyEnd <= bytes.count else {
            throw ImageError.malformed("header and body take \(bodyEnd) bytes; the file has \(bytes.count)")
        }
        reader = ByteReader(bytes)
        do {
            _ = try reader.readBytes(bodyEnd, "body")
        } catch {
            throw ImageError.malformed("the body is cut short")
        }
        var protected: ImageTLVArea?
        if header.protectedTLVSize > 0 {
            let area = try ImageTLVArea(from: &reader, protected: true)
            guard area.totalSize == Int(header.protectedTLVSize) else {
                throw ImageError.malformed("the protected TLV area is \(area.totalSize) bytes; the header says \(header.protectedTLVSize)")
            }
            protected = area
        }
        let coveredEnd = reader.offset
        let tlvs = try ImageTLVArea(from: &reader, protected: false)
        guard reader.isAtEnd else {
            throw ImageError.malformed("\(reader.remaining) unexpected byte(s) after the TLV area")
        }
        let hashes = tlvs.tlvs.filter { $0.type == .sha256 }
        guard let hashTLV = hashes.first else { throw ImageError.noHash }
        guard hashes.count == 1 else { throw ImageError.malformed("the TLV area holds \(hashes.count) SHA-256 TLVs") }
        guard hashTLV.value.count == SHA256.length else {
            throw ImageError.malformed("the SHA-256 TLV is \(hashTLV.value.count) bytes, not 32")
        }
        let computed = SHA256.hash(bytes[..<coveredEnd]), whole = SHA256.hash(bytes)
        guard computed == hashTLV.value else { throw ImageError.hashMismatch(expected: hashTLV.value, computed: computed) }
        self.bytes = bytes
        self.header = header
        self.protectedTLVs = protected
        self.tlvs = tlvs
        self.hash = computed
        self.fileSHA256 = whole
    }

    /// Builds an image around `body` (for the simulator's demo images and tests): a header padded to
    /// `headerSize`, optional protected TLVs, and a SHA-256 TLV computed over them.
    public static func build(body: [UInt8], version: ImageVersion, headerSize: UInt16 = 32, flags: ImageFlags = [],
                             protectedTLVs: [ImageTLV] = [], extraTLVs: [ImageTLV] = []) throws(ImageError) -> MCUbootImage {
        let protectedArea = protectedTLVs.isEmpty ? nil : ImageTLVArea(isProtected: true, tlvs: protectedTLVs)
        let header = ImageHeader(headerSize: max(headerSize, UInt16(ImageHeader.size)),
                                 protectedTLVSize: UInt16(truncatingIfNeeded: protectedArea?.totalSize ?? 0),
                                 imageSize: UInt32(truncatingIfNeeded: body.count), flags: flags, version: version)
        var w = ByteWriter(capacity: body.count + 256)
        header.encode(into: &w)
        w.write([UInt8](repeating: 0, count: Int(header.headerSize) - ImageHeader.size))
        w.write(body)
        protectedArea?.encode(into: &w)
        let digest = SHA256.hash(w.bytes)
        ImageTLVArea(isProtected: false, tlvs: [ImageTLV(type: .sha256, value: digest)] + extraTLVs).encode(into: &w)
        return try MCUbootImage(bytes: w.bytes)
    }
}
