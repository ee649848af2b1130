import BLE

/// HCI_Command_Complete (Core v5.4 Vol 4 Part E 7.7.14).
///
/// | Parameter | Size |
/// |---|---|
/// | Num_HCI_Command_Packets | 1 |
/// | Command_Opcode | 2 |
/// | Return_Parameters | rest |
public struct CommandCompleteEvent: Sendable, Equatable {
    public var numCommandPackets: UInt8
    public var opcode: HCIOpcode
    public var returnParameters: [UInt8]

    public init(numCommandPackets: UInt8 = 1, opcode: HCIOpcode, returnParameters: [UInt8]) {
        self.numCommandPackets = numCommandPackets
        self.opcode = opcode
        self.returnParameters = returnParameters
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        numCommandPackets = try r.readUInt8("Num_HCI_Command_Packets")
        opcode = HCIOpcode(rawValue: try r.readUInt16LE("Command_Opcode"))
        returnParameters = r.readRemaining()
    }

    public func encode(into w: inout ByteWriter) {
        w.write(numCommandPackets)
        w.writeUInt16LE(opcode.rawValue)
        w.write(returnParameters)
    }

    /// The Status, which every return-parameter list starts with (nil when there is none).
    public var status: HCIStatus? { returnParameters.first.map { HCIStatus(rawValue: $0) } }
}

/// HCI_Command_Status (Vol 4 Part E 7.7.15).
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | Num_HCI_Command_Packets | 1 |
/// | Command_Opcode | 2 |
public struct CommandStatusEvent: Sendable, Equatable {
    public var status: HCIStatus
    public var numCommandPackets: UInt8
    public var opcode: HCIOpcode

    public init(status: HCIStatus, numCommandPackets: UInt8 = 1, opcode: HCIOpcode) {
        self.status = status
        self.numCommandPackets = numCommandPackets
        self.opcode = opcode
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        numCommandPackets = try r.readUInt8("Num_HCI_Command_Packets")
        opcode = HCIOpcode(rawValue: try r.readUInt16LE("Command_Opcode"))
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.write(numCommandPackets)
        w.writeUInt16LE(opcode.rawValue)
    }
}

/// HCI_Disconnection_Complete (Vol 4 Part E 7.7.5).
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | Connection_Handle | 2 |
/// | Reason | 1 |
public struct DisconnectionCompleteEvent: Sendable, Equatable {
    public var status: HCIStatus
    public var handle: UInt16
    public var reason: HCIStatus

    public init(status: HCIStatus = .success, handle: UInt16, reason: HCIStatus) {
        self.status = status
        self.handle = handle
        self.reason = reason
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        handle = try r.readUInt16LE("Connection_Handle") & 0x0FFF
        reason = HCIStatus(rawValue: try r.readUInt8("Reason"))
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.writeUInt16LE(handle)
        w.write(reason.rawValue)
    }
}

/// HCI_Number_Of_Completed_Packets (Vol 4 Part E 7.7.19). Handle/count pairs, one after the other.
///
/// | Parameter | Size |
/// |---|---|
/// | Num_Handles | 1 |
/// | Connection_Handle[i] | 2 |
/// | Num_Completed_Packets[i] | 2 |
public struct NumberOfCompletedPacketsEvent: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        public var handle: UInt16
        public var count: UInt16
        public init(handle: UInt16, count: UInt16) {
            self.handle = handle
            self.count = count
        }
    }
    public var entries: [Entry]

    public init(entries: [Entry]) { self.entries = entries }

    public init(from r: inout ByteReader) throws(DecodeError) {
        let n = try r.readUInt8("Num_Handles")
        var entries: [Entry] = []
        for _ in 0..<n {
            let handle = try r.readUInt16LE("Connection_Handle") & 0x0FFF
            let count = try r.readUInt16LE("Num_Completed_Packets")
            entries.append(Entry(handle: handle, count: count))
        }
        self.entries = entries
    }

    public func encode(into w: inout ByteWriter) {
        w.write(UInt8(truncatingIfNeeded: entries.count))
        for e in entries {
            w.writeUInt16LE(e.handle)
            w.writeUInt16LE(e.count)
        }
    }
}

/// HCI_LE_Connection_Complete (Vol 4 Part E 7.7.65.1) and HCI_LE_Enhanced_Connection_Complete
/// (7.7.65.10), which adds the two resolvable private addresses after Peer_Address.
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | Connection_Handle | 2 |
/// | Role | 1 |
/// | Peer_Address_Type | 1 |
/// | Peer_Address | 6 |
/// | Local_Resolvable_Private_Address (enhanced only) | 6 |
/// | Peer_Resolvable_Private_Address (enhanced only) | 6 |
/// | Connection_Interval | 2 |
/// | Peripheral_Latency | 2 |
/// | Supervision_Timeout | 2 |
/// | Central_Clock_Accuracy | 1 |
public struct LEConnectionCompleteEvent: Sendable, Equatable {
    public var status: HCIStatus
    public var handle: UInt16
    /// 0 central, 1 peripheral.
    public var role: UInt8
    public var peerAddressType: UInt8
    public var peer: BluetoothAddress
    /// Present in the enhanced form only.
    public var resolvablePrivateAddresses: (local: [UInt8], peer: [UInt8])?
    public var interval: UInt16
    public var latency: UInt16
    public var supervisionTimeout: UInt16
    public var clockAccuracy: UInt8

    public var isEnhanced: Bool { resolvablePrivateAddresses != nil }

    public init(status: HCIStatus, handle: UInt16, role: UInt8 = 0, peer: BluetoothAddress,
                enhanced: Bool = false, interval: UInt16 = 0x18, latency: UInt16 = 0,
                supervisionTimeout: UInt16 = 0x1F4, clockAccuracy: UInt8 = 0) {
        self.status = status
        self.handle = handle
        self.role = role
        self.peerAddressType = peer.kind.rawValue
        self.peer = peer
        self.resolvablePrivateAddresses = enhanced ? ([0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]) : nil
        self.interval = interval
        self.latency = latency
        self.supervisionTimeout = supervisionTimeout
        self.clockAccuracy = clockAccuracy
    }

    public init(from r: inout ByteReader, enhanced: Bool) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        handle = try r.readUInt16LE("Connection_Handle") & 0x0FFF
        role = try r.readUInt8("Role")
        peerAddressType = try r.readUInt8("Peer_Address_Type")
        peer = try r.readAddress("Peer_Address", type: peerAddressType)
        if enhanced {
            let local = try r.readBytes(6, "Local_Resolvable_Private_Address")
            let remote = try r.readBytes(6, "Peer_Resolvable_Private_Address")
            resolvablePrivateAddresses = (local, remote)
        } else {
            resolvablePrivateAddresses = nil
        }
        interval = try r.readUInt16LE("Connection_Interval")
        latency = try r.readUInt16LE("Peripheral_Latency")
        supervisionTimeout = try r.readUInt16LE("Supervision_Timeout")
        clockAccuracy = try r.readUInt8("Central_Clock_Accuracy")
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.writeUInt16LE(handle)
        w.write(role)
        w.write(peerAddressType)
        w.write(peer.bytes)
        if let rpa = resolvablePrivateAddresses {
            w.write(rpa.local)
            w.write(rpa.peer)
        }
        w.writeUInt16LE(interval)
        w.writeUInt16LE(latency)
        w.writeUInt16LE(supervisionTimeout)
        w.write(clockAccuracy)
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.status == b.status && a.handle == b.handle && a.role == b.role && a.peerAddressType == b.peerAddressType
            && a.peer == b.peer && a.resolvablePrivateAddresses?.local == b.resolvablePrivateAddresses?.local
            && a.resolvablePrivateAddresses?.peer == b.resolvablePrivateAddresses?.peer
            && a.interval == b.interval && a.latency == b.latency && a.supervisionTimeout == b.supervisionTimeout
            && a.clockAccuracy == b.clockAccuracy
    }
}

/// HCI_LE_Connection_Update_Complete (Vol 4 Part E 7.7.65.3).
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | Connection_Handle | 2 |
/// | Connection_Interval | 2 |
/// | Peripheral_Latency | 2 |
/// | Supervision_Timeout | 2 |
public struct LEConnectionUpdateCompleteEvent: Sendable, Equatable {
    public var status: HCIStatus
    public var handle: UInt16
    public var interval: UInt16
    public var latency: UInt16
    public var supervisionTimeout: UInt16

    public init(status: HCIStatus, handle: UInt16, interval: UInt16, latency: UInt16, supervisionTimeout: UInt16) {
        self.status = status
        self.handle = handle
        self.interval = interval
        self.latency = latency
        self.supervisionTimeout = supervisionTimeout
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        handle = try r.readUInt16LE("Connection_Handle") & 0x0FFF
        interval = try r.readUInt16LE("Connection_Interval")
        latency = try r.readUInt16LE("Peripheral_Latency")
        supervisionTimeout = try r.readUInt16LE("Supervision_Timeout")
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.writeUInt16LE(handle)
        w.writeUInt16LE(interval)
        w.writeUInt16LE(latency)
        w.writeUInt16LE(supervisionTimeout)
    }
}

/// HCI_LE_Remote_Connection_Parameter_Request (Vol 4 Part E 7.7.65.6): the peer asks for other
/// connection parameters (LL_CONNECTION_PARAM_REQ); the host must answer with the Reply or Negative
/// Reply command, or the procedure times out and the link is lost.
///
/// | Parameter | Size |
/// |---|---|
/// | Connection_Handle | 2 |
/// | Interval_Min | 2 |
/// | Interval_Max | 2 |
/// | Max_Latency | 2 |
/// | Timeout | 2 |
public struct LERemoteConnectionParameterRequestEvent: Sendable, Equatable {
    public var handle: UInt16
    public var intervalMin: UInt16
    public var intervalMax: UInt16
    public var maxLatency: UInt16
    public var timeout: UInt16

    public init(handle: UInt16, intervalMin: UInt16, intervalMax: UInt16, maxLatency: UInt16, timeout: UInt16) {
        self.handle = handle
        self.intervalMin = intervalMin
        self.intervalMax = intervalMax
        self.maxLatency = maxLatency
        self.timeout = timeout
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        handle = try r.readUInt16LE("Connection_Handle") & 0x0FFF
        intervalMin = try r.readUInt16LE("Interval_Min")
        intervalMax = try r.readUInt16LE("Interval_Max")
        maxLatency = try r.readUInt16LE("Max_Latency")
        timeout = try r.readUInt16LE("Timeout")
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt16LE(handle)
        w.writeUInt16LE(intervalMin)
        w.writeUInt16LE(intervalMax)
        w.writeUInt16LE(maxLatency)
        w.writeUInt16LE(timeout)
    }

    /// The request as the L2CAP one carries it (the same four values).
    public var request: ConnectionParameterUpdateRequest {
        ConnectionParameterUpdateRequest(intervalMin: intervalMin, intervalMax: intervalMax, latency: maxLatency, timeout: timeout)
    }
}

/// HCI_LE_Data_Length_Change (Vol 4 Part E 7.7.65.7): the LL payload sizes now in use on a link.
///
/// | Parameter | Size |
/// |---|---|
/// | Connection_Handle | 2 |
/// | Max_TX_Octets | 2 |
/// | Max_TX_Time | 2 |
/// | Max_RX_Octets | 2 |
/// | Max_RX_Time | 2 |
public struct LEDataLengthChangeEvent: Sendable, Equatable {
    public var handle: UInt16
    public var maxTxOctets: UInt16
    public var maxTxTime: UInt16
    public var maxRxOctets: UInt16
    public var maxRxTime: UInt16

    public init(handle: UInt16, maxTxOctets: UInt16, maxTxTime: UInt16, maxRxOctets: UInt16, maxRxTime: UInt16) {
        self.handle = handle
        self.maxTxOctets = maxTxOctets
        self.maxTxTime = maxTxTime
        self.maxRxOctets = maxRxOctets
        self.maxRxTime = maxRxTime
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        handle = try r.readUInt16LE("Connection_Handle") & 0x0FFF
        maxTxOctets = try r.readUInt16LE("Max_TX_Octets")
        maxTxTime = try r.readUInt16LE("Max_TX_Time")
        maxRxOctets = try r.readUInt16LE("Max_RX_Octets")
        maxRxTime = try r.readUInt16LE("Max_RX_Time")
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt16LE(handle)
        w.writeUInt16LE(maxTxOctets)
        w.writeUInt16LE(maxTxTime)
        w.writeUInt16LE(maxRxOctets)
        w.writeUInt16LE(maxRxTime)
    }
}

/// HCI_LE_PHY_Update_Complete (Vol 4 Part E 7.7.65.12): the PHYs a link uses after LE Set PHY (or a
/// peer's request).
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | Connection_Handle | 2 |
/// | TX_PHY | 1 |
/// | RX_PHY | 1 |
public struct LEPHYUpdateCompleteEvent: Sendable, Equatable {
    public var status: HCIStatus
    public var handle: UInt16
    /// 1 LE 1M, 2 LE 2M, 3 LE Coded.
    public var txPHY: UInt8
    public var rxPHY: UInt8

    public init(status: HCIStatus, handle: UInt16, txPHY: UInt8, rxPHY: UInt8) {
        self.status = status
        self.handle = handle
        self.txPHY = txPHY
        self.rxPHY = rxPHY
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        handle = try r.readUInt16LE("Connection_Handle") & 0x0FFF
        txPHY = try r.readUInt8("TX_PHY")
        rxPHY = try r.readUInt8("RX_PHY")
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.writeUInt16LE(handle)
        w.write(txPHY)
        w.write(rxPHY)
    }
}

/// One report of an advertising report event, legacy or extended, reduced to what the host uses.
public struct AdvertisingReport: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// Connectable or not; `scanResponse` when it carries scan response data.
        case advertisement(connectable: Bool)
        case scanResponse
    }
    public var kind: Kind
    public var address: BluetoothAddress
    public var data: [UInt8]
    public var rssi: Int8

    public init(kind: Kind, address: BluetoothAddress, data: [UInt8], rssi: Int8) {
        self.kind = kind
        self.address = address
        self.data = data
        self.rssi = rssi
    }
}

/// HCI_LE_Advertising_Report (Vol 4 Part E 7.7.65.2). The reports follow one another.
///
/// | Parameter | Size |
/// |---|---|
/// | Num_Reports | 1 |
/// | Event_Type[i] | 1 |
/// | Address_Type[i] | 1 |
/// | Address[i] | 6 |
/// | Data_Length[i] | 1 |
/// | Data[i] | Data_Length[i] |
/// | RSSI[i] | 1 |
public struct LEAdvertisingReportEvent: Sendable, Equatable {
    public struct Report: Sendable, Equatable {
        /// 0 ADV_IND, 1 ADV_DIRECT_IND, 2 ADV_SCAN_IND, 3 ADV_NONCONN_IND, 4 SCAN_RSP.
        public var eventType: UInt8
        public var addressType: UInt8
        public var address: BluetoothAddress
        public var data: [UInt8]
        public var rssi: Int8

        public init(eventType: UInt8, address: BluetoothAddress, data: [UInt8], rssi: Int8) {
            self.eventType = eventType
            self.addressType = address.kind.rawValue
            self.address = address
            self.data = data
            self.rssi = rssi
        }

        public var report: AdvertisingReport {
            let kind: AdvertisingReport.Kind = eventType == 4
                ? .scanResponse : .advertisement(connectable: eventType == 0 || eventType == 1)
            return AdvertisingReport(kind: kind, address: address, data: data, rssi: rssi)
        }
    }
    public var reports: [Report]

    public init(reports: [Report]) { self.reports = reports }

    public init(from r: inout ByteReader) throws(DecodeError) {
        let n = try r.readUInt8("Num_Reports")
        guard n >= 1 && n <= 0x19 else { throw .invalid(field: "Num_Reports", reason: "\(n) not in 1...25") }
        var reports: [Report] = []
        for _ in 0..<n {
            let type = try r.readUInt8("Event_Type")
            let addressType = try r.readUInt8("Address_Type")
            let address = try r.readAddress("Address", type: addressType)
            let length = try r.readUInt8("Data_Length")
            guard length <= 31 else { throw .invalid(field: "Data_Length", reason: "\(length) > 31") }
            let data = try r.readBytes(Int(length), "Data")
            let rssi = try r.readInt8("RSSI")
            var report = Report(eventType: type, address: address, data: data, rssi: rssi)
            report.addressType = addressType
            reports.append(report)
        }
        self.reports = reports
    }

    public func encode(into w: inout ByteWriter) {
        w.write(UInt8(truncatingIfNeeded: reports.count))
        for report in reports {
            w.write(report.eventType)
            w.write(report.addressType)
            w.write(report.address.bytes)
            w.write(UInt8(truncatingIfNeeded: report.data.count))
            w.write(report.data)
            w.write(UInt8(bitPattern: report.rssi))
        }
    }
}

/// HCI_LE_Extended_Advertising_Report (Vol 4 Part E 7.7.65.13). Some controllers (Bumble's among
/// them) send it even to a host that scans with the legacy commands.
///
/// | Parameter | Size |
/// |---|---|
/// | Num_Reports | 1 |
/// | Event_Type[i] | 2 |
/// | Address_Type[i] | 1 |
/// | Address[i] | 6 |
/// | Primary_PHY[i] | 1 |
/// | Secondary_PHY[i] | 1 |
/// | Advertising_SID[i] | 1 |
/// | TX_Power[i] | 1 |
/// | RSSI[i] | 1 |
/// | Periodic_Advertising_Interval[i] | 2 |
/// | Direct_Address_Type[i] | 1 |
/// | Direct_Address[i] | 6 |
/// | Data_Length[i] | 1 |
/// | Data[i] | Data_Length[i] |
public struct LEExtendedAdvertisingReportEvent: Sendable, Equatable {
    public struct Report: Sendable, Equatable {
        /// Bit 0 connectable, 1 scannable, 2 directed, 3 scan response, 4 legacy, 5–6 data status.
        public var eventType: UInt16
        public var addressType: UInt8
        public var address: BluetoothAddress
        public var primaryPHY: UInt8
        public var secondaryPHY: UInt8
        public var sid: UInt8
        public var txPower: Int8
        public var rssi: Int8
        public var periodicInterval: UInt16
        public var directAddressType: UInt8
        public var directAddress: [UInt8]
        public var data: [UInt8]

        public init(eventType: UInt16, address: BluetoothAddress, rssi: Int8, data: [UInt8]) {
            self.eventType = eventType
            self.addressType = address.kind.rawValue
            self.address = address
            self.primaryPHY = 1
            self.secondaryPHY = 0
            self.sid = 0xFF
            self.txPower = 0x7F
            self.rssi = rssi
            self.periodicInterval = 0
            self.directAddressType = 0
            self.directAddress = [0, 0, 0, 0, 0, 0]
            self.data = data
        }

        public var report: AdvertisingReport {
            let kind: AdvertisingReport.Kind = eventType & 0x08 != 0
                ? .scanResponse : .advertisement(connectable: eventType & 0x01 != 0)
            return AdvertisingReport(kind: kind, address: address, data: data, rssi: rssi)
        }
    }
    public var reports: [Report]

    public init(reports: [Report]) { self.reports = reports }

    public init(from r: inout ByteReader) throws(DecodeError) {
        let n = try r.readUInt8("Num_Reports")
        guard n >= 1 && n <= 10 else { throw .invalid(field: "Num_Reports", reason: "\(n) not in 1...10") }
        var reports: [Report] = []
        for _ in 0..<n {
            let type = try r.readUInt16LE("Event_Type")
            let addressType = try r.readUInt8("Address_Type")
            let address = try r.readAddress("Address", type: addressType)
            var report = Report(eventType: type, address: address, rssi: 0, data: [])
            report.addressType = addressType
            report.primaryPHY = try r.readUInt8("Primary_PHY")
            report.secondaryPHY = try r.readUInt8("Secondary_PHY")
            report.sid = try r.readUInt8("Advertising_SID")
            report.txPower = try r.readInt8("TX_Power")
            report.rssi = try r.readInt8("RSSI")
            report.periodicInterval = try r.readUInt16LE("Periodic_Advertising_Interval")
            report.directAddressType = try r.readUInt8("Direct_Address_Type")
            report.directAddress = try r.readBytes(6, "Direct_Address")
            let length = try r.readUInt8("Data_Length")
            report.data = try r.readBytes(Int(length), "Data")
            reports.append(report)
        }
        self.reports = reports
    }

    public func encode(into w: inout ByteWriter) {
        w.write(UInt8(truncatingIfNeeded: reports.count))
        for report in reports {
            w.writeUInt16LE(report.eventType)
            w.write(report.addressType)
            w.write(report.address.bytes)
            w.write(report.primaryPHY)
            w.write(report.secondaryPHY)
            w.write(report.sid)
            w.write(UInt8(bitPattern: report.txPower))
            w.write(UInt8(bitPattern: report.rssi))
            w.writeUInt16LE(report.periodicInterval)
            w.write(report.directAddressType)
            w.write(report.directAddress)
            w.write(UInt8(truncatingIfNeeded: report.data.count))
            w.write(report.data)
        }
    }
}

/// A decoded HCI event packet (Vol 4 Part E 5.4.4): Event_Code (1), Parameter_Total_Length (1),
/// parameters. Events the host does not use keep their bytes.
public enum HCIEvent: Sendable, Equatable {
    case commandComplete(CommandCompleteEvent)
    case commandStatus(CommandStatusEvent)
    case disconnectionComplete(DisconnectionCompleteEvent)
    case numberOfCompletedPackets(NumberOfCompletedPacketsEvent)
    case hardwareError(code: UInt8)
    case leConnectionComplete(LEConnectionCompleteEvent)
    case leConnectionUpdateComplete(LEConnectionUpdateCompleteEvent)
    case leDataLengthChange(LEDataLengthChangeEvent)
    case lePHYUpdateComplete(LEPHYUpdateCompleteEvent)
    case leRemoteConnectionParameterRequest(LERemoteConnectionParameterRequestEvent)
    case leAdvertisingReport(LEAdvertisingReportEvent)
    case leExtendedAdvertisingReport(LEExtendedAdvertisingReportEvent)
    /// Encryption Change, v1 (no key size) or v2 (`keySize` set).
    case encryptionChange(EncryptionChangeEvent)
    case encryptionKeyRefreshComplete(EncryptionKeyRefreshCompleteEvent)
    case leLongTermKeyRequest(LELongTermKeyRequestEvent)
    case leMeta(subevent: HCILESubeventCode, parameters: [UInt8])
    case unknown(code: HCIEventCode, parameters: [UInt8])

    /// Parses a whole event packet (without the H4 indicator). The length byte must match exactly;
    /// known events must have no trailing bytes.
    public init(packet: [UInt8]) throws(DecodeError) {
        var header = ByteReader(packet)
        let code = HCIEventCode(rawValue: try header.readUInt8("Event_Code"))
        let length = Int(try header.readUInt8("Parameter_Total_Length"))
        guard header.remaining == length else {
            if header.remaining < length {
                throw .truncated(field: "event parameters", needed: length, available: header.remaining)
            }
            throw .trailingBytes(context: "event 0x\(String(code.rawValue, radix: 16))", count: header.remaining - length)
        }
        var r = ByteReader(header.readRemaining())
        switch code {
        case .commandComplete: self = .commandComplete(try CommandCompleteEvent(from: &r))
        case .commandStatus: self = .commandStatus(try CommandStatusEvent(from: &r))
        case .disconnectionComplete: self = .disconnectionComplete(try DisconnectionCompleteEvent(from: &r))
        case .numberOfCompletedPackets: self = .numberOfCompletedPackets(try NumberOfCompletedPacketsEvent(from: &r))
        case .hardwareError: self = .hardwareError(code: try r.readUInt8("Hardware_Code"))
        case .encryptionChange: self = .encryptionChange(try EncryptionChangeEvent(from: &r, v2: false))
        case .encryptionChangeV2: self = .encryptionChange(try EncryptionChangeEvent(from: &r, v2: true))
        case .encryptionKeyRefreshComplete: self = .encryptionKeyRefreshComplete(try EncryptionKeyRefreshCompleteEvent(from: &r))
        case .leMeta:
            let sub = HCILESubeventCode(rawValue: try r.readUInt8("Subevent_Code"))
            switch sub {
            case .connectionComplete: self = .leConnectionComplete(try LEConnectionCompleteEvent(from: &r, enhanced: false))
            case .enhancedConnectionComplete: self = .leConnectionComplete(try LEConnectionCompleteEvent(from: &r, enhanced: true))
            case .connectionUpdateComplete: self = .leConnectionUpdateComplete(try LEConnectionUpdateCompleteEvent(from: &r))
            case .dataLengthChange: self = .leDataLengthChange(try LEDataLengthChangeEvent(from: &r))
            case .phyUpdateComplete: self = .lePHYUpdateComplete(try LEPHYUpdateCompleteEvent(from: &r))
            case .remoteConnectionParameterRequest:
                self = .leRemoteConnectionParameterRequest(try LERemoteConnectionParameterRequestEvent(from: &r))
            case .advertisingReport: self = .leAdvertisingReport(try LEAdvertisingReportEvent(from: &r))
            case .extendedAdvertisingReport: self = .leExtendedAdvertisingReport(try LEExtendedAdvertisingReportEvent(from: &r))
            case .longTermKeyRequest: self = .leLongTermKeyRequest(try LELongTermKeyRequestEvent(from: &r))
            default: self = .leMeta(subevent: sub, parameters: r.readRemaining())
            }
        default: self = .unknown(code: code, parameters: r.readRemaining())
        }
        try r.expectEnd("event 0x\(String(code.rawValue, radix: 16))")
    }

    /// The whole event packet (without the H4 indicator).
    public var packet: [UInt8] {
        var w = ByteWriter()
        let code: HCIEventCode
        switch self {
        case .commandComplete(let e): code = .commandComplete; e.encode(into: &w)
        case .commandStatus(let e): code = .commandStatus; e.encode(into: &w)
        case .disconnectionComplete(let e): code = .disconnectionComplete; e.encode(into: &w)
        case .numberOfCompletedPackets(let e): code = .numberOfCompletedPackets; e.encode(into: &w)
        case .hardwareError(let c): code = .hardwareError; w.write(c)
        case .leConnectionComplete(let e):
            code = .leMeta
            w.write(e.isEnhanced ? HCILESubeventCode.enhancedConnectionComplete.rawValue : HCILESubeventCode.connectionComplete.rawValue)
            e.encode(into: &w)
        case .leConnectionUpdateComplete(let e): code = .leMeta; w.write(HCILESubeventCode.connectionUpdateComplete.rawValue); e.encode(into: &w)
        case .leDataLengthChange(let e): code = .leMeta; w.write(HCILESubeventCode.dataLengthChange.rawValue); e.encode(into: &w)
        case .lePHYUpdateComplete(let e): code = .leMeta; w.write(HCILESubeventCode.phyUpdateComplete.rawValue); e.encode(into: &w)
        case .leRemoteConnectionParameterRequest(let e):
            code = .leMeta; w.write(HCILESubeventCode.remoteConnectionParameterRequest.rawValue); e.encode(into: &w)
        case .leAdvertisingReport(let e): code = .leMeta; w.write(HCILESubeventCode.advertisingReport.rawValue); e.encode(into: &w)
        case .leExtendedAdvertisingReport(let e): code = .leMeta; w.write(HCILESubeventCode.extendedAdvertisingReport.rawValue); e.encode(into: &w)
        case .encryptionChange(let e): code = e.keySize == nil ? .encryptionChange : .encryptionChangeV2; e.encode(into: &w)
        case .encryptionKeyRefreshComplete(let e): code = .encryptionKeyRefreshComplete; e.encode(into: &w)
        case .leLongTermKeyRequest(let e): code = .leMeta; w.write(HCILESubeventCode.longTermKeyRequest.rawValue); e.encode(into: &w)
        case .leMeta(let sub, let params): code = .leMeta; w.write(sub.rawValue); w.write(params)
        case .unknown(let c, let params): code = c; w.write(params)
        }
        return [code.rawValue, UInt8(truncatingIfNeeded: w.bytes.count)] + w.bytes
    }
}
