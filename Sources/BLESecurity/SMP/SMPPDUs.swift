import BLE

// SMP PDUs (Bluetooth Core v5.4, Vol 3, Part H, 3.5 and 3.6). One struct per PDU, fields in wire order.
// Each decodes from the bytes after the code and encodes the same; every PDU has a fixed length, so
// a short one is `truncated` and a long one is `trailingBytes`. Multi-octet values are little-endian
// on the wire and held here as numbers (`UInt128`, `Key128`, P-256 coordinates most significant first).

/// Pairing Request (3.5.1) and Pairing Response (3.5.2): the pairing feature exchange.
/// | IO Capability | 1 | OOB data flag | 1 | AuthReq | 1 | Maximum Encryption Key Size | 1 |
/// | Initiator Key Distribution | 1 | Responder Key Distribution | 1 |
public struct SMPPairingParameters: Sendable, Hashable {
    public var ioCapability: SMPIOCapability
    /// 0x00 no OOB data, 0x01 OOB data from the remote device present; other values are reserved.
    public var oobDataFlag: UInt8
    public var authRequirements: SMPAuthRequirements
    /// 7...16 octets when valid; kept as sent so that a bad value can be refused by name.
    public var maxEncryptionKeySize: UInt8
    public var initiatorKeys: SMPKeyDistribution
    public var responderKeys: SMPKeyDistribution

    public init(ioCapability: SMPIOCapability, oobDataFlag: UInt8 = 0, authRequirements: SMPAuthRequirements,
                maxEncryptionKeySize: UInt8 = 16, initiatorKeys: SMPKeyDistribution, responderKeys: SMPKeyDistribution) {
        self.ioCapability = ioCapability
        self.oobDataFlag = oobDataFlag
        self.authRequirements = authRequirements
        self.maxEncryptionKeySize = maxEncryptionKeySize
        self.initiatorKeys = initiatorKeys
        self.responderKeys = responderKeys
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        ioCapability = SMPIOCapability(rawValue: try r.readUInt8("Pairing IO capability"))
        oobDataFlag = try r.readUInt8("Pairing OOB data flag")
        authRequirements = SMPAuthRequirements(rawValue: try r.readUInt8("Pairing AuthReq"))
        maxEncryptionKeySize = try r.readUInt8("Pairing maximum encryption key size")
        initiatorKeys = SMPKeyDistribution(rawValue: try r.readUInt8("Pairing initiator key distribution"))
        responderKeys = SMPKeyDistribution(rawValue: try r.readUInt8("Pairing responder key distribution"))
        try r.expectEnd("Pairing Request/Response")
    }

    public func encode(into w: inout ByteWriter) {
        w.write(ioCapability.rawValue); w.write(oobDataFlag); w.write(authRequirements.rawValue)
        w.write(maxEncryptionKeySize); w.write(initiatorKeys.rawValue); w.write(responderKeys.rawValue)
    }

    /// True when the OOB data flag says "OOB authentication data from remote device present".
    public var oobDataPresent: Bool { oobDataFlag == 0x01 }

    /// The 7-octet command (code first on the wire) as c1's 56-bit `preq`/`pres` value (2.2.3).
    public func c1Value(code: SMPCode) -> UInt64 {
        var w = ByteWriter(capacity: 7)
        w.write(code.rawValue)
        encode(into: &w)
        return w.bytes.reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The 24-bit IOcap of f6 (2.2.8): AuthReq ‖ OOB data flag ‖ IO capability.
    public var ioCapValue: UInt32 {
        UInt32(authRequirements.rawValue) << 16 | UInt32(oobDataFlag) << 8 | UInt32(ioCapability.rawValue)
    }
}

/// Pairing Confirm (3.5.3). | Confirm value (Mconfirm/Sconfirm, Ca/Cb, Cai/Cbi) | 16 |
public struct SMPPairingConfirm: Sendable, Hashable {
    public var value: UInt128
    public init(value: UInt128) { self.value = value }
    public init(from r: inout ByteReader) throws(DecodeError) {
        value = try r.readUInt128LE("Pairing Confirm value")
        try r.expectEnd("Pairing Confirm")
    }
    public func encode(into w: inout ByteWriter) { w.writeUInt128LE(value) }
}

/// Pairing Random (3.5.4). | Random value (Mrand/Srand, Na/Nb, Nai/Nbi) | 16 |
public struct SMPPairingRandom: Sendable, Hashable {
    public var value: UInt128
    public init(value: UInt128) { self.value = value }
    public init(from r: inout ByteReader) throws(DecodeError) {
        value = try r.readUInt128LE("Pairing Random value")
        try r.expectEnd("Pairing Random")
    }
    public func encode(into w: inout ByteWriter) { w.writeUInt128LE(value) }
}

/// Pairing Failed (3.5.5). | Reason | 1 |
public struct SMPPairingFailed: Sendable, Hashable {
    public var reason: SMPPairingFailedReason
    public init(reason: SMPPairingFailedReason) { self.reason = reason }
    public init(from r: inout ByteReader) throws(DecodeError) {
        reason = SMPPairingFailedReason(rawValue: try r.readUInt8("Pairing Failed reason"))
        try r.expectEnd("Pairing Failed")
    }
    public func encode(into w: inout ByteWriter) { w.write(reason.rawValue) }
}

/// Pairing Public Key (3.5.6). | Public Key X | 32 | Public Key Y | 32 |
public struct SMPPairingPublicKey: Sendable, Hashable {
    public var key: P256PublicKey
    public init(key: P256PublicKey) { self.key = key }
    public init(from r: inout ByteReader) throws(DecodeError) {
        let x = try r.readBytes(32, "Pairing Public Key X")
        let y = try r.readBytes(32, "Pairing Public Key Y")
        try r.expectEnd("Pairing Public Key")
        guard let key = P256PublicKey(x: x.reversed(), y: y.reversed()) else {
            throw .invalid(field: "Pairing Public Key", reason: "coordinates must be 32 bytes")
        }
        self.key = key
    }
    public func encode(into w: inout ByteWriter) { w.write(key.x.reversed()); w.write(key.y.reversed()) }
}

/// Pairing DHKey Check (3.5.7). | DHKey Check (Ea/Eb) | 16 |
public struct SMPPairingDHKeyCheck: Sendable, Hashable {
    public var value: UInt128
    public init(value: UInt128) { self.value = value }
    public init(from r: inout ByteReader) throws(DecodeError) {
        value = try r.readUInt128LE("Pairing DHKey Check value")
        try r.expectEnd("Pairing DHKey Check")
    }
    public func encode(into w: inout ByteWriter) { w.writeUInt128LE(value) }
}

/// Keypress Notification (3.5.8). | Notification Type | 1 |
public struct SMPKeypressNotification: Sendable, Hashable {
    public var type: SMPKeypressType
    public init(type: SMPKeypressType) { self.type = type }
    public init(from r: inout ByteReader) throws(DecodeError) {
        type = SMPKeypressType(rawValue: try r.readUInt8("Keypress Notification type"))
        try r.expectEnd("Keypress Notification")
    }
    public func encode(into w: inout ByteWriter) { w.write(type.rawValue) }
}

/// Encryption Information (3.6.2). | Long Term Key | 16 |
public struct SMPEncryptionInformation: Sendable, Hashable {
    public var ltk: Key128
    public init(ltk: Key128) { self.ltk = ltk }
    public init(from r: inout ByteReader) throws(DecodeError) {
        ltk = Key128(try r.readUInt128LE("Encryption Information LTK"))
        try r.expectEnd("Encryption Information")
    }
    public func encode(into w: inout ByteWriter) { w.write(ltk.littleEndianBytes) }
}

/// Central Identification (3.6.3). | EDIV | 2 | Rand | 8 |
public struct SMPCentralIdentification: Sendable, Hashable {
    public var ediv: UInt16
    public var rand: UInt64
    public init(ediv: UInt16, rand: UInt64) { self.ediv = ediv; self.rand = rand }
    public init(from r: inout ByteReader) throws(DecodeError) {
        ediv = try r.readUInt16LE("Central Identification EDIV")
        rand = try r.readUInt64LE("Central Identification Rand")
        try r.expectEnd("Central Identification")
    }
    public func encode(into w: inout ByteWriter) { w.writeUInt16LE(ediv); w.writeUInt64LE(rand) }
}

/// Identity Information (3.6.4). | Identity Resolving Key | 16 |
public struct SMPIdentityInformation: Sendable, Hashable {
    public var irk: Key128
    public init(irk: Key128) { self.irk = irk }
    public init(from r: inout ByteReader) throws(DecodeError) {
        irk = Key128(try r.readUInt128LE("Identity Information IRK"))
        try r.expectEnd("Identity Information")
    }
    public func encode(into w: inout ByteWriter) { w.write(irk.littleEndianBytes) }
}

/// Identity Address Information (3.6.5). | AddrType (0x00 public, 0x01 static random) | 1 | BD_ADDR | 6 |
public struct SMPIdentityAddressInformation: Sendable, Hashable {
    public var address: BluetoothAddress
    public init(address: BluetoothAddress) { self.address = address }
    public init(from r: inout ByteReader) throws(DecodeError) {
        let type = try r.readUInt8("Identity Address Information address type")
        let bytes = try r.readBytes(6, "Identity Address Information BD_ADDR")
        try r.expectEnd("Identity Address Information")
        guard let kind = BluetoothAddress.Kind(rawValue: type) else {
            throw .invalid(field: "Identity Address Information address type", reason: "0x\(String(type, radix: 16)) is neither public (0) nor static random (1)")
        }
        guard let address = BluetoothAddress(wireBytes: bytes, kind: kind) else {
            throw .invalid(field: "Identity Address Information BD_ADDR", reason: "not 6 bytes")
        }
        self.address = address
    }
    public func encode(into w: inout ByteWriter) { w.write(address.kind.rawValue); w.write(address.bytes) }
}

/// Signing Information (3.6.6). | Signature Key (CSRK) | 16 |
public struct SMPSigningInformation: Sendable, Hashable {
    public var csrk: Key128
    public init(csrk: Key128) { self.csrk = csrk }
    public init(from r: inout ByteReader) throws(DecodeError) {
        csrk = Key128(try r.readUInt128LE("Signing Information CSRK"))
        try r.expectEnd("Signing Information")
    }
    public func encode(into w: inout ByteWriter) { w.write(csrk.littleEndianBytes) }
}

/// Security Request (3.6.7), sent by a peripheral. | AuthReq | 1 |
public struct SMPSecurityRequest: Sendable, Hashable {
    public var authRequirements: SMPAuthRequirements
    public init(authRequirements: SMPAuthRequirements) { self.authRequirements = authRequirements }
    public init(from r: inout ByteReader) throws(DecodeError) {
        authRequirements = SMPAuthRequirements(rawValue: try r.readUInt8("Security Request AuthReq"))
        try r.expectEnd("Security Request")
    }
    public func encode(into w: inout ByteWriter) { w.write(authRequirements.rawValue) }
}
