import BLE

// The protocomm session messages: ESP-IDF components/protocomm/proto (constants.proto, session.proto,
// sec0.proto, sec1.proto, sec2.proto). Each message lists its fields in wire order:
// | number | name | type |.

/// `Status` (constants.proto): the outcome a device puts in its responses.
public struct ProtocommStatus: ProtoEnum {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let success = Self(rawValue: 0)
    public static let invalidSecScheme = Self(rawValue: 1)
    public static let invalidProto = Self(rawValue: 2)
    public static let tooManySessions = Self(rawValue: 3)
    public static let invalidArgument = Self(rawValue: 4)
    public static let internalError = Self(rawValue: 5)
    public static let cryptoError = Self(rawValue: 6)
    public static let invalidSession = Self(rawValue: 7)
    public static let names: [Int32: String] = [
        0: "Success", 1: "InvalidSecScheme", 2: "InvalidProto", 3: "TooManySessions",
        4: "InvalidArgument", 5: "InternalError", 6: "CryptoError", 7: "InvalidSession",
    ]
}

/// `SecSchemeVersion` (session.proto): 0 none, 1 X25519 + AES-256-CTR, 2 SRP6a + AES-256-GCM.
public struct SecSchemeVersion: ProtoEnum {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let scheme0 = Self(rawValue: 0)
    public static let scheme1 = Self(rawValue: 1)
    public static let scheme2 = Self(rawValue: 2)
    public static let names: [Int32: String] = [0: "SecScheme0", 1: "SecScheme1", 2: "SecScheme2"]
}

/// `SessionData` (session.proto): what the `prov-session` endpoint carries.
///
/// | 2 | sec_ver | SecSchemeVersion |
/// | 10 | sec0 | Sec0Payload (oneof proto) |
/// | 11 | sec1 | Sec1Payload (oneof proto) |
/// | 12 | sec2 | Sec2Payload (oneof proto) |
public struct SessionData: ProtoMessage {
    public enum Proto: Sendable, Equatable {
        case sec0(Sec0Payload)
        case sec1(Sec1Payload)
        case sec2(Sec2Payload)
    }

    public var secVer = SecSchemeVersion.scheme0
    public var proto: Proto?

    public init() {}
    public init(secVer: SecSchemeVersion, proto: Proto?) {
        self.secVer = secVer
        self.proto = proto
    }

    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 2: if let v = value.int32 { secVer = SecSchemeVersion(rawValue: v) }
        case 10: if let m: Sec0Payload = try value.message() { proto = .sec0(m) }
        case 11: if let m: Sec1Payload = try value.message() { proto = .sec1(m) }
        case 12: if let m: Sec2Payload = try value.message() { proto = .sec2(m) }
        default: break
        }
    }

    public func encode(into w: inout ProtoWriter) {
        w.int32(2, secVer.rawValue)
        switch proto {
        case .sec0(let m): w.message(10, m)
        case .sec1(let m): w.message(11, m)
        case .sec2(let m): w.message(12, m)
        case nil: break
        }
    }
}

/// An empty message (`S0SessionCmd`, `CmdGetStatus`, `CmdApplyConfig`, `RespScanStart`, `CmdScanStatus`,
/// the wifi_ctrl commands and responses): no fields; whatever arrives is skipped.
public struct EmptyMessage: ProtoMessage {
    public init() {}
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {}
    public func encode(into w: inout ProtoWriter) {}
}

/// A message whose only field is `Status status = 1` (`S0SessionResp`, `RespSetConfig`, `RespApplyConfig`).
public struct StatusMessage: ProtoMessage {
    public var status = ProtocommStatus.success
    public init() {}
    public init(status: ProtocommStatus) { self.status = status }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        if field == 1, let v = value.int32 { status = ProtocommStatus(rawValue: v) }
    }
    public func encode(into w: inout ProtoWriter) { w.int32(1, status.rawValue) }
}

// MARK: - Security 0 (sec0.proto)

/// `Sec0Payload`: | 1 | msg | Sec0MsgType (0 command, 1 response) | 20 | sc | S0SessionCmd | 21 | sr | S0SessionResp |
public struct Sec0Payload: ProtoMessage {
    public enum Payload: Sendable, Equatable {
        case sc(EmptyMessage)
        case sr(StatusMessage)
    }

    public var msg: Int32 = 0
    public var payload: Payload?

    public init() {}
    public init(msg: Int32, payload: Payload?) {
        self.msg = msg
        self.payload = payload
    }

    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let v = value.int32 { msg = v }
        case 20: if let m: EmptyMessage = try value.message() { payload = .sc(m) }
        case 21: if let m: StatusMessage = try value.message() { payload = .sr(m) }
        default: break
        }
    }

    public func encode(into w: inout ProtoWriter) {
        w.int32(1, msg)
        switch payload {
        case .sc(let m): w.message(20, m)
        case .sr(let m): w.message(21, m)
        case nil: break
        }
    }
}

// MARK: - Security 1 (sec1.proto)

/// `SessionCmd0`: | 1 | client_pubkey | bytes |
public struct Sec1Command0: ProtoMessage {
    public var clientPubkey: [UInt8] = []
    public init() {}
    public init(clientPubkey: [UInt8]) { self.clientPubkey = clientPubkey }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        if field == 1, let b = value.bytes { clientPubkey = b }
    }
    public func encode(into w: inout ProtoWriter) { w.bytes(1, clientPubkey) }
}

/// `SessionResp0`: | 1 | status | Status | 2 | device_pubkey | bytes | 3 | device_random | bytes |
public struct Sec1Response0: ProtoMessage {
    public var status = ProtocommStatus.success
    public var devicePubkey: [UInt8] = []
    public var deviceRandom: [UInt8] = []
    public init() {}
    public init(status: ProtocommStatus, devicePubkey: [UInt8], deviceRandom: [UInt8]) {
        self.status = status
        self.devicePubkey = devicePubkey
        self.deviceRandom = deviceRandom
    }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let v = value.int32 { status = ProtocommStatus(rawValue: v) }
        case 2: if let b = value.bytes { devicePubkey = b }
        case 3: if let b = value.bytes { deviceRandom = b }
        default: break
        }
    }
    public func encode(into w: inout ProtoWriter) {
        w.int32(1, status.rawValue)
        w.bytes(2, devicePubkey)
        w.bytes(3, deviceRandom)
    }
}

/// `SessionCmd1`: | 2 | client_verify_data | bytes |
public struct Sec1Command1: ProtoMessage {
    public var clientVerifyData: [UInt8] = []
    public init() {}
    public init(clientVerifyData: [UInt8]) { self.clientVerifyData = clientVerifyData }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        if field == 2, let b = value.bytes { clientVerifyData = b }
    }
    public func encode(into w: inout ProtoWriter) { w.bytes(2, clientVerifyData) }
}

/// `SessionResp1`: | 1 | status | Status | 3 | device_verify_data | bytes |
public struct Sec1Response1: ProtoMessage {
    public var status = ProtocommStatus.success
    public var deviceVerifyData: [UInt8] = []
    public init() {}
    public init(status: ProtocommStatus, deviceVerifyData: [UInt8]) {
        self.status = status
        self.deviceVerifyData = deviceVerifyData
    }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let v = value.int32 { status = ProtocommStatus(rawValue: v) }
        case 3: if let b = value.bytes { deviceVerifyData = b }
        default: break
        }
    }
    public func encode(into w: inout ProtoWriter) {
        w.int32(1, status.rawValue)
        w.bytes(3, deviceVerifyData)
    }
}

/// The messages of one security scheme's handshake (`Sec1`, `Sec2`): its two commands and two responses.
public protocol SecurityScheme: Sendable {
    associatedtype Command0: ProtoMessage
    associatedtype Response0: ProtoMessage
    associatedtype Command1: ProtoMessage
    associatedtype Response1: ProtoMessage
}

/// Security 1 (sec1.proto).
public enum Sec1: SecurityScheme {
    public typealias Command0 = Sec1Command0
    public typealias Response0 = Sec1Response0
    public typealias Command1 = Sec1Command1
    public typealias Response1 = Sec1Response1
}

/// Security 2 (sec2.proto).
public enum Sec2: SecurityScheme {
    public typealias Command0 = Sec2Command0
    public typealias Response0 = Sec2Response0
    public typealias Command1 = Sec2Command1
    public typealias Response1 = Sec2Response1
}

/// `Sec1Payload` and `Sec2Payload`, one shape: | 1 | msg | Sec1MsgType / Sec2MsgType | 20 | sc0 |
/// 21 | sr0 | 22 | sc1 | 23 | sr1 | (oneof payload). The message types: 0 Command0, 1 Response0,
/// 2 Command1, 3 Response1.
public struct SecPayload<Scheme: SecurityScheme>: ProtoMessage {
    public enum Payload: Sendable, Equatable {
        case sc0(Scheme.Command0)
        case sr0(Scheme.Response0)
        case sc1(Scheme.Command1)
        case sr1(Scheme.Response1)
    }

    public var msg: Int32 = 0
    public var payload: Payload?

    public init() {}
    public init(msg: Int32, payload: Payload?) {
        self.msg = msg
        self.payload = payload
    }

    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let v = value.int32 { msg = v }
        case 20: if let m: Scheme.Command0 = try value.message() { payload = .sc0(m) }
        case 21: if let m: Scheme.Response0 = try value.message() { payload = .sr0(m) }
        case 22: if let m: Scheme.Command1 = try value.message() { payload = .sc1(m) }
        case 23: if let m: Scheme.Response1 = try value.message() { payload = .sr1(m) }
        default: break
        }
    }

    public func encode(into w: inout ProtoWriter) {
        w.int32(1, msg)
        switch payload {
        case .sc0(let m): w.message(20, m)
        case .sr0(let m): w.message(21, m)
        case .sc1(let m): w.message(22, m)
        case .sr1(let m): w.message(23, m)
        case nil: break
        }
    }
}

public typealias Sec1Payload = SecPayload<Sec1>
public typealias Sec2Payload = SecPayload<Sec2>

// MARK: - Security 2 (sec2.proto)

/// `S2SessionCmd0`: | 1 | client_username | bytes | 2 | client_pubkey | bytes |
public struct Sec2Command0: ProtoMessage {
    public var clientUsername: [UInt8] = []
    public var clientPubkey: [UInt8] = []
    public init() {}
    public init(clientUsername: [UInt8], clientPubkey: [UInt8]) {
        self.clientUsername = clientUsername
        self.clientPubkey = clientPubkey
    }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let b = value.bytes { clientUsername = b }
        case 2: if let b = value.bytes { clientPubkey = b }
        default: break
        }
    }
    public func encode(into w: inout ProtoWriter) {
        w.bytes(1, clientUsername)
        w.bytes(2, clientPubkey)
    }
}

/// `S2SessionResp0`: | 1 | status | Status | 2 | device_pubkey | bytes | 3 | device_salt | bytes |
public struct Sec2Response0: ProtoMessage {
    public var status = ProtocommStatus.success
    public var devicePubkey: [UInt8] = []
    public var deviceSalt: [UInt8] = []
    public init() {}
    public init(status: ProtocommStatus, devicePubkey: [UInt8], deviceSalt: [UInt8]) {
        self.status = status
        self.devicePubkey = devicePubkey
        self.deviceSalt = deviceSalt
    }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let v = value.int32 { status = ProtocommStatus(rawValue: v) }
        case 2: if let b = value.bytes { devicePubkey = b }
        case 3: if let b = value.bytes { deviceSalt = b }
        default: break
        }
    }
    public func encode(into w: inout ProtoWriter) {
        w.int32(1, status.rawValue)
        w.bytes(2, devicePubkey)
        w.bytes(3, deviceSalt)
    }
}

/// `S2SessionCmd1`: | 1 | client_proof | bytes |
public struct Sec2Command1: ProtoMessage {
    public var clientProof: [UInt8] = []
    public init() {}
    public init(clientProof: [UInt8]) { self.clientProof = clientProof }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        if field == 1, let b = value.bytes { clientProof = b }
    }
    public func encode(into w: inout ProtoWriter) { w.bytes(1, clientProof) }
}

/// `S2SessionResp1`: | 1 | status | Status | 2 | device_proof | bytes | 3 | device_nonce | bytes |
public struct Sec2Response1: ProtoMessage {
    public var status = ProtocommStatus.success
    public var deviceProof: [UInt8] = []
    public var deviceNonce: [UInt8] = []
    public init() {}
    public init(status: ProtocommStatus, deviceProof: [UInt8], deviceNonce: [UInt8]) {
        self.status = status
        self.deviceProof = deviceProof
        self.deviceNonce = deviceNonce
    }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let v = value.int32 { status = ProtocommStatus(rawValue: v) }
        case 2: if let b = value.bytes { deviceProof = b }
        case 3: if let b = value.bytes { deviceNonce = b }
        default: break
        }
    }
    public func encode(into w: inout ProtoWriter) {
        w.int32(1, status.rawValue)
        w.bytes(2, deviceProof)
        w.bytes(3, deviceNonce)
    }
}

