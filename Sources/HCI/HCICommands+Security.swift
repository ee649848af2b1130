import BLE
import BLESecurity

// The HCI commands of link encryption (the central's side, and the peripheral's refusal). Keys are
// `Key128`: printing a command shows no key.

/// HCI_LE_Enable_Encryption (Core v5.4 Vol 4 Part E 7.8.24): the central starts (or restarts) encryption
/// with a key. Answered with Command Status; the outcome comes as Encryption Change (or Encryption Key
/// Refresh Complete on an encrypted link).
///
/// | Parameter | Size |
/// |---|---|
/// | Connection_Handle | 2 |
/// | Random_Number | 8 |
/// | Encrypted_Diversifier | 2 |
/// | Long_Term_Key | 16 |
public struct LEEnableEncryptionCommand: HCICommand, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public static let opcode = HCIOpcode.leEnableEncryption
    public var handle: UInt16
    /// Rand and EDIV identify a legacy LTK to the peripheral; both 0 for an LE Secure Connections key or an STK.
    public var rand: UInt64
    public var ediv: UInt16
    public var ltk: Key128

    public init(handle: UInt16, rand: UInt64, ediv: UInt16, ltk: Key128) {
        self.handle = handle
        self.rand = rand
        self.ediv = ediv
        self.ltk = ltk
    }

    /// The command for a key from the Security Manager.
    public init(handle: UInt16, key: SMPEncryptionKey) {
        self.init(handle: handle, rand: key.rand, ediv: key.ediv, ltk: key.ltk)
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        handle = try r.readUInt16LE("Connection_Handle") & 0x0FFF
        rand = try r.readUInt64LE("Random_Number")
        ediv = try r.readUInt16LE("Encrypted_Diversifier")
        ltk = Key128(try r.readUInt128LE("Long_Term_Key"))
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt16LE(handle)
        w.writeUInt64LE(rand)
        w.writeUInt16LE(ediv)
        w.writeUInt128LE(ltk.value)
    }

    public var description: String { "LE Enable Encryption (handle 0x\(String(handle, radix: 16)), key redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["handle": handle]) }
}

/// HCI_LE_Long_Term_Key_Request_Negative_Reply (Vol 4 Part E 7.8.26): this side has no key for the
/// link (the host is never a peripheral; a controller that asks anyway is told so).
///
/// | Parameter | Size |
/// |---|---|
/// | Connection_Handle | 2 |
public struct LELongTermKeyRequestNegativeReplyCommand: HCICommand {
    public static let opcode = HCIOpcode.leLongTermKeyRequestNegativeReply
    public var handle: UInt16

    public init(handle: UInt16) { self.handle = handle }

    public init(from r: inout ByteReader) throws(DecodeError) {
        handle = try r.readUInt16LE("Connection_Handle") & 0x0FFF
    }

    public func encode(into w: inout ByteWriter) { w.writeUInt16LE(handle) }
}

/// HCI_Encryption_Change [v1] (Vol 4 Part E 7.7.8) and [v2] (7.7.8, event 0x59), which adds the key size.
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | Connection_Handle | 2 |
/// | Encryption_Enabled | 1 |
/// | Encryption_Key_Size (v2 only) | 1 |
public struct EncryptionChangeEvent: Sendable, Equatable {
    public var status: HCIStatus
    public var handle: UInt16
    /// 0x00 off; 0x01 on (AES-CCM on LE); 0x02 on with AES-CCM on BR/EDR. Any non-zero value is "on".
    public var enabled: UInt8
    /// The key size in octets (v2 only).
    public var keySize: UInt8?

    public init(status: HCIStatus = .success, handle: UInt16, enabled: UInt8, keySize: UInt8? = nil) {
        self.status = status
        self.handle = handle
        self.enabled = enabled
        self.keySize = keySize
    }

    public init(from r: inout ByteReader, v2: Bool) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        handle = try r.readUInt16LE("Connection_Handle") & 0x0FFF
        enabled = try r.readUInt8("Encryption_Enabled")
        keySize = v2 ? try r.readUInt8("Encryption_Key_Size") : nil
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.writeUInt16LE(handle)
        w.write(enabled)
        if let keySize { w.write(keySize) }
    }

    public var isEncrypted: Bool { status == .success && enabled != 0 }
}

/// HCI_Encryption_Key_Refresh_Complete (Vol 4 Part E 7.7.39): encryption restarted on an encrypted link.
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | Connection_Handle | 2 |
public struct EncryptionKeyRefreshCompleteEvent: Sendable, Equatable {
    public var status: HCIStatus
    public var handle: UInt16

    public init(status: HCIStatus = .success, handle: UInt16) {
        self.status = status
        self.handle = handle
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        handle = try r.readUInt16LE("Connection_Handle") & 0x0FFF
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.writeUInt16LE(handle)
    }
}

/// HCI_LE_Long_Term_Key_Request (Vol 4 Part E 7.7.65.5): the peer started encryption with this side
/// as peripheral.
///
/// | Parameter | Size |
/// |---|---|
/// | Connection_Handle | 2 |
/// | Random_Number | 8 |
/// | Encrypted_Diversifier | 2 |
public struct LELongTermKeyRequestEvent: Sendable, Equatable {
    public var handle: UInt16
    public var rand: UInt64
    public var ediv: UInt16

    public init(handle: UInt16, rand: UInt64, ediv: UInt16) {
        self.handle = handle
        self.rand = rand
        self.ediv = ediv
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        handle = try r.readUInt16LE("Connection_Handle") & 0x0FFF
        rand = try r.readUInt64LE("Random_Number")
        ediv = try r.readUInt16LE("Encrypted_Diversifier")
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt16LE(handle)
        w.writeUInt64LE(rand)
        w.writeUInt16LE(ediv)
    }
}
