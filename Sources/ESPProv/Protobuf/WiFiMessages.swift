import BLE

// The Wi-Fi provisioning messages: ESP-IDF components/wifi_provisioning/proto (wifi_constants.proto,
// wifi_config.proto, wifi_scan.proto, wifi_ctrl.proto; network_provisioning keeps the same numbers).
// Each message lists its fields in wire order: | number | name | type |.

/// `WifiStationState`: 0 Connected, 1 Connecting, 2 Disconnected, 3 ConnectionFailed.
public struct WiFiStationState: ProtoEnum {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let connected = Self(rawValue: 0)
    public static let connecting = Self(rawValue: 1)
    public static let disconnected = Self(rawValue: 2)
    public static let connectionFailed = Self(rawValue: 3)
    public static let names: [Int32: String] = [0: "connected", 1: "connecting", 2: "disconnected", 3: "connection_failed"]
}

/// `WifiConnectFailedReason`: 0 AuthError, 1 NetworkNotFound.
public struct WiFiConnectFailedReason: ProtoEnum {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let authError = Self(rawValue: 0)
    public static let networkNotFound = Self(rawValue: 1)
    public static let names: [Int32: String] = [0: "auth_error", 1: "network_not_found"]
}

/// `WifiAuthMode`: Open, WEP, WPA_PSK, WPA2_PSK, WPA_WPA2_PSK, WPA2_ENTERPRISE, WPA3_PSK, WPA2_WPA3_PSK.
public struct WiFiAuthMode: ProtoEnum {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let open = Self(rawValue: 0)
    public static let wep = Self(rawValue: 1)
    public static let wpaPSK = Self(rawValue: 2)
    public static let wpa2PSK = Self(rawValue: 3)
    public static let wpaWPA2PSK = Self(rawValue: 4)
    public static let wpa2Enterprise = Self(rawValue: 5)
    public static let wpa3PSK = Self(rawValue: 6)
    public static let wpa2WPA3PSK = Self(rawValue: 7)
    public static let names: [Int32: String] = [
        0: "open", 1: "wep", 2: "wpa_psk", 3: "wpa2_psk", 4: "wpa_wpa2_psk", 5: "wpa2_enterprise",
        6: "wpa3_psk", 7: "wpa2_wpa3_psk",
    ]
}

/// `WifiAttemptFailed`: | 1 | attempts_remaining | uint32 |
public struct WiFiAttemptFailed: ProtoMessage {
    public var attemptsRemaining: UInt32 = 0
    public init() {}
    public init(attemptsRemaining: UInt32) { self.attemptsRemaining = attemptsRemaining }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        if field == 1, let v = value.uint32 { attemptsRemaining = v }
    }
    public func encode(into w: inout ProtoWriter) { w.uint32(1, attemptsRemaining) }
}

/// `WifiConnectedState`: | 1 | ip4_addr | string | 2 | auth_mode | WifiAuthMode | 3 | ssid | bytes |
/// | 4 | bssid | bytes | 5 | channel | int32 |
public struct WiFiConnectedState: ProtoMessage {
    public var ip4Addr = ""
    public var authMode = WiFiAuthMode.open
    public var ssid: [UInt8] = []
    public var bssid: [UInt8] = []
    public var channel: Int32 = 0
    public init() {}
    public init(ip4Addr: String, authMode: WiFiAuthMode, ssid: [UInt8], bssid: [UInt8], channel: Int32) {
        self.ip4Addr = ip4Addr
        self.authMode = authMode
        self.ssid = ssid
        self.bssid = bssid
        self.channel = channel
    }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let s = try value.string("WifiConnectedState.ip4_addr") { ip4Addr = s }
        case 2: if let v = value.int32 { authMode = WiFiAuthMode(rawValue: v) }
        case 3: if let b = value.bytes { ssid = b }
        case 4: if let b = value.bytes { bssid = b }
        case 5: if let v = value.int32 { channel = v }
        default: break
        }
    }
    public func encode(into w: inout ProtoWriter) {
        w.string(1, ip4Addr)
        w.int32(2, authMode.rawValue)
        w.bytes(3, ssid)
        w.bytes(4, bssid)
        w.int32(5, channel)
    }
}

// MARK: - wifi_config.proto (endpoint prov-config)

/// `RespGetStatus`: | 1 | status | Status | 2 | sta_state | WifiStationState | 10 | fail_reason |
/// WifiConnectFailedReason | 11 | connected | WifiConnectedState | 12 | attempt_failed | WifiAttemptFailed |
/// (10–12: oneof state)
public struct WiFiStatusResponse: ProtoMessage {
    public enum State: Sendable, Equatable {
        case failReason(WiFiConnectFailedReason)
        case connected(WiFiConnectedState)
        case attemptFailed(WiFiAttemptFailed)
    }

    public var status = ProtocommStatus.success
    public var staState = WiFiStationState.connected
    public var state: State?

    public init() {}
    public init(status: ProtocommStatus, staState: WiFiStationState, state: State?) {
        self.status = status
        self.staState = staState
        self.state = state
    }

    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let v = value.int32 { status = ProtocommStatus(rawValue: v) }
        case 2: if let v = value.int32 { staState = WiFiStationState(rawValue: v) }
        case 10: if let v = value.int32 { state = .failReason(WiFiConnectFailedReason(rawValue: v)) }
        case 11: if let m: WiFiConnectedState = try value.message() { state = .connected(m) }
        case 12: if let m: WiFiAttemptFailed = try value.message() { state = .attemptFailed(m) }
        default: break
        }
    }

    public func encode(into w: inout ProtoWriter) {
        w.int32(1, status.rawValue)
        w.int32(2, staState.rawValue)
        switch state {
        case .failReason(let r): w.int32(10, r.rawValue, always: true)
        case .connected(let m): w.message(11, m)
        case .attemptFailed(let m): w.message(12, m)
        case nil: break
        }
    }
}

/// `CmdSetConfig`: | 1 | ssid | bytes | 2 | passphrase | bytes | 3 | bssid | bytes | 4 | channel | int32 |
///
/// Carries the passphrase: printing it shows no byte of it.
public struct WiFiSetConfigCommand: ProtoMessage, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var ssid: [UInt8] = []
    public var passphrase: [UInt8] = []
    public var bssid: [UInt8] = []
    public var channel: Int32 = 0
    public init() {}
    public init(ssid: [UInt8], passphrase: [UInt8], bssid: [UInt8] = [], channel: Int32 = 0) {
        self.ssid = ssid
        self.passphrase = passphrase
        self.bssid = bssid
        self.channel = channel
    }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let b = value.bytes { ssid = b }
        case 2: if let b = value.bytes { passphrase = b }
        case 3: if let b = value.bytes { bssid = b }
        case 4: if let v = value.int32 { channel = v }
        default: break
        }
    }
    public func encode(into w: inout ProtoWriter) {
        w.bytes(1, ssid)
        w.bytes(2, passphrase)
        w.bytes(3, bssid)
        w.int32(4, channel)
    }
    public var description: String { "CmdSetConfig(ssid: \(ssid.count) bytes, passphrase hidden)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// `WiFiConfigPayload`: | 1 | msg | WiFiConfigMsgType | 10 | cmd_get_status | 11 | resp_get_status |
/// | 12 | cmd_set_config | 13 | resp_set_config | 14 | cmd_apply_config | 15 | resp_apply_config | (oneof)
public struct WiFiConfigPayload: ProtoMessage {
    public enum Payload: Sendable, Equatable {
        case cmdGetStatus
        case respGetStatus(WiFiStatusResponse)
        case cmdSetConfig(WiFiSetConfigCommand)
        case respSetConfig(StatusMessage)
        case cmdApplyConfig
        case respApplyConfig(StatusMessage)

        /// `WiFiConfigMsgType`: the `msg` value that goes with each payload (0...5).
        public var messageType: Int32 {
            switch self {
            case .cmdGetStatus: 0
            case .respGetStatus: 1
            case .cmdSetConfig: 2
            case .respSetConfig: 3
            case .cmdApplyConfig: 4
            case .respApplyConfig: 5
            }
        }
    }

    public var msg: Int32 = 0
    public var payload: Payload?

    public init() {}
    /// A payload with its matching `msg`.
    public init(_ payload: Payload) {
        msg = payload.messageType
        self.payload = payload
    }

    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let v = value.int32 { msg = v }
        case 10: if let _: EmptyMessage = try value.message() { payload = .cmdGetStatus }
        case 11: if let m: WiFiStatusResponse = try value.message() { payload = .respGetStatus(m) }
        case 12: if let m: WiFiSetConfigCommand = try value.message() { payload = .cmdSetConfig(m) }
        case 13: if let m: StatusMessage = try value.message() { payload = .respSetConfig(m) }
        case 14: if let _: EmptyMessage = try value.message() { payload = .cmdApplyConfig }
        case 15: if let m: StatusMessage = try value.message() { payload = .respApplyConfig(m) }
        default: break
        }
    }

    public func encode(into w: inout ProtoWriter) {
        w.int32(1, msg)
        switch payload {
        case .cmdGetStatus: w.message(10, EmptyMessage())
        case .respGetStatus(let m): w.message(11, m)
        case .cmdSetConfig(let m): w.message(12, m)
        case .respSetConfig(let m): w.message(13, m)
        case .cmdApplyConfig: w.message(14, EmptyMessage())
        case .respApplyConfig(let m): w.message(15, m)
        case nil: break
        }
    }
}

// MARK: - wifi_scan.proto (endpoint prov-scan)

/// `CmdScanStart`: | 1 | blocking | bool | 2 | passive | bool | 3 | group_channels | uint32 | 4 | period_ms | uint32 |
public struct WiFiScanStartCommand: ProtoMessage {
    public var blocking = false
    public var passive = false
    public var groupChannels: UInt32 = 0
    public var periodMs: UInt32 = 0
    public init() {}
    public init(blocking: Bool, passive: Bool = false, groupChannels: UInt32 = 0, periodMs: UInt32 = 0) {
        self.blocking = blocking
        self.passive = passive
        self.groupChannels = groupChannels
        self.periodMs = periodMs
    }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let v = value.bool { blocking = v }
        case 2: if let v = value.bool { passive = v }
        case 3: if let v = value.uint32 { groupChannels = v }
        case 4: if let v = value.uint32 { periodMs = v }
        default: break
        }
    }
    public func encode(into w: inout ProtoWriter) {
        w.bool(1, blocking)
        w.bool(2, passive)
        w.uint32(3, groupChannels)
        w.uint32(4, periodMs)
    }
}

/// `RespScanStatus`: | 1 | scan_finished | bool | 2 | result_count | uint32 |
public struct WiFiScanStatusResponse: ProtoMessage {
    public var scanFinished = false
    public var resultCount: UInt32 = 0
    public init() {}
    public init(scanFinished: Bool, resultCount: UInt32) {
        self.scanFinished = scanFinished
        self.resultCount = resultCount
    }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let v = value.bool { scanFinished = v }
        case 2: if let v = value.uint32 { resultCount = v }
        default: break
        }
    }
    public func encode(into w: inout ProtoWriter) {
        w.bool(1, scanFinished)
        w.uint32(2, resultCount)
    }
}

/// `CmdScanResult`: | 1 | start_index | uint32 | 2 | count | uint32 |
public struct WiFiScanResultCommand: ProtoMessage {
    public var startIndex: UInt32 = 0
    public var count: UInt32 = 0
    public init() {}
    public init(startIndex: UInt32, count: UInt32) {
        self.startIndex = startIndex
        self.count = count
    }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let v = value.uint32 { startIndex = v }
        case 2: if let v = value.uint32 { count = v }
        default: break
        }
    }
    public func encode(into w: inout ProtoWriter) {
        w.uint32(1, startIndex)
        w.uint32(2, count)
    }
}

/// `WiFiScanResult`: | 1 | ssid | bytes | 2 | channel | uint32 | 3 | rssi | int32 | 4 | bssid | bytes |
/// | 5 | auth | WifiAuthMode |
public struct WiFiScanResult: ProtoMessage {
    public var ssid: [UInt8] = []
    public var channel: UInt32 = 0
    public var rssi: Int32 = 0
    public var bssid: [UInt8] = []
    public var auth = WiFiAuthMode.open
    public init() {}
    public init(ssid: [UInt8], channel: UInt32, rssi: Int32, bssid: [UInt8], auth: WiFiAuthMode) {
        self.ssid = ssid
        self.channel = channel
        self.rssi = rssi
        self.bssid = bssid
        self.auth = auth
    }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let b = value.bytes { ssid = b }
        case 2: if let v = value.uint32 { channel = v }
        case 3: if let v = value.int32 { rssi = v }
        case 4: if let b = value.bytes { bssid = b }
        case 5: if let v = value.int32 { auth = WiFiAuthMode(rawValue: v) }
        default: break
        }
    }
    public func encode(into w: inout ProtoWriter) {
        w.bytes(1, ssid)
        w.uint32(2, channel)
        w.int32(3, rssi)
        w.bytes(4, bssid)
        w.int32(5, auth.rawValue)
    }
}

/// `RespScanResult`: | 1 | entries | repeated WiFiScanResult |
public struct WiFiScanResultResponse: ProtoMessage {
    public var entries: [WiFiScanResult] = []
    public init() {}
    public init(entries: [WiFiScanResult]) { self.entries = entries }
    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        if field == 1, let m: WiFiScanResult = try value.message() { entries.append(m) }
    }
    public func encode(into w: inout ProtoWriter) { w.repeated(1, entries) }
}

/// `WiFiScanPayload`: | 1 | msg | WiFiScanMsgType | 2 | status | Status | 10 | cmd_scan_start |
/// | 11 | resp_scan_start | 12 | cmd_scan_status | 13 | resp_scan_status | 14 | cmd_scan_result |
/// | 15 | resp_scan_result | (oneof)
public struct WiFiScanPayload: ProtoMessage {
    public enum Payload: Sendable, Equatable {
        case cmdScanStart(WiFiScanStartCommand)
        case respScanStart
        case cmdScanStatus
        case respScanStatus(WiFiScanStatusResponse)
        case cmdScanResult(WiFiScanResultCommand)
        case respScanResult(WiFiScanResultResponse)

        /// `WiFiScanMsgType`: the `msg` value that goes with each payload (0...5).
        public var messageType: Int32 {
            switch self {
            case .cmdScanStart: 0
            case .respScanStart: 1
            case .cmdScanStatus: 2
            case .respScanStatus: 3
            case .cmdScanResult: 4
            case .respScanResult: 5
            }
        }
    }

    public var msg: Int32 = 0
    public var status = ProtocommStatus.success
    public var payload: Payload?

    public init() {}
    public init(_ payload: Payload, status: ProtocommStatus = .success) {
        msg = payload.messageType
        self.status = status
        self.payload = payload
    }

    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let v = value.int32 { msg = v }
        case 2: if let v = value.int32 { status = ProtocommStatus(rawValue: v) }
        case 10: if let m: WiFiScanStartCommand = try value.message() { payload = .cmdScanStart(m) }
        case 11: if let _: EmptyMessage = try value.message() { payload = .respScanStart }
        case 12: if let _: EmptyMessage = try value.message() { payload = .cmdScanStatus }
        case 13: if let m: WiFiScanStatusResponse = try value.message() { payload = .respScanStatus(m) }
        case 14: if let m: WiFiScanResultCommand = try value.message() { payload = .cmdScanResult(m) }
        case 15: if let m: WiFiScanResultResponse = try value.message() { payload = .respScanResult(m) }
        default: break
        }
    }

    public func encode(into w: inout ProtoWriter) {
        w.int32(1, msg)
        w.int32(2, status.rawValue)
        switch payload {
        case .cmdScanStart(let m): w.message(10, m)
        case .respScanStart: w.message(11, EmptyMessage())
        case .cmdScanStatus: w.message(12, EmptyMessage())
        case .respScanStatus(let m): w.message(13, m)
        case .cmdScanResult(let m): w.message(14, m)
        case .respScanResult(let m): w.message(15, m)
        case nil: break
        }
    }
}

// MARK: - wifi_ctrl.proto (endpoint prov-ctrl)

/// `WiFiCtrlPayload`: | 1 | msg | WiFiCtrlMsgType | 2 | status | Status | 11 | cmd_ctrl_reset |
/// | 12 | resp_ctrl_reset | 13 | cmd_ctrl_reprov | 14 | resp_ctrl_reprov | (oneof; every member empty)
public struct WiFiCtrlPayload: ProtoMessage {
    public enum Payload: Int32, Sendable, Equatable {
        case cmdCtrlReset = 1
        case respCtrlReset = 2
        case cmdCtrlReprov = 3
        case respCtrlReprov = 4

        /// The oneof member's field number (11...14).
        var field: Int { Int(rawValue) + 10 }
    }

    /// `WiFiCtrlMsgType`: 0 reserved, 1 reset command, 2 its response, 3 reprovision command, 4 its response.
    public var msg: Int32 = 0
    public var status = ProtocommStatus.success
    public var payload: Payload?

    public init() {}
    public init(_ payload: Payload, status: ProtocommStatus = .success) {
        msg = payload.rawValue
        self.status = status
        self.payload = payload
    }

    public mutating func decode(field: Int, value: ProtoValue) throws(DecodeError) {
        switch field {
        case 1: if let v = value.int32 { msg = v }
        case 2: if let v = value.int32 { status = ProtocommStatus(rawValue: v) }
        case 11...14:
            if let _: EmptyMessage = try value.message(), let p = Payload(rawValue: Int32(field - 10)) { payload = p }
        default: break
        }
    }

    public func encode(into w: inout ProtoWriter) {
        w.int32(1, msg)
        w.int32(2, status.rawValue)
        if let payload { w.message(payload.field, EmptyMessage()) }
    }
}
