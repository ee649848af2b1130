import BLE

// Commands the host uses to learn what a controller can do and to tune links for provisioning:
// capabilities at bring-up, the Filter Accept List, data length, PHY and RSSI.

/// HCI_LE_Read_Local_Supported_Features (Core v5.4 Vol 4 Part E 7.8.3). No parameters.
public struct LEReadLocalSupportedFeaturesCommand: HCIEmptyCommand {
    public static let opcode = HCIOpcode.leReadLocalSupportedFeatures
    public init() {}
}

/// HCI_LE_Read_Filter_Accept_List_Size (Vol 4 Part E 7.8.14). No parameters.
public struct LEReadFilterAcceptListSizeCommand: HCIEmptyCommand {
    public static let opcode = HCIOpcode.leReadFilterAcceptListSize
    public init() {}
}

/// HCI_LE_Clear_Filter_Accept_List (Vol 4 Part E 7.8.15). No parameters; Command Complete returns Status.
public struct LEClearFilterAcceptListCommand: HCIEmptyCommand {
    public static let opcode = HCIOpcode.leClearFilterAcceptList
    public init() {}
}

/// HCI_LE_Read_Supported_States (Vol 4 Part E 7.8.27). No parameters.
public struct LEReadSupportedStatesCommand: HCIEmptyCommand {
    public static let opcode = HCIOpcode.leReadSupportedStates
    public init() {}
}

/// HCI_LE_Add_Device_To_Filter_Accept_List (Vol 4 Part E 7.8.16). Command Complete returns Status.
/// Disallowed (0x0C) while an LE Create Connection that uses the list is pending.
///
/// | Parameter | Size |
/// |---|---|
/// | Address_Type | 1 |
/// | Address | 6 |
public struct LEAddDeviceToFilterAcceptListCommand: HCICommand {
    public static let opcode = HCIOpcode.leAddDeviceToFilterAcceptList
    public var address: BluetoothAddress

    public init(address: BluetoothAddress) { self.address = address }

    public init(from r: inout ByteReader) throws(DecodeError) {
        let type = try r.readUInt8("Address_Type")
        address = try r.readAddress("Address", type: type)
    }

    public func encode(into w: inout ByteWriter) {
        w.write(address.kind.rawValue)
        w.write(address.bytes)
    }
}

/// HCI_LE_Remove_Device_From_Filter_Accept_List (Vol 4 Part E 7.8.17). Command Complete returns Status.
///
/// | Parameter | Size |
/// |---|---|
/// | Address_Type | 1 |
/// | Address | 6 |
public struct LERemoveDeviceFromFilterAcceptListCommand: HCICommand {
    public static let opcode = HCIOpcode.leRemoveDeviceFromFilterAcceptList
    public var address: BluetoothAddress

    public init(address: BluetoothAddress) { self.address = address }

    public init(from r: inout ByteReader) throws(DecodeError) {
        let type = try r.readUInt8("Address_Type")
        address = try r.readAddress("Address", type: type)
    }

    public func encode(into w: inout ByteWriter) {
        w.write(address.kind.rawValue)
        w.write(address.bytes)
    }
}

/// HCI_LE_Set_Data_Length (Vol 4 Part E 7.8.33): asks the controller to use longer LL payloads on one
/// link. Command Complete returns Status and Connection_Handle; an LE Data Length Change may follow.
///
/// | Parameter | Size |
/// |---|---|
/// | Connection_Handle | 2 |
/// | TX_Octets | 2 |
/// | TX_Time | 2 |
public struct LESetDataLengthCommand: HCICommand {
    public static let opcode = HCIOpcode.leSetDataLength
    public var handle: UInt16
    /// 27...251.
    public var txOctets: UInt16
    /// Microseconds, 328...17040.
    public var txTime: UInt16

    public init(handle: UInt16, txOctets: UInt16 = 251, txTime: UInt16 = 2120) {
        self.handle = handle
        self.txOctets = txOctets
        self.txTime = txTime
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        handle = try r.readUInt16LE("Connection_Handle") & 0x0FFF
        txOctets = try r.readUInt16LE("TX_Octets")
        txTime = try r.readUInt16LE("TX_Time")
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt16LE(handle)
        w.writeUInt16LE(txOctets)
        w.writeUInt16LE(txTime)
    }
}

/// HCI_LE_Write_Suggested_Default_Data_Length (Vol 4 Part E 7.8.35): the data length the controller
/// should use on new links. Command Complete returns Status.
///
/// | Parameter | Size |
/// |---|---|
/// | Suggested_Max_TX_Octets | 2 |
/// | Suggested_Max_TX_Time | 2 |
public struct LEWriteSuggestedDefaultDataLengthCommand: HCICommand {
    public static let opcode = HCIOpcode.leWriteSuggestedDefaultDataLength
    public var txOctets: UInt16
    public var txTime: UInt16

    public init(txOctets: UInt16 = 251, txTime: UInt16 = 2120) {
        self.txOctets = txOctets
        self.txTime = txTime
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        txOctets = try r.readUInt16LE("Suggested_Max_TX_Octets")
        txTime = try r.readUInt16LE("Suggested_Max_TX_Time")
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt16LE(txOctets)
        w.writeUInt16LE(txTime)
    }
}

/// HCI_LE_Set_PHY (Vol 4 Part E 7.8.49): asks for a PHY on one link. Answered by Command Status, then
/// LE PHY Update Complete.
///
/// | Parameter | Size |
/// |---|---|
/// | Connection_Handle | 2 |
/// | All_PHYs | 1 |
/// | TX_PHYs | 1 |
/// | RX_PHYs | 1 |
/// | PHY_Options | 2 |
public struct LESetPHYCommand: HCICommand {
    public static let opcode = HCIOpcode.leSetPHY
    public var handle: UInt16
    /// Bit 0: no TX preference; bit 1: no RX preference.
    public var allPHYs: UInt8
    /// Bit 0 LE 1M, bit 1 LE 2M, bit 2 LE Coded.
    public var txPHYs: UInt8
    public var rxPHYs: UInt8
    public var options: UInt16

    /// Prefers LE 2M both ways.
    public init(handle: UInt16, allPHYs: UInt8 = 0, txPHYs: UInt8 = 0b010, rxPHYs: UInt8 = 0b010, options: UInt16 = 0) {
        self.handle = handle
        self.allPHYs = allPHYs
        self.txPHYs = txPHYs
        self.rxPHYs = rxPHYs
        self.options = options
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        handle = try r.readUInt16LE("Connection_Handle") & 0x0FFF
        allPHYs = try r.readUInt8("All_PHYs")
        txPHYs = try r.readUInt8("TX_PHYs")
        rxPHYs = try r.readUInt8("RX_PHYs")
        options = try r.readUInt16LE("PHY_Options")
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt16LE(handle)
        w.write(allPHYs)
        w.write(txPHYs)
        w.write(rxPHYs)
        w.writeUInt16LE(options)
    }
}

/// HCI_Read_RSSI (Vol 4 Part E 7.5.4): the link's received signal strength.
///
/// | Parameter | Size |
/// |---|---|
/// | Handle | 2 |
public struct ReadRSSICommand: HCICommand {
    public static let opcode = HCIOpcode.readRSSI
    public var handle: UInt16

    public init(handle: UInt16) { self.handle = handle }

    public init(from r: inout ByteReader) throws(DecodeError) {
        handle = try r.readUInt16LE("Handle") & 0x0FFF
    }

    public func encode(into w: inout ByteWriter) { w.writeUInt16LE(handle) }
}

// MARK: - Return parameters

/// Return parameters of HCI_LE_Read_Local_Supported_Features (Vol 4 Part E 7.8.3); the bits are the
/// LE feature bits of Vol 6 Part B 4.6.
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | LE_Features | 8 |
public struct LEFeaturesReturn: Sendable, Equatable {
    public var status: HCIStatus
    public var features: UInt64

    public init(status: HCIStatus = .success, features: UInt64) {
        self.status = status
        self.features = features
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        let low = try r.readUInt32LE("LE_Features")
        let high = try r.readUInt32LE("LE_Features")
        features = UInt64(high) << 32 | UInt64(low)
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.writeUInt32LE(UInt32(truncatingIfNeeded: features))
        w.writeUInt32LE(UInt32(truncatingIfNeeded: features >> 32))
    }

    /// LE Data Packet Length Extension (bit 5).
    public static let dataLengthExtension: UInt64 = 1 << 5
    /// LE 2M PHY (bit 8).
    public static let twoMegabitPHY: UInt64 = 1 << 8
    /// Connection Parameters Request Procedure (bit 1): the peer may send LL_CONNECTION_PARAM_REQ.
    public static let connectionParametersRequest: UInt64 = 1 << 1
    /// LE Coded PHY (bit 11).
    public static let codedPHY: UInt64 = 1 << 11
    /// LE Extended Advertising (bit 12).
    public static let extendedAdvertising: UInt64 = 1 << 12
}

/// Return parameters of HCI_LE_Read_Filter_Accept_List_Size (Vol 4 Part E 7.8.14).
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | Filter_Accept_List_Size | 1 |
public struct FilterAcceptListSizeReturn: Sendable, Equatable {
    public var status: HCIStatus
    public var size: UInt8

    public init(status: HCIStatus = .success, size: UInt8) {
        self.status = status
        self.size = size
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        size = try r.readUInt8("Filter_Accept_List_Size")
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.write(size)
    }
}

/// Return parameters of HCI_LE_Read_Supported_States (Vol 4 Part E 7.8.27): one bit per state or
/// combination of states the link layer supports (Vol 6 Part B 1.1.1).
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | LE_States | 8 |
public struct LESupportedStatesReturn: Sendable, Equatable {
    public var status: HCIStatus
    public var states: UInt64

    public init(status: HCIStatus = .success, states: UInt64) {
        self.status = status
        self.states = states
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        let low = try r.readUInt32LE("LE_States")
        let high = try r.readUInt32LE("LE_States")
        states = UInt64(high) << 32 | UInt64(low)
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.writeUInt32LE(UInt32(truncatingIfNeeded: states))
        w.writeUInt32LE(UInt32(truncatingIfNeeded: states >> 32))
    }

    /// Passive Scanning and Initiating combined (bit 22).
    public static let passiveScanningAndInitiating: UInt64 = 1 << 22
    /// Active Scanning and Initiating combined (bit 23).
    public static let activeScanningAndInitiating: UInt64 = 1 << 23

    /// Whether the controller keeps scanning (actively or passively) while an LE Create Connection is pending.
    public func scansWhileInitiating(active: Bool) -> Bool {
        states & (active ? Self.activeScanningAndInitiating : Self.passiveScanningAndInitiating) != 0
    }
}

/// Return parameters of commands that return Status and Connection_Handle (e.g. LE Set Data Length,
/// Vol 4 Part E 7.8.33).
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | Connection_Handle | 2 |
public struct ConnectionHandleReturn: Sendable, Equatable {
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

/// Return parameters of HCI_Read_RSSI (Vol 4 Part E 7.5.4).
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | Handle | 2 |
/// | RSSI | 1 (signed, dBm) |
public struct RSSIReturn: Sendable, Equatable {
    public var status: HCIStatus
    public var handle: UInt16
    public var rssi: Int8

    public init(status: HCIStatus = .success, handle: UInt16, rssi: Int8) {
        self.status = status
        self.handle = handle
        self.rssi = rssi
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        handle = try r.readUInt16LE("Handle") & 0x0FFF
        rssi = try r.readInt8("RSSI")
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.writeUInt16LE(handle)
        w.write(UInt8(bitPattern: rssi))
    }
}
