import BLE

/// The 32-byte header at the start of every MCUboot image (MCUboot design, "Image format"; all
/// fields little-endian).
///
/// | field | size |
/// |---|---|
/// | ih_magic (0x96f3b83d) | 4 |
/// | ih_load_addr | 4 |
/// | ih_hdr_size | 2 |
/// | ih_protect_tlv_size | 2 |
/// | ih_img_size | 4 |
/// | ih_flags | 4 |
/// | ih_ver: major, minor, revision, build_num | 1, 1, 2, 4 |
/// | _pad1 | 4 |
public struct ImageHeader: Sendable, Equatable {
    public static let magic: UInt32 = 0x96F3_B83D
    public static let size = 32

    public var loadAddress: UInt32
    /// Bytes from the image's start to its body (the header and its padding).
    public var headerSize: UInt16
    /// Bytes of the protected TLV area, its info header included (0: none).
    public var protectedTLVSize: UInt16
    /// Bytes of the body (not counting the header).
    public var imageSize: UInt32
    public var flags: ImageFlags
    public var version: ImageVersion

    public init(loadAddress: UInt32 = 0, headerSize: UInt16, protectedTLVSize: UInt16 = 0, imageSize: UInt32,
                flags: ImageFlags = [], version: ImageVersion) {
        self.loadAddress = loadAddress
        self.headerSize = headerSize
        self.protectedTLVSize = protectedTLVSize
        self.imageSize = imageSize
        self.flags = flags
        self.version = version
    }

    public init(from reader: inout ByteReader) throws(ImageError) {
        let magic = try Self.field { () throws(DecodeError) in try reader.readUInt32LE("ih_magic") }
        guard magic == Self.magic else {
            throw ImageError.notMCUboot("its first bytes are not the MCUboot magic 3db8f396 (found \(Self.hex(magic)))")
        }
        loadAddress = try Self.field { () throws(DecodeError) in try reader.readUInt32LE("ih_load_addr") }
        headerSize = try Self.field { () throws(DecodeError) in try reader.readUInt16LE("ih_hdr_size") }
        protectedTLVSize = try Self.field { () throws(DecodeError) in try reader.readUInt16LE("ih_protect_tlv_size") }
        imageSize = try Self.field { () throws(DecodeError) in try reader.readUInt32LE("ih_img_size") }
        flags = ImageFlags(rawValue: try Self.field { () throws(DecodeError) in try reader.readUInt32LE("ih_flags") })
        version = try Self.field { () throws(DecodeError) in
            ImageVersion(major: try reader.readUInt8("iv_major"), minor: try reader.readUInt8("iv_minor"),
                         revision: try reader.readUInt16LE("iv_revision"), build: try reader.readUInt32LE("iv_build_num"))
        }
        _ = try Self.field { () throws(DecodeError) in try reader.readUInt32LE("_pad1") }
        guard Int(headerSize) >= Self.size else {
            throw ImageError.malformed("header size \(headerSize) is smaller than the 32-byte header")
        }
    }

    /// A header field; a file too short for it is not an MCUboot image.
    private static func field<T>(_ read: () throws(DecodeError) -> T) throws(ImageError) -> T {
        do {
            return try read()
        } catch {
            throw ImageError.notMCUboot("the file is too short for an MCUboot header (\(error))")
        }
    }

    public func encode(into writer: inout ByteWriter) {
        writer.writeUInt32LE(Self.magic)
        writer.writeUInt32LE(loadAddress)
        writer.writeUInt16LE(headerSize)
        writer.writeUInt16LE(protectedTLVSize)
        writer.writeUInt32LE(imageSize)
        writer.writeUInt32LE(flags.rawValue)
        writer.write(version.major)
        writer.write(version.minor)
        writer.writeUInt16LE(version.revision)
        writer.writeUInt32LE(version.build)
        writer.writeUInt32LE(0)
    }

    private static func hex(_ v: UInt32) -> String {
        [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v >> 16), UInt8(truncatingIfNeeded: v >> 24)].hexString
    }
}

/// The header's `ih_flags` (open: unknown bits survive).
public struct ImageFlags: OptionSet, Sendable, Hashable {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let pic = ImageFlags(rawValue: 0x01)
    public static let encryptedAES128 = ImageFlags(rawValue: 0x04)
    public static let encryptedAES256 = ImageFlags(rawValue: 0x08)
    /// A split image's application part: MCUboot never boots it by itself.
    public static let nonBootable = ImageFlags(rawValue: 0x10)
    public static let ramLoad = ImageFlags(rawValue: 0x20)
    public static let romFixed = ImageFlags(rawValue: 0x100)
}
