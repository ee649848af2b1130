import BLE

// Extended scanning and connecting (Core v5.4 Vol 4 Part E 7.8.64-66): a controller that scans with
// these hears devices that advertise only with extended PDUs (ADV_EXT_IND pointing to an AUX_ADV_IND on
// the LE 1M, 2M or Coded secondary PHY), and connects to them with AUX_CONNECT_REQ. Once a host has
// used an extended command, the legacy scanning and connecting commands are refused (Vol 4 Part E
// 3.1.1), so a host uses one family or the other.

/// The per-PHY part of LE Set Extended Scan Parameters: one for each bit set in Scanning_PHYs.
///
/// | Parameter | Size |
/// |---|---|
/// | Scan_Type | 1 |
/// | Scan_Interval | 2 |
/// | Scan_Window | 2 |
public struct ExtendedScanPHYParameters: Sendable, Equatable {
    /// 0 passive, 1 active.
    public var scanType: UInt8
    /// Units of 0.625 ms.
    public var interval: UInt16
    public var window: UInt16

    public init(scanType: UInt8, interval: UInt16, window: UInt16) {
        self.scanType = scanType
        self.interval = interval
        self.window = window
    }
}

/// HCI_LE_Set_Extended_Scan_Parameters (Vol 4 Part E 7.8.64). Command Complete returns Status.
///
/// | Parameter | Size |
/// |---|---|
/// | Own_Address_Type | 1 |
/// | Scanning_Filter_Policy | 1 |
/// | Scanning_PHYs | 1 |
/// | per PHY: Scan_Type, Scan_Interval, Scan_Window | 5 each |
public struct LESetExtendedScanParametersCommand: HCICommand {
    public static let opcode = HCIOpcode.leSetExtendedScanParameters
    public var ownAddressType: UInt8
    public var filterPolicy: UInt8
    /// Bit 0 LE 1M, bit 2 LE Coded (the primary advertising PHYs).
    public var phys: UInt8
    /// One per bit of `phys`, lowest bit first.
    public var parameters: [ExtendedScanPHYParameters]

    public init(ownAddressType: UInt8 = 1, filterPolicy: UInt8 = 0, phys: UInt8, parameters: [ExtendedScanPHYParameters]) {
        self.ownAddressType = ownAddressType
        self.filterPolicy = filterPolicy
        self.phys = phys
        self.parameters = parameters
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        ownAddressType = try r.readUInt8("Own_Address_Type")
        filterPolicy = try r.readUInt8("Scanning_Filter_Policy")
        phys = try r.readUInt8("Scanning_PHYs")
        var parameters: [ExtendedScanPHYParameters] = []
        for _ in 0..<phys.nonzeroBitCount {
            parameters.append(ExtendedScanPHYParameters(scanType: try r.readUInt8("Scan_Type"),
                                                        interval: try r.readUInt16LE("Scan_Interval"),
                                                        window: try r.readUInt16LE("Scan_Window")))
        }
        self.parameters = parameters
    }

    public func encode(into w: inout ByteWriter) {
        w.write(ownAddressType)
        w.write(filterPolicy)
        w.write(phys)
        for p in parameters {
            w.write(p.scanType)
            w.writeUInt16LE(p.interval)
            w.writeUInt16LE(p.window)
        }
    }
}

/// HCI_LE_Set_Extended_Scan_Enable (Vol 4 Part E 7.8.65). Command Complete returns Status.
///
/// | Parameter | Size |
/// |---|---|
/// | Enable | 1 |
/// | Filter_Duplicates | 1 |
/// | Duration | 2 |
/// | Period | 2 |
public struct LESetExtendedScanEnableCommand: HCICommand {
    public static let opcode = HCIOpcode.leSetExtendedScanEnable
    public var enable: Bool
    public var filterDuplicates: UInt8
    /// Units of 10 ms; 0 scans until disabled.
    public var duration: UInt16
    /// Units of 1.28 s; 0 scans continuously.
    public var period: UInt16

    public init(enable: Bool, filterDuplicates: UInt8 = 0, duration: UInt16 = 0, period: UInt16 = 0) {
        self.enable = enable
        self.filterDuplicates = filterDuplicates
        self.duration = duration
        self.period = period
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        enable = try r.readUInt8("Enable") != 0
        filterDuplicates = try r.readUInt8("Filter_Duplicates")
        duration = try r.readUInt16LE("Duration")
        period = try r.readUInt16LE("Period")
    }

    public func encode(into w: inout ByteWriter) {
        w.write(enable ? 1 : 0)
        w.write(filterDuplicates)
        w.writeUInt16LE(duration)
        w.writeUInt16LE(period)
    }
}

/// The per-PHY part of LE Extended Create Connection: one for each bit set in Initiating_PHYs.
///
/// | Parameter | Size |
/// |---|---|
/// | Scan_Interval | 2 |
/// | Scan_Window | 2 |
/// | Connection_Interval_Min | 2 |
/// | Connection_Interval_Max | 2 |
/// | Max_Latency | 2 |
/// | Supervision_Timeout | 2 |
/// | Min_CE_Length | 2 |
/// | Max_CE_Length | 2 |
public struct ExtendedConnectionPHYParameters: Sendable, Equatable {
    public var scanInterval: UInt16
    public var scanWindow: UInt16
    public var intervalMin: UInt16
    public var intervalMax: UInt16
    public var maxLatency: UInt16
    public var supervisionTimeout: UInt16
    public var minCELength: UInt16
    public var maxCELength: UInt16

    public init(scanInterval: UInt16, scanWindow: UInt16, intervalMin: UInt16, intervalMax: UInt16, maxLatency: UInt16,
                supervisionTimeout: UInt16, minCELength: UInt16 = 0, maxCELength: UInt16 = 0) {
        self.scanInterval = scanInterval
        self.scanWindow = scanWindow
        self.intervalMin = intervalMin
        self.intervalMax = intervalMax
        self.maxLatency = maxLatency
        self.supervisionTimeout = supervisionTimeout
        self.minCELength = minCELength
        self.maxCELength = maxCELength
    }
}

/// HCI_LE_Extended_Create_Connection [v1] (Vol 4 Part E 7.8.66). Answered by Command Status, then LE
/// Enhanced Connection Complete (and LE Channel Selection Algorithm, where masked in).
///
/// | Parameter | Size |
/// |---|---|
/// | Initiator_Filter_Policy | 1 |
/// | Own_Address_Type | 1 |
/// | Peer_Address_Type | 1 |
/// | Peer_Address | 6 |
/// | Initiating_PHYs | 1 |
/// | per PHY: the 16 octets of `ExtendedConnectionPHYParameters` | 16 each |
public struct LEExtendedCreateConnectionCommand: HCICommand {
    public static let opcode = HCIOpcode.leExtendedCreateConnection
    public var filterPolicy: UInt8
    public var ownAddressType: UInt8
    public var peerAddressType: UInt8
    public var peer: BluetoothAddress
    /// Bit 0 LE 1M, bit 1 LE 2M, bit 2 LE Coded: the PHYs to initiate on (a connection from an
    /// AUX_ADV_IND is made on its secondary PHY).
    public var phys: UInt8
    /// One per bit of `phys`, lowest bit first.
    public var parameters: [ExtendedConnectionPHYParameters]

    public init(peer: BluetoothAddress, filterPolicy: UInt8 = 0, ownAddressType: UInt8 = 1, phys: UInt8,
                parameters: [ExtendedConnectionPHYParameters]) {
        self.filterPolicy = filterPolicy
        self.ownAddressType = ownAddressType
        self.peerAddressType = peer.kind.rawValue
        self.peer = peer
        self.phys = phys
        self.parameters = parameters
    }

    /// The extended form of a legacy LE Create Connection: the same parameters on each of `phys`.
    public init(_ legacy: LECreateConnectionCommand, phys: UInt8) {
        let p = ExtendedConnectionPHYParameters(scanInterval: legacy.scanInterval, scanWindow: legacy.scanWindow,
                                                intervalMin: legacy.intervalMin, intervalMax: legacy.intervalMax,
                                                maxLatency: legacy.maxLatency, supervisionTimeout: legacy.supervisionTimeout,
                                                minCELength: legacy.minCELength, maxCELength: legacy.maxCELength)
        self.init(peer: legacy.peer, filterPolicy: legacy.filterPolicy, ownAddressType: legacy.ownAddressType, phys: phys,
                  parameters: Array(repeating: p, count: phys.nonzeroBitCount))
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        filterPolicy = try r.readUInt8("Initiator_Filter_Policy")
        ownAddressType = try r.readUInt8("Own_Address_Type")
        peerAddressType = try r.readUInt8("Peer_Address_Type")
        peer = try r.readAddress("Peer_Address", type: peerAddressType)
        phys = try r.readUInt8("Initiating_PHYs")
        var parameters: [ExtendedConnectionPHYParameters] = []
        for _ in 0..<phys.nonzeroBitCount {
            parameters.append(ExtendedConnectionPHYParameters(
                scanInterval: try r.readUInt16LE("Scan_Interval"), scanWindow: try r.readUInt16LE("Scan_Window"),
                intervalMin: try r.readUInt16LE("Connection_Interval_Min"), intervalMax: try r.readUInt16LE("Connection_Interval_Max"),
                maxLatency: try r.readUInt16LE("Max_Latency"), supervisionTimeout: try r.readUInt16LE("Supervision_Timeout"),
                minCELength: try r.readUInt16LE("Min_CE_Length"), maxCELength: try r.readUInt16LE("Max_CE_Length")))
        }
        self.parameters = parameters
    }

    public func encode(into w: inout ByteWriter) {
        w.write(filterPolicy)
        w.write(ownAddressType)
        w.write(peerAddressType)
        w.write(peer.bytes)
        w.write(phys)
        for p in parameters {
            w.writeUInt16LE(p.scanInterval)
            w.writeUInt16LE(p.scanWindow)
            w.writeUInt16LE(p.intervalMin)
            w.writeUInt16LE(p.intervalMax)
            w.writeUInt16LE(p.maxLatency)
            w.writeUInt16LE(p.supervisionTimeout)
            w.writeUInt16LE(p.minCELength)
            w.writeUInt16LE(p.maxCELength)
        }
    }
}
