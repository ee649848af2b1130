import BLE

// What a controller says it can do, and the link defaults a host sets once: Read Local Supported
// Commands, LE Read Buffer Size [v2], LE Set Default PHY, the Remote Connection Parameter Request
// replies (Core v5.4 Vol 4 Part E 7.4.2, 7.8.2, 7.8.31-32, 7.8.48).

/// HCI_Read_Local_Supported_Commands (Vol 4 Part E 7.4.2). No parameters.
public struct ReadLocalSupportedCommandsCommand: HCIEmptyCommand {
    public static let opcode = HCIOpcode.readLocalSupportedCommands
    public init() {}
}

/// HCI_LE_Read_Buffer_Size [v2] (Vol 4 Part E 7.8.2): the LE ACL buffers and, new in v2, the ISO ones.
/// No parameters.
public struct LEReadBufferSizeV2Command: HCIEmptyCommand {
    public static let opcode = HCIOpcode.leReadBufferSizeV2
    public init() {}
}

/// A supported-commands bit field: 64 octets, one bit per command (Vol 4 Part E 6.27). Which octet and
/// bit name each command is the table in 6.27; the ones this host asks about are named here.
public struct SupportedCommands: Sendable, Hashable {
    public var octets: [UInt8]

    public init(octets: [UInt8]) { self.octets = octets }

    /// The bit `bit` (0–7) of octet `octet`; false beyond the field.
    public func contains(octet: Int, bit: Int) -> Bool {
        guard octets.indices.contains(octet), (0...7).contains(bit) else { return false }
        return octets[octet] & (1 << UInt8(bit)) != 0
    }

    public var readRSSI: Bool { contains(octet: 15, bit: 5) }
    public var leRemoteConnectionParameterRequestReply: Bool { contains(octet: 33, bit: 4) }
    public var leSetDataLength: Bool { contains(octet: 33, bit: 6) }
    public var leWriteSuggestedDefaultDataLength: Bool { contains(octet: 34, bit: 0) }
    public var leSetDefaultPHY: Bool { contains(octet: 35, bit: 5) }
    public var leSetPHY: Bool { contains(octet: 35, bit: 6) }
    public var leSetExtendedScanParameters: Bool { contains(octet: 37, bit: 5) }
    public var leSetExtendedScanEnable: Bool { contains(octet: 37, bit: 6) }
    public var leExtendedCreateConnection: Bool { contains(octet: 37, bit: 7) }
    public var leReadBufferSizeV2: Bool { contains(octet: 41, bit: 5) }

    /// A field with these (octet, bit) pairs set (for tests and fakes).
    public static func with(_ bits: [(octet: Int, bit: Int)]) -> SupportedCommands {
        var octets = [UInt8](repeating: 0, count: 64)
        for (o, b) in bits where octets.indices.contains(o) && (0...7).contains(b) { octets[o] |= 1 << UInt8(b) }
        return SupportedCommands(octets: octets)
    }
}

/// Return parameters of HCI_Read_Local_Supported_Commands (Vol 4 Part E 7.4.2).
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | Supported_Commands | 64 |
public struct SupportedCommandsReturn: Sendable, Equatable {
    public var status: HCIStatus
    public var commands: SupportedCommands

    public init(status: HCIStatus = .success, commands: SupportedCommands) {
        self.status = status
        self.commands = commands
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        commands = SupportedCommands(octets: try r.readBytes(64, "Supported_Commands"))
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.write(commands.octets + [UInt8](repeating: 0, count: max(0, 64 - commands.octets.count)))
    }
}

/// Return parameters of HCI_LE_Read_Buffer_Size [v2] (Vol 4 Part E 7.8.2).
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | LE_ACL_Data_Packet_Length | 2 |
/// | Total_Num_LE_ACL_Data_Packets | 1 |
/// | ISO_Data_Packet_Length | 2 |
/// | Total_Num_ISO_Data_Packets | 1 |
public struct LEBufferSizeV2Return: Sendable, Equatable {
    public var status: HCIStatus
    public var aclLength: UInt16
    public var aclPackets: UInt8
    public var isoLength: UInt16
    public var isoPackets: UInt8

    public init(status: HCIStatus = .success, aclLength: UInt16, aclPackets: UInt8, isoLength: UInt16 = 0, isoPackets: UInt8 = 0) {
        self.status = status
        self.aclLength = aclLength
        self.aclPackets = aclPackets
        self.isoLength = isoLength
        self.isoPackets = isoPackets
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        aclLength = try r.readUInt16LE("LE_ACL_Data_Packet_Length")
        aclPackets = try r.readUInt8("Total_Num_LE_ACL_Data_Packets")
        isoLength = try r.readUInt16LE("ISO_Data_Packet_Length")
        isoPackets = try r.readUInt8("Total_Num_ISO_Data_Packets")
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.writeUInt16LE(aclLength)
        w.write(aclPackets)
        w.writeUInt16LE(isoLength)
        w.write(isoPackets)
    }
}

/// HCI_LE_Set_Default_PHY (Vol 4 Part E 7.8.48): the PHYs the controller prefers on every new link.
/// Command Complete returns Status.
///
/// | Parameter | Size |
/// |---|---|
/// | All_PHYs | 1 |
/// | TX_PHYs | 1 |
/// | RX_PHYs | 1 |
public struct LESetDefaultPHYCommand: HCICommand {
    public static let opcode = HCIOpcode.leSetDefaultPHY
    /// Bit 0: no TX preference; bit 1: no RX preference.
    public var allPHYs: UInt8
    /// Bit 0 LE 1M, bit 1 LE 2M, bit 2 LE Coded.
    public var txPHYs: UInt8
    public var rxPHYs: UInt8

    public init(allPHYs: UInt8 = 0, txPHYs: UInt8, rxPHYs: UInt8) {
        self.allPHYs = allPHYs
        self.txPHYs = txPHYs
        self.rxPHYs = rxPHYs
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        allPHYs = try r.readUInt8("All_PHYs")
        txPHYs = try r.readUInt8("TX_PHYs")
        rxPHYs = try r.readUInt8("RX_PHYs")
    }

    public func encode(into w: inout ByteWriter) {
        w.write(allPHYs)
        w.write(txPHYs)
        w.write(rxPHYs)
    }
}

extension LinkPHY {
    /// The PHY's bit in TX_PHYs/RX_PHYs of LE Set PHY and LE Set Default PHY (Vol 4 Part E 7.8.48-49),
    /// and in Initiating_PHYs / Scanning_PHYs of the extended commands.
    public var preferenceBit: UInt8 {
        switch self {
        case .le1M: return 0b001
        case .le2M: return 0b010
        case .leCoded: return 0b100
        }
    }

    /// The PHY a PHY field names (LE PHY Update Complete, LE Read PHY: 1 LE 1M, 2 LE 2M, 3 LE Coded;
    /// extended advertising reports use 3 for Coded too); nil for a value the spec does not define.
    public init?(code: UInt8) {
        switch code {
        case 1: self = .le1M
        case 2: self = .le2M
        case 3, 4: self = .leCoded
        default: return nil
        }
    }
}

/// HCI_LE_Remote_Connection_Parameter_Request_Reply (Vol 4 Part E 7.8.31): the host accepts a peer's
/// connection parameter request (LL_CONNECTION_PARAM_REQ), with the values it chooses inside the peer's.
/// Its parameters are those of LE Connection Update, in the same order (Connection_Handle,
/// Interval_Min, Interval_Max, Max_Latency, Timeout, Min_CE_Length, Max_CE_Length: 14 octets).
/// Command Complete returns Status and Connection_Handle.
public struct LERemoteConnectionParameterRequestReplyCommand: HCICommand {
    public static let opcode = HCIOpcode.leRemoteConnectionParameterRequestReply
    public var parameters: LEConnectionUpdateCommand

    public init(handle: UInt16, intervalMin: UInt16, intervalMax: UInt16, maxLatency: UInt16, timeout: UInt16,
                minCELength: UInt16 = 0, maxCELength: UInt16 = 0) {
        parameters = LEConnectionUpdateCommand(handle: handle, intervalMin: intervalMin, intervalMax: intervalMax, maxLatency: maxLatency,
                                               supervisionTimeout: timeout, minCELength: minCELength, maxCELength: maxCELength)
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        parameters = try LEConnectionUpdateCommand(from: &r)
    }

    public func encode(into w: inout ByteWriter) { parameters.encode(into: &w) }
}

/// HCI_LE_Remote_Connection_Parameter_Request_Negative_Reply (Vol 4 Part E 7.8.32): the host refuses a
/// peer's connection parameter request. Command Complete returns Status and Connection_Handle.
///
/// | Parameter | Size |
/// |---|---|
/// | Connection_Handle | 2 |
/// | Reason | 1 |
public struct LERemoteConnectionParameterRequestNegativeReplyCommand: HCICommand {
    public static let opcode = HCIOpcode.leRemoteConnectionParameterRequestNegativeReply
    public var handle: UInt16
    public var reason: HCIStatus

    public init(handle: UInt16, reason: HCIStatus = .unacceptableConnectionParameters) {
        self.handle = handle
        self.reason = reason
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        handle = try r.readUInt16LE("Connection_Handle") & 0x0FFF
        reason = HCIStatus(rawValue: try r.readUInt8("Reason"))
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt16LE(handle)
        w.write(reason.rawValue)
    }
}
