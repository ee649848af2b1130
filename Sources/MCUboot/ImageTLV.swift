import BLE

/// A TLV type of an MCUboot image's trailer (open: unknown and vendor types survive).
public struct ImageTLVType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let keyHash = ImageTLVType(rawValue: 0x01)
    public static let publicKey = ImageTLVType(rawValue: 0x02)
    /// SHA-256 of the header, the body and the protected TLV area.
    public static let sha256 = ImageTLVType(rawValue: 0x10)
    public static let sha384 = ImageTLVType(rawValue: 0x11)
    public static let sha512 = ImageTLVType(rawValue: 0x12)
    public static let rsa2048 = ImageTLVType(rawValue: 0x20)
    public static let ecdsaSignature = ImageTLVType(rawValue: 0x22)
    public static let rsa3072 = ImageTLVType(rawValue: 0x23)
    public static let ed25519 = ImageTLVType(rawValue: 0x24)
    public static let dependency = ImageTLVType(rawValue: 0x40)
    public static let securityCounter = ImageTLVType(rawValue: 0x50)
    public static let bootRecord = ImageTLVType(rawValue: 0x60)

    public var description: String {
        switch self {
        case .keyHash: return "KEYHASH"
        case .publicKey: return "PUBKEY"
        case .sha256: return "SHA256"
        case .sha384: return "SHA384"
        case .sha512: return "SHA512"
        case .rsa2048: return "RSA2048_PSS"
        case .ecdsaSignature: return "ECDSA_SIG"
        case .rsa3072: return "RSA3072_PSS"
        case .ed25519: return "ED25519"
        case .dependency: return "DEPENDENCY"
        case .securityCounter: return "SEC_CNT"
        case .bootRecord: return "BOOT_RECORD"
        default: return "0x" + String(rawValue, radix: 16)
        }
    }
}

/// One TLV of a trailer area: type (2 bytes), length (2 bytes), value, little-endian.
public struct ImageTLV: Sendable, Equatable {
    public var type: ImageTLVType
    public var value: [UInt8]
    public init(type: ImageTLVType, value: [UInt8]) {
        self.type = type
        self.value = value
    }

    public func encode(into writer: inout ByteWriter) {
        writer.writeUInt16LE(type.rawValue)
        writer.writeUInt16LE(UInt16(truncatingIfNeeded: value.count))
        writer.write(value)
    }
}

/// A TLV area: its info header (magic, total length including the header) and its TLVs.
///
/// | field | size |
/// |---|---|
/// | it_magic (0x6907 unprotected, 0x6908 protected) | 2 |
/// | it_tlv_tot | 2 |
/// | TLVs: type, length, value | 2, 2, length |
public struct ImageTLVArea: Sendable, Equatable {
    public static let unprotectedMagic: UInt16 = 0x6907
    public static let protectedMagic: UInt16 = 0x6908
    public static let infoSize = 4

    public var isProtected: Bool
    public var tlvs: [ImageTLV]

    public init(isProtected: Bool, tlvs: [ImageTLV]) {
        self.isProtected = isProtected
        self.tlvs = tlvs
    }

    /// The area's size, its info header included.
    public var totalSize: Int { tlvs.reduce(Self.infoSize) { $0 + 4 + $1.value.count } }

    /// Reads the area at the reader's position; it must end exactly where its total says.
    public init(from reader: inout ByteReader, protected: Bool) throws(ImageError) {
        let which = protected ? "protected TLV area" : "TLV area"
        let wanted = protected ? Self.protectedMagic : Self.unprotectedMagic
        let start = reader.offset
        let magic: UInt16, total: UInt16
        do {
            magic = try reader.readUInt16LE("it_magic")
            total = try reader.readUInt16LE("it_tlv_tot")
        } catch {
            throw ImageError.malformed("the \(which) is missing (the file ends at byte \(reader.bytes.count))")
        }
        guard magic == wanted else {
            throw ImageError.malformed("the \(which) at byte \(start) starts with \(String(magic, radix: 16)), not \(String(wanted, radix: 16))")
        }
        guard Int(total) >= Self.infoSize, reader.remaining >= Int(total) - Self.infoSize else {
            throw ImageError.malformed("the \(which) at byte \(start) claims \(total) bytes; \(reader.remaining + Self.infoSize) are there")
        }
        let end = start + Int(total)
        var tlvs: [ImageTLV] = []
        while reader.offset < end {
            do {
                let type = try reader.readUInt16LE("it_type")
                let length = try reader.readUInt16LE("it_len")
                guard reader.offset + Int(length) <= end else {
                    throw ImageError.malformed("TLV \(ImageTLVType(rawValue: type)) at byte \(reader.offset - 4) runs past the end of the \(which)")
                }
                tlvs.append(ImageTLV(type: ImageTLVType(rawValue: type), value: try reader.readBytes(Int(length), "it_value")))
            } catch let e as ImageError {
                throw e
            } catch {
                throw ImageError.malformed("a TLV of the \(which) is cut short at byte \(reader.offset)")
            }
        }
        guard reader.offset == end else {
            throw ImageError.malformed("the \(which)'s TLVs run past its total of \(total) bytes")
        }
        self.isProtected = protected
        self.tlvs = tlvs
    }

    public func encode(into writer: inout ByteWriter) {
        writer.writeUInt16LE(isProtected ? Self.protectedMagic : Self.unprotectedMagic)
        writer.writeUInt16LE(UInt16(truncatingIfNeeded: totalSize))
        for t in tlvs { t.encode(into: &writer) }
    }
}
