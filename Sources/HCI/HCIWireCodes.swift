import BLE

/// An HCI command opcode (Core v5.4 Vol 4 Part E 5.4.1): OGF in the top 6 bits, OCF in the low 10.
/// Open: any value survives.
public struct HCIOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(ogf: UInt8, ocf: UInt16) { rawValue = UInt16(ogf) << 10 | (ocf & 0x3FF) }

    public static let disconnect = HCIOpcode(ogf: 0x01, ocf: 0x0006)
    public static let setEventMask = HCIOpcode(ogf: 0x03, ocf: 0x0001)
    public static let reset = HCIOpcode(ogf: 0x03, ocf: 0x0003)
    public static let readLocalVersionInformation = HCIOpcode(ogf: 0x04, ocf: 0x0001)
    public static let readBufferSize = HCIOpcode(ogf: 0x04, ocf: 0x0005)
    public static let readBDADDR = HCIOpcode(ogf: 0x04, ocf: 0x0009)
    public static let leSetEventMask = HCIOpcode(ogf: 0x08, ocf: 0x0001)
    public static let leReadBufferSize = HCIOpcode(ogf: 0x08, ocf: 0x0002)
    public static let leSetRandomAddress = HCIOpcode(ogf: 0x08, ocf: 0x0005)
    public static let leSetScanParameters = HCIOpcode(ogf: 0x08, ocf: 0x000B)
    public static let leSetScanEnable = HCIOpcode(ogf: 0x08, ocf: 0x000C)
    public static let leCreateConnection = HCIOpcode(ogf: 0x08, ocf: 0x000D)
    public static let leCreateConnectionCancel = HCIOpcode(ogf: 0x08, ocf: 0x000E)
    public static let leConnectionUpdate = HCIOpcode(ogf: 0x08, ocf: 0x0013)
    public static let readRSSI = HCIOpcode(ogf: 0x05, ocf: 0x0005)
    public static let leReadLocalSupportedFeatures = HCIOpcode(ogf: 0x08, ocf: 0x0003)
    public static let leReadFilterAcceptListSize = HCIOpcode(ogf: 0x08, ocf: 0x000F)
    public static let leClearFilterAcceptList = HCIOpcode(ogf: 0x08, ocf: 0x0010)
    public static let leAddDeviceToFilterAcceptList = HCIOpcode(ogf: 0x08, ocf: 0x0011)
    public static let leRemoveDeviceFromFilterAcceptList = HCIOpcode(ogf: 0x08, ocf: 0x0012)
    public static let leReadSupportedStates = HCIOpcode(ogf: 0x08, ocf: 0x001C)
    public static let leSetDataLength = HCIOpcode(ogf: 0x08, ocf: 0x0022)
    public static let leWriteSuggestedDefaultDataLength = HCIOpcode(ogf: 0x08, ocf: 0x0024)
    public static let leSetPHY = HCIOpcode(ogf: 0x08, ocf: 0x0032)
    public static let leEnableEncryption = HCIOpcode(ogf: 0x08, ocf: 0x0019)
    /// Never sent by this host (it is never a peripheral); named so a trace can leave its key out.
    public static let leLongTermKeyRequestReply = HCIOpcode(ogf: 0x08, ocf: 0x001A)
    public static let leLongTermKeyRequestNegativeReply = HCIOpcode(ogf: 0x08, ocf: 0x001B)
    public static let readLocalSupportedCommands = HCIOpcode(ogf: 0x04, ocf: 0x0002)
    public static let leReadBufferSizeV2 = HCIOpcode(ogf: 0x08, ocf: 0x0060)
    public static let leSetDefaultPHY = HCIOpcode(ogf: 0x08, ocf: 0x0031)
    public static let leRemoteConnectionParameterRequestReply = HCIOpcode(ogf: 0x08, ocf: 0x0020)
    public static let leRemoteConnectionParameterRequestNegativeReply = HCIOpcode(ogf: 0x08, ocf: 0x0021)
    public static let leSetExtendedScanParameters = HCIOpcode(ogf: 0x08, ocf: 0x0041)
    public static let leSetExtendedScanEnable = HCIOpcode(ogf: 0x08, ocf: 0x0042)
    public static let leExtendedCreateConnection = HCIOpcode(ogf: 0x08, ocf: 0x0043)
    /// Zephyr vendor commands (OGF 0x3F; HCICommands+Zephyr.swift).
    public static let zephyrReadSupportedCommands = HCIOpcode(ogf: 0x3F, ocf: 0x0002)
    public static let zephyrReadStaticAddresses = HCIOpcode(ogf: 0x3F, ocf: 0x0009)

    public var name: String {
        switch self {
        case .disconnect: return "Disconnect"
        case .setEventMask: return "Set Event Mask"
        case .reset: return "Reset"
        case .readLocalVersionInformation: return "Read Local Version Information"
        case .readBufferSize: return "Read Buffer Size"
        case .readBDADDR: return "Read BD_ADDR"
        case .leSetEventMask: return "LE Set Event Mask"
        case .leReadBufferSize: return "LE Read Buffer Size"
        case .leSetRandomAddress: return "LE Set Random Address"
        case .leSetScanParameters: return "LE Set Scan Parameters"
        case .leSetScanEnable: return "LE Set Scan Enable"
        case .leCreateConnection: return "LE Create Connection"
        case .leCreateConnectionCancel: return "LE Create Connection Cancel"
        case .leConnectionUpdate: return "LE Connection Update"
        case .readRSSI: return "Read RSSI"
        case .leReadLocalSupportedFeatures: return "LE Read Local Supported Features"
        case .leReadFilterAcceptListSize: return "LE Read Filter Accept List Size"
        case .leClearFilterAcceptList: return "LE Clear Filter Accept List"
        case .leAddDeviceToFilterAcceptList: return "LE Add Device To Filter Accept List"
        case .leRemoveDeviceFromFilterAcceptList: return "LE Remove Device From Filter Accept List"
        case .leReadSupportedStates: return "LE Read Supported States"
        case .leSetDataLength: return "LE Set Data Length"
        case .leWriteSuggestedDefaultDataLength: return "LE Write Suggested Default Data Length"
        case .leSetPHY: return "LE Set PHY"
        case .leEnableEncryption: return "LE Enable Encryption"
        case .leLongTermKeyRequestReply: return "LE Long Term Key Request Reply"
        case .leLongTermKeyRequestNegativeReply: return "LE Long Term Key Request Negative Reply"
        case .readLocalSupportedCommands: return "Read Local Supported Commands"
        case .leReadBufferSizeV2: return "LE Read Buffer Size v2"
        case .leSetDefaultPHY: return "LE Set Default PHY"
        case .leRemoteConnectionParameterRequestReply: return "LE Remote Connection Parameter Request Reply"
        case .leRemoteConnectionParameterRequestNegativeReply: return "LE Remote Connection Parameter Request Negative Reply"
        case .leSetExtendedScanParameters: return "LE Set Extended Scan Parameters"
        case .leSetExtendedScanEnable: return "LE Set Extended Scan Enable"
        case .leExtendedCreateConnection: return "LE Extended Create Connection"
        case .zephyrReadSupportedCommands: return "Zephyr Read Supported Commands"
        case .zephyrReadStaticAddresses: return "Zephyr Read Static Addresses"
        default: return "opcode 0x" + String(rawValue, radix: 16)
        }
    }

    public var description: String { name }
}

/// An HCI event code (Core v5.4 Vol 4 Part E 7.7). Open.
public struct HCIEventCode: RawRepresentable, Hashable, Sendable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let disconnectionComplete = HCIEventCode(rawValue: 0x05)
    public static let commandComplete = HCIEventCode(rawValue: 0x0E)
    public static let commandStatus = HCIEventCode(rawValue: 0x0F)
    public static let hardwareError = HCIEventCode(rawValue: 0x10)
    public static let numberOfCompletedPackets = HCIEventCode(rawValue: 0x13)
    public static let leMeta = HCIEventCode(rawValue: 0x3E)
    public static let encryptionChange = HCIEventCode(rawValue: 0x08)
    public static let encryptionChangeV2 = HCIEventCode(rawValue: 0x59)
    public static let encryptionKeyRefreshComplete = HCIEventCode(rawValue: 0x30)
}

/// An LE Meta event subevent code (Core v5.4 Vol 4 Part E 7.7.65). Open.
public struct HCILESubeventCode: RawRepresentable, Hashable, Sendable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let connectionComplete = HCILESubeventCode(rawValue: 0x01)
    public static let advertisingReport = HCILESubeventCode(rawValue: 0x02)
    public static let connectionUpdateComplete = HCILESubeventCode(rawValue: 0x03)
    public static let dataLengthChange = HCILESubeventCode(rawValue: 0x07)
    public static let phyUpdateComplete = HCILESubeventCode(rawValue: 0x0C)
    public static let enhancedConnectionComplete = HCILESubeventCode(rawValue: 0x0A)
    public static let extendedAdvertisingReport = HCILESubeventCode(rawValue: 0x0D)
    public static let longTermKeyRequest = HCILESubeventCode(rawValue: 0x05)
    public static let remoteConnectionParameterRequest = HCILESubeventCode(rawValue: 0x06)
}

/// An HCI status / error code (Core v5.4 Vol 1 Part F). Open.
public struct HCIStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let success = HCIStatus(rawValue: 0x00)
    public static let unknownCommand = HCIStatus(rawValue: 0x01)
    public static let unknownConnectionIdentifier = HCIStatus(rawValue: 0x02)
    public static let authenticationFailure = HCIStatus(rawValue: 0x05)
    public static let pinOrKeyMissing = HCIStatus(rawValue: 0x06)
    public static let memoryCapacityExceeded = HCIStatus(rawValue: 0x07)
    public static let connectionTimeout = HCIStatus(rawValue: 0x08)
    public static let connectionLimitExceeded = HCIStatus(rawValue: 0x09)
    public static let commandDisallowed = HCIStatus(rawValue: 0x0C)
    public static let unsupportedFeature = HCIStatus(rawValue: 0x11)
    public static let invalidParameters = HCIStatus(rawValue: 0x12)
    public static let remoteUserTerminated = HCIStatus(rawValue: 0x13)
    public static let remoteLowResources = HCIStatus(rawValue: 0x14)
    public static let remotePowerOff = HCIStatus(rawValue: 0x15)
    public static let localHostTerminated = HCIStatus(rawValue: 0x16)
    public static let unsupportedRemoteFeature = HCIStatus(rawValue: 0x1A)
    public static let unspecifiedError = HCIStatus(rawValue: 0x1F)
    public static let lmpResponseTimeout = HCIStatus(rawValue: 0x22)
    public static let instantPassed = HCIStatus(rawValue: 0x28)
    public static let controllerBusy = HCIStatus(rawValue: 0x3A)
    public static let unacceptableConnectionParameters = HCIStatus(rawValue: 0x3B)
    public static let failedToEstablish = HCIStatus(rawValue: 0x3E)
    public static let micFailure = HCIStatus(rawValue: 0x3D)

    public var name: String {
        switch rawValue {
        case 0x00: return "success"
        case 0x01: return "unknown HCI command"
        case 0x02: return "unknown connection identifier"
        case 0x05: return "authentication failure"
        case 0x06: return "PIN or key missing"
        case 0x07: return "memory capacity exceeded"
        case 0x08: return "connection timeout"
        case 0x09: return "connection limit exceeded"
        case 0x0C: return "command disallowed"
        case 0x0D: return "connection rejected due to limited resources"
        case 0x11: return "unsupported feature or parameter value"
        case 0x12: return "invalid HCI command parameters"
        case 0x13: return "remote user terminated connection"
        case 0x14: return "remote device terminated connection due to low resources"
        case 0x15: return "remote device terminated connection due to power off"
        case 0x16: return "connection terminated by local host"
        case 0x1A: return "unsupported remote feature"
        case 0x1F: return "unspecified error"
        case 0x22: return "LMP/LL response timeout"
        case 0x25: return "encryption mode not acceptable"
        case 0x2F: return "insufficient security"
        case 0x28: return "instant passed"
        case 0x3A: return "controller busy"
        case 0x3B: return "unacceptable connection parameters"
        case 0x3D: return "connection terminated due to MIC failure"
        case 0x3E: return "connection failed to be established"
        default: return "HCI error 0x" + String(rawValue, radix: 16)
        }
    }

    public var description: String { "\(name) (0x\(String(rawValue, radix: 16)))" }

    /// The `DisconnectReason` this code means when it ends a link.
    public var disconnectReason: DisconnectReason {
        switch self {
        case .remoteUserTerminated: return .remoteUserTerminated
        case .localHostTerminated: return .localHostTerminated
        case .connectionTimeout: return .supervisionTimeout
        case .failedToEstablish: return .failedToEstablish
        default: return DisconnectReason(code: rawValue, text: name)
        }
    }
}

/// An error of the HCI layer: which command, and the status the controller answered.
public struct HCIError: Error, Sendable, Hashable, CustomStringConvertible {
    public var status: HCIStatus
    public var opcode: HCIOpcode

    public init(status: HCIStatus, opcode: HCIOpcode) {
        self.status = status
        self.opcode = opcode
    }

    public var description: String { "HCI \(opcode.name) failed: \(status)" }
}

/// The H4 packet indicator (Core v5.4 Vol 4 Part A 2). Open.
public struct H4PacketType: RawRepresentable, Hashable, Sendable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let command = H4PacketType(rawValue: 0x01)
    public static let acl = H4PacketType(rawValue: 0x02)
    public static let sco = H4PacketType(rawValue: 0x03)
    public static let event = H4PacketType(rawValue: 0x04)
    public static let iso = H4PacketType(rawValue: 0x05)
}

extension ByteReader {
    /// Reads a 6-byte device address in wire order with the given type byte.
    mutating func readAddress(_ field: String, type: UInt8) throws(DecodeError) -> BluetoothAddress {
        let bytes = try readBytes(6, field)
        guard let address = BluetoothAddress(wireBytes: bytes, kind: type & 0x01 == 0 ? .public : .random) else {
            throw .invalid(field: field, reason: "not 6 bytes")
        }
        return address
    }
}
