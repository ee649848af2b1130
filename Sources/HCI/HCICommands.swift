import BLE

/// One HCI command: its opcode and its parameters in wire order.
public protocol HCICommand: Sendable, Equatable {
    static var opcode: HCIOpcode { get }
    /// Parses the parameters (not the command header); throws on short or trailing bytes.
    init(from reader: inout ByteReader) throws(DecodeError)
    /// Writes the parameters (not the command header).
    func encode(into writer: inout ByteWriter)
}

extension HCICommand {
    /// The full command packet (opcode, length, parameters) without the H4 indicator.
    public var packet: [UInt8] { HCICommandPacket(command: self).bytes }

    /// Parses the parameter bytes of a command packet, rejecting trailing bytes.
    public init(parameters: [UInt8]) throws(DecodeError) {
        var reader = ByteReader(parameters)
        self = try Self(from: &reader)
        try reader.expectEnd(Self.opcode.name)
    }
}

/// An HCI command packet (Core v5.4 Vol 4 Part E 5.4.1).
///
/// | Parameter | Size |
/// |---|---|
/// | Opcode | 2 |
/// | Parameter_Total_Length | 1 |
/// | Parameters | Parameter_Total_Length |
public struct HCICommandPacket: Sendable, Equatable {
    public var opcode: HCIOpcode
    public var parameters: [UInt8]

    public init(opcode: HCIOpcode, parameters: [UInt8]) {
        self.opcode = opcode
        self.parameters = parameters
    }

    public init(from reader: inout ByteReader) throws(DecodeError) {
        opcode = HCIOpcode(rawValue: try reader.readUInt16LE("Opcode"))
        let length = try reader.readUInt8("Parameter_Total_Length")
        parameters = try reader.readBytes(Int(length), "Parameters")
    }

    public var bytes: [UInt8] {
        var w = ByteWriter(capacity: 3 + parameters.count)
        w.writeUInt16LE(opcode.rawValue)
        w.write(UInt8(truncatingIfNeeded: parameters.count))
        w.write(parameters)
        return w.bytes
    }
}

extension HCICommandPacket {
    /// The packet of a command.
    public init<C: HCICommand>(command: C) {
        var w = ByteWriter()
        command.encode(into: &w)
        self.init(opcode: C.opcode, parameters: w.bytes)
    }
}

/// Commands without parameters.
public protocol HCIEmptyCommand: HCICommand {
    init()
}

extension HCIEmptyCommand {
    public init(from reader: inout ByteReader) throws(DecodeError) { self.init() }
    public func encode(into writer: inout ByteWriter) {}
}

/// HCI_Reset (Core v5.4 Vol 4 Part E 7.3.2). No parameters; Command Complete returns Status.
public struct ResetCommand: HCIEmptyCommand {
    public static let opcode = HCIOpcode.reset
    public init() {}
}

/// HCI_Read_Local_Version_Information (Vol 4 Part E 7.4.1). No parameters.
public struct ReadLocalVersionCommand: HCIEmptyCommand {
    public static let opcode = HCIOpcode.readLocalVersionInformation
    public init() {}
}

/// HCI_Read_BD_ADDR (Vol 4 Part E 7.4.6). No parameters.
public struct ReadBDADDRCommand: HCIEmptyCommand {
    public static let opcode = HCIOpcode.readBDADDR
    public init() {}
}

/// HCI_Read_Buffer_Size (Vol 4 Part E 7.4.5). No parameters.
public struct ReadBufferSizeCommand: HCIEmptyCommand {
    public static let opcode = HCIOpcode.readBufferSize
    public init() {}
}

/// HCI_LE_Read_Buffer_Size [v1] (Vol 4 Part E 7.8.2). No parameters.
public struct LEReadBufferSizeCommand: HCIEmptyCommand {
    public static let opcode = HCIOpcode.leReadBufferSize
    public init() {}
}

/// HCI_LE_Create_Connection_Cancel (Vol 4 Part E 7.8.13). No parameters.
public struct LECreateConnectionCancelCommand: HCIEmptyCommand {
    public static let opcode = HCIOpcode.leCreateConnectionCancel
    public init() {}
}

/// HCI_Set_Event_Mask (Vol 4 Part E 7.3.1).
///
/// | Parameter | Size |
/// |---|---|
/// | Event_Mask | 8 |
public struct SetEventMaskCommand: HCICommand {
    public static let opcode = HCIOpcode.setEventMask
    public var mask: UInt64

    public init(mask: UInt64) { self.mask = mask }

    /// Disconnection Complete (bit 4), Encryption Change (7), Hardware Error (15),
    /// Data Buffer Overflow (25), Encryption Key Refresh Complete (47), LE Meta (61).
    public static let host = SetEventMaskCommand(mask: 1 << 4 | 1 << 7 | 1 << 15 | 1 << 25 | 1 << 47 | 1 << 61)

    public init(from reader: inout ByteReader) throws(DecodeError) {
        let low = try reader.readUInt32LE("Event_Mask")
        let high = try reader.readUInt32LE("Event_Mask")
        mask = UInt64(high) << 32 | UInt64(low)
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt32LE(UInt32(truncatingIfNeeded: mask))
        w.writeUInt32LE(UInt32(truncatingIfNeeded: mask >> 32))
    }
}

/// HCI_LE_Set_Event_Mask (Vol 4 Part E 7.8.1).
///
/// | Parameter | Size |
/// |---|---|
/// | LE_Event_Mask | 8 |
public struct LESetEventMaskCommand: HCICommand {
    public static let opcode = HCIOpcode.leSetEventMask
    public var mask: UInt64

    public init(mask: UInt64) { self.mask = mask }

    /// Connection Complete (bit 0), Advertising Report (1), Connection Update Complete (2),
    /// Read Remote Features Complete (3), Data Length Change (6), Enhanced Connection Complete (9),
    /// PHY Update Complete (11).
    public static let host = LESetEventMaskCommand(mask: 1 << 0 | 1 << 1 | 1 << 2 | 1 << 3 | 1 << 6 | 1 << 9 | 1 << 11)

    public init(from reader: inout ByteReader) throws(DecodeError) {
        let low = try reader.readUInt32LE("LE_Event_Mask")
        let high = try reader.readUInt32LE("LE_Event_Mask")
        mask = UInt64(high) << 32 | UInt64(low)
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt32LE(UInt32(truncatingIfNeeded: mask))
        w.writeUInt32LE(UInt32(truncatingIfNeeded: mask >> 32))
    }
}

/// HCI_LE_Set_Random_Address (Vol 4 Part E 7.8.4).
///
/// | Parameter | Size |
/// |---|---|
/// | Random_Address | 6 |
public struct LESetRandomAddressCommand: HCICommand {
    public static let opcode = HCIOpcode.leSetRandomAddress
    public var address: BluetoothAddress

    public init(address: BluetoothAddress) { self.address = address }

    public init(from reader: inout ByteReader) throws(DecodeError) {
        address = try reader.readAddress("Random_Address", type: 1)
    }

    public func encode(into w: inout ByteWriter) { w.write(address.bytes) }
}

/// HCI_LE_Set_Scan_Parameters (Vol 4 Part E 7.8.10).
///
/// | Parameter | Size |
/// |---|---|
/// | LE_Scan_Type | 1 |
/// | LE_Scan_Interval | 2 |
/// | LE_Scan_Window | 2 |
/// | Own_Address_Type | 1 |
/// | Scanning_Filter_Policy | 1 |
public struct LESetScanParametersCommand: HCICommand {
    public static let opcode = HCIOpcode.leSetScanParameters
    /// 0 passive, 1 active (scan requests, so scan responses arrive).
    public var scanType: UInt8
    /// Units of 0.625 ms.
    public var interval: UInt16
    public var window: UInt16
    public var ownAddressType: UInt8
    public var filterPolicy: UInt8

    public init(scanType: UInt8 = 1, interval: UInt16 = 0x0060, window: UInt16 = 0x0030,
                ownAddressType: UInt8 = 1, filterPolicy: UInt8 = 0) {
        self.scanType = scanType
        self.interval = interval
        self.window = window
        self.ownAddressType = ownAddressType
        self.filterPolicy = filterPolicy
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        scanType = try r.readUInt8("LE_Scan_Type")
        interval = try r.readUInt16LE("LE_Scan_Interval")
        window = try r.readUInt16LE("LE_Scan_Window")
        ownAddressType = try r.readUInt8("Own_Address_Type")
        filterPolicy = try r.readUInt8("Scanning_Filter_Policy")
    }

    public func encode(into w: inout ByteWriter) {
        w.write(scanType)
        w.writeUInt16LE(interval)
        w.writeUInt16LE(window)
        w.write(ownAddressType)
        w.write(filterPolicy)
    }
}

/// HCI_LE_Set_Scan_Enable (Vol 4 Part E 7.8.11).
///
/// | Parameter | Size |
/// |---|---|
/// | LE_Scan_Enable | 1 |
/// | Filter_Duplicates | 1 |
public struct LESetScanEnableCommand: HCICommand {
    public static let opcode = HCIOpcode.leSetScanEnable
    public var enable: Bool
    public var filterDuplicates: Bool

    public init(enable: Bool, filterDuplicates: Bool = false) {
        self.enable = enable
        self.filterDuplicates = filterDuplicates
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        enable = try r.readUInt8("LE_Scan_Enable") != 0
        filterDuplicates = try r.readUInt8("Filter_Duplicates") != 0
    }

    public func encode(into w: inout ByteWriter) {
        w.write(enable ? 1 : 0)
        w.write(filterDuplicates ? 1 : 0)
    }
}

/// HCI_LE_Create_Connection (Vol 4 Part E 7.8.12). Answered by Command Status, then LE (Enhanced)
/// Connection Complete.
///
/// | Parameter | Size |
/// |---|---|
/// | LE_Scan_Interval | 2 |
/// | LE_Scan_Window | 2 |
/// | Initiator_Filter_Policy | 1 |
/// | Peer_Address_Type | 1 |
/// | Peer_Address | 6 |
/// | Own_Address_Type | 1 |
/// | Connection_Interval_Min | 2 |
/// | Connection_Interval_Max | 2 |
/// | Max_Latency | 2 |
/// | Supervision_Timeout | 2 |
/// | Min_CE_Length | 2 |
/// | Max_CE_Length | 2 |
public struct LECreateConnectionCommand: HCICommand {
    public static let opcode = HCIOpcode.leCreateConnection
    public var scanInterval: UInt16
    public var scanWindow: UInt16
    public var filterPolicy: UInt8
    public var peerAddressType: UInt8
    public var peer: BluetoothAddress
    public var ownAddressType: UInt8
    /// Units of 1.25 ms.
    public var intervalMin: UInt16
    public var intervalMax: UInt16
    public var maxLatency: UInt16
    /// Units of 10 ms.
    public var supervisionTimeout: UInt16
    public var minCELength: UInt16
    public var maxCELength: UInt16

    /// `filterPolicy` 0 connects to `peer`; 1 connects to whichever device of the Filter Accept List
    /// advertises first, and the controller ignores `peer` (Vol 4 Part E 7.8.12).
    public init(peer: BluetoothAddress, filterPolicy: UInt8 = 0, ownAddressType: UInt8 = 1,
                scanInterval: UInt16 = 0x0060, scanWindow: UInt16 = 0x0060,
                intervalMin: UInt16 = 0x0018, intervalMax: UInt16 = 0x0028, maxLatency: UInt16 = 0,
                supervisionTimeout: UInt16 = 0x01F4, minCELength: UInt16 = 0, maxCELength: UInt16 = 0) {
        self.scanInterval = scanInterval
        self.scanWindow = scanWindow
        self.filterPolicy = filterPolicy
        self.peerAddressType = peer.kind.rawValue
        self.peer = peer
        self.ownAddressType = ownAddressType
        self.intervalMin = intervalMin
        self.intervalMax = intervalMax
        self.maxLatency = maxLatency
        self.supervisionTimeout = supervisionTimeout
        self.minCELength = minCELength
        self.maxCELength = maxCELength
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        scanInterval = try r.readUInt16LE("LE_Scan_Interval")
        scanWindow = try r.readUInt16LE("LE_Scan_Window")
        filterPolicy = try r.readUInt8("Initiator_Filter_Policy")
        peerAddressType = try r.readUInt8("Peer_Address_Type")
        peer = try r.readAddress("Peer_Address", type: peerAddressType)
        ownAddressType = try r.readUInt8("Own_Address_Type")
        intervalMin = try r.readUInt16LE("Connection_Interval_Min")
        intervalMax = try r.readUInt16LE("Connection_Interval_Max")
        maxLatency = try r.readUInt16LE("Max_Latency")
        supervisionTimeout = try r.readUInt16LE("Supervision_Timeout")
        minCELength = try r.readUInt16LE("Min_CE_Length")
        maxCELength = try r.readUInt16LE("Max_CE_Length")
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt16LE(scanInterval)
        w.writeUInt16LE(scanWindow)
        w.write(filterPolicy)
        w.write(peerAddressType)
        w.write(peer.bytes)
        w.write(ownAddressType)
        w.writeUInt16LE(intervalMin)
        w.writeUInt16LE(intervalMax)
        w.writeUInt16LE(maxLatency)
        w.writeUInt16LE(supervisionTimeout)
        w.writeUInt16LE(minCELength)
        w.writeUInt16LE(maxCELength)
    }
}

/// HCI_Disconnect (Vol 4 Part E 7.1.6). Answered by Command Status, then Disconnection Complete.
///
/// | Parameter | Size |
/// |---|---|
/// | Connection_Handle | 2 |
/// | Reason | 1 |
public struct DisconnectCommand: HCICommand {
    public static let opcode = HCIOpcode.disconnect
    public var handle: UInt16
    public var reason: HCIStatus

    public init(handle: UInt16, reason: HCIStatus = .remoteUserTerminated) {
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

/// HCI_LE_Connection_Update (Vol 4 Part E 7.8.18). Answered by Command Status, then LE Connection
/// Update Complete.
///
/// | Parameter | Size |
/// |---|---|
/// | Connection_Handle | 2 |
/// | Connection_Interval_Min | 2 |
/// | Connection_Interval_Max | 2 |
/// | Max_Latency | 2 |
/// | Supervision_Timeout | 2 |
/// | Min_CE_Length | 2 |
/// | Max_CE_Length | 2 |
public struct LEConnectionUpdateCommand: HCICommand {
    public static let opcode = HCIOpcode.leConnectionUpdate
    public var handle: UInt16
    public var intervalMin: UInt16
    public var intervalMax: UInt16
    public var maxLatency: UInt16
    public var supervisionTimeout: UInt16
    public var minCELength: UInt16
    public var maxCELength: UInt16

    public init(handle: UInt16, intervalMin: UInt16, intervalMax: UInt16, maxLatency: UInt16,
                supervisionTimeout: UInt16, minCELength: UInt16 = 0, maxCELength: UInt16 = 0) {
        self.handle = handle
        self.intervalMin = intervalMin
        self.intervalMax = intervalMax
        self.maxLatency = maxLatency
        self.supervisionTimeout = supervisionTimeout
        self.minCELength = minCELength
        self.maxCELength = maxCELength
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        handle = try r.readUInt16LE("Connection_Handle") & 0x0FFF
        intervalMin = try r.readUInt16LE("Connection_Interval_Min")
        intervalMax = try r.readUInt16LE("Connection_Interval_Max")
        maxLatency = try r.readUInt16LE("Max_Latency")
        supervisionTimeout = try r.readUInt16LE("Supervision_Timeout")
        minCELength = try r.readUInt16LE("Min_CE_Length")
        maxCELength = try r.readUInt16LE("Max_CE_Length")
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt16LE(handle)
        w.writeUInt16LE(intervalMin)
        w.writeUInt16LE(intervalMax)
        w.writeUInt16LE(maxLatency)
        w.writeUInt16LE(supervisionTimeout)
        w.writeUInt16LE(minCELength)
        w.writeUInt16LE(maxCELength)
    }
}

// MARK: - Return parameters (carried by Command Complete)

/// Return parameters of commands that return only a Status.
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
public struct StatusReturn: Sendable, Equatable {
    public var status: HCIStatus
    public init(status: HCIStatus) { self.status = status }
    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
    }
    public func encode(into w: inout ByteWriter) { w.write(status.rawValue) }
}

/// Return parameters of HCI_Read_Local_Version_Information (Vol 4 Part E 7.4.1).
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | HCI_Version | 1 |
/// | HCI_Subversion | 2 |
/// | LMP_Version | 1 |
/// | Company_Identifier | 2 |
/// | LMP_Subversion | 2 |
public struct LocalVersionReturn: Sendable, Equatable {
    public var status: HCIStatus
    public var hciVersion: UInt8
    public var hciSubversion: UInt16
    public var lmpVersion: UInt8
    public var companyIdentifier: UInt16
    public var lmpSubversion: UInt16

    public init(status: HCIStatus = .success, hciVersion: UInt8, hciSubversion: UInt16, lmpVersion: UInt8,
                companyIdentifier: UInt16, lmpSubversion: UInt16) {
        self.status = status
        self.hciVersion = hciVersion
        self.hciSubversion = hciSubversion
        self.lmpVersion = lmpVersion
        self.companyIdentifier = companyIdentifier
        self.lmpSubversion = lmpSubversion
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        hciVersion = try r.readUInt8("HCI_Version")
        hciSubversion = try r.readUInt16LE("HCI_Subversion")
        lmpVersion = try r.readUInt8("LMP_Version")
        companyIdentifier = try r.readUInt16LE("Company_Identifier")
        lmpSubversion = try r.readUInt16LE("LMP_Subversion")
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.write(hciVersion)
        w.writeUInt16LE(hciSubversion)
        w.write(lmpVersion)
        w.writeUInt16LE(companyIdentifier)
        w.writeUInt16LE(lmpSubversion)
    }
}

/// Return parameters of HCI_Read_BD_ADDR (Vol 4 Part E 7.4.6).
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | BD_ADDR | 6 |
public struct BDADDRReturn: Sendable, Equatable {
    public var status: HCIStatus
    public var address: BluetoothAddress

    public init(status: HCIStatus = .success, address: BluetoothAddress) {
        self.status = status
        self.address = address
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        address = try r.readAddress("BD_ADDR", type: 0)
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.write(address.bytes)
    }
}

/// Return parameters of HCI_Read_Buffer_Size (Vol 4 Part E 7.4.5).
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | ACL_Data_Packet_Length | 2 |
/// | Synchronous_Data_Packet_Length | 1 |
/// | Total_Num_ACL_Data_Packets | 2 |
/// | Total_Num_Synchronous_Data_Packets | 2 |
public struct BufferSizeReturn: Sendable, Equatable {
    public var status: HCIStatus
    public var aclLength: UInt16
    public var syncLength: UInt8
    public var aclPackets: UInt16
    public var syncPackets: UInt16

    public init(status: HCIStatus = .success, aclLength: UInt16, syncLength: UInt8, aclPackets: UInt16, syncPackets: UInt16) {
        self.status = status
        self.aclLength = aclLength
        self.syncLength = syncLength
        self.aclPackets = aclPackets
        self.syncPackets = syncPackets
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        aclLength = try r.readUInt16LE("ACL_Data_Packet_Length")
        syncLength = try r.readUInt8("Synchronous_Data_Packet_Length")
        aclPackets = try r.readUInt16LE("Total_Num_ACL_Data_Packets")
        syncPackets = try r.readUInt16LE("Total_Num_Synchronous_Data_Packets")
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.writeUInt16LE(aclLength)
        w.write(syncLength)
        w.writeUInt16LE(aclPackets)
        w.writeUInt16LE(syncPackets)
    }
}

/// Return parameters of HCI_LE_Read_Buffer_Size [v1] (Vol 4 Part E 7.8.2).
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | LE_ACL_Data_Packet_Length | 2 |
/// | Total_Num_LE_ACL_Data_Packets | 1 |
public struct LEBufferSizeReturn: Sendable, Equatable {
    public var status: HCIStatus
    public var aclLength: UInt16
    public var aclPackets: UInt8

    public init(status: HCIStatus = .success, aclLength: UInt16, aclPackets: UInt8) {
        self.status = status
        self.aclLength = aclLength
        self.aclPackets = aclPackets
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        aclLength = try r.readUInt16LE("LE_ACL_Data_Packet_Length")
        aclPackets = try r.readUInt8("Total_Num_LE_ACL_Data_Packets")
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.writeUInt16LE(aclLength)
        w.write(aclPackets)
    }
}
