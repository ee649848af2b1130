import BLE

/// The controller's scan as a value state machine (Core v5.4 Vol 4 Part E 7.8.10/7.8.11): on while
/// anyone wants advertisements, and — where the controller can (LE Read Supported States bit 22/23,
/// "scanning and initiating") — kept on while a connection is being created. Where it cannot, scanning
/// pauses for each initiation and resumes after it; the first such pause is noted once.
///
/// One scan command is outstanding at a time. Parameters are written once, while scanning is off (a
/// controller may refuse them while it scans).
public struct ScanController: Sendable {
    /// LE Set Scan Parameters values (units as on the wire).
    public struct Parameters: Sendable, Equatable {
        /// Active scanning sends scan requests, so scan responses (names) arrive.
        public var active: Bool = true
        /// 0.625 ms units.
        public var interval: UInt16 = 0x0060
        /// The whole interval by default: a controller fits its connection events in by itself, and a
        /// scan that listens half the time hears a device advertising once a second half as often.
        public var window: UInt16 = 0x0060
        public var ownAddressType: UInt8 = 1

        public init() {}

        public var command: LESetScanParametersCommand {
            LESetScanParametersCommand(scanType: active ? 1 : 0, interval: interval, window: window, ownAddressType: ownAddressType)
        }
    }

    public enum Command: Sendable, Equatable {
        case parameters(LESetScanParametersCommand)
        case enable(Bool)

        public var packet: HCICommandPacket {
            switch self {
            case .parameters(let c): return HCICommandPacket(command: c)
            case .enable(let on): return HCICommandPacket(command: LESetScanEnableCommand(enable: on, filterDuplicates: false))
            }
        }
    }

    public enum Event: Sendable, Equatable {
        /// Someone wants advertisements (or nobody does any more).
        case wanted(Bool)
        /// The initiator wants the radio (true) or is done with it (false).
        case initiation(Bool)
        /// The result of a command this machine asked for (`status` nil when it got no answer).
        case commandFinished(Command, HCIStatus?)
    }

    public enum Action: Sendable, Equatable {
        case send(Command)
        /// Initiating may start: scanning is off, or may stay on.
        case radioFree
        /// Scanning could not be started; whoever wanted it must be told.
        case failed(String)
        case note(String)
    }

    public let parameters: Parameters
    /// The controller can scan while initiating (LE Read Supported States, or the adapter's option).
    public let scansWhileInitiating: Bool
    /// Scanning is on at the controller.
    public private(set) var enabled = false
    public private(set) var wanted = false
    public private(set) var initiating = false
    private var parametersWritten = false
    private var outstanding: Command?
    private var radioGiven = false
    private var fallbackNoted = false

    public init(parameters: Parameters = Parameters(), scansWhileInitiating: Bool) {
        self.parameters = parameters
        self.scansWhileInitiating = scansWhileInitiating
    }

    /// Consumers wait for advertisements while initiating keeps scanning off.
    public var isWaitingForRadio: Bool { wanted && initiating && !scansWhileInitiating }
    /// Consumers want advertisements on a radio that cannot scan while it initiates: scanning and
    /// initiating must take turns (`ConnectionInitiator` decides them).
    public var sharesRadioWithInitiating: Bool { wanted && !scansWhileInitiating }

    public mutating func handle(_ event: Event) -> [Action] {
        var actions: [Action] = []
        switch event {
        case .wanted(let w):
            wanted = w
        case .initiation(let on):
            initiating = on
            if !on { radioGiven = false }
            if on && wanted && !scansWhileInitiating && !fallbackNoted {
                fallbackNoted = true
                actions.append(.note("the controller cannot scan while it creates a connection (LE Read Supported States); scanning pauses around each connection"))
            }
        case .commandFinished(let command, let status):
            guard command == outstanding else { return [.note("result of \(command.packet.opcode.name) in an unexpected state; ignored")] }
            outstanding = nil
            switch command {
            case .parameters:
                // Even when refused: the controller's own parameters will do.
                parametersWritten = true
                if status != .success {
                    actions.append(.note("LE Set Scan Parameters failed (\(status.map { "\($0)" } ?? "no answer")); scanning with the controller's"))
                }
            case .enable(true):
                enabled = status == .success
                if !enabled {
                    wanted = false
                    actions.append(.failed("LE Set Scan Enable failed (\(status.map { "\($0)" } ?? "no answer"))"))
                }
            case .enable(false):
                // Refused means it was not scanning (Command Disallowed); either way it is off now.
                enabled = false
            }
        }
        return actions + reconcile()
    }

    private mutating func reconcile() -> [Action] {
        guard outstanding == nil else { return [] }
        let desired = wanted && (!initiating || scansWhileInitiating)
        if desired && !enabled {
            let command: Command = parametersWritten ? .enable(true) : .parameters(parameters.command)
            outstanding = command
            return [.send(command)]
        }
        if !desired && enabled {
            outstanding = .enable(false)
            return [.send(.enable(false))]
        }
        if initiating && !radioGiven && (scansWhileInitiating || !enabled) {
            radioGiven = true
            return [.radioFree]
        }
        return []
    }
}

/// Recent advertisers, each with its advertisement and scan response merged, and the address type
/// it was heard with. Bounded: the oldest entries go first.
public struct AdvertisementCache: Sendable {
    public struct Entry: Sendable, Equatable {
        public var address: BluetoothAddress
        public var advertisement: AdvertisingData?
        public var scanResponse: AdvertisingData?
        public var connectable = true
        public var rssi: Int

        /// Advertising data and scan response in one.
        public var merged: AdvertisingData {
            (advertisement ?? AdvertisingData()).merged(with: scanResponse ?? AdvertisingData())
        }
    }

    public let limit: Int
    private var entries: [UInt64: Entry] = [:]
    private var order: [UInt64] = []
    private var head = 0

    public init(limit: Int = 4096) {
        self.limit = max(1, limit)
    }

    public var count: Int { entries.count }

    public func entry(for address: BluetoothAddress) -> Entry? { entries[address.value] }

    /// Records one report; returns the merged entry, or nil when its data is malformed.
    public mutating func record(_ report: AdvertisingReport) -> Entry? {
        guard let data = try? AdvertisingData(parsing: report.data) else { return nil }
        let key = report.address.value
        var entry = entries[key] ?? Entry(address: report.address, rssi: Int(report.rssi))
        if entries[key] == nil {
            order.append(key)
            if entries.count >= limit { evictOldest() }
        }
        entry.address = report.address
        entry.rssi = Int(report.rssi)
        switch report.kind {
        case .advertisement(let connectable):
            entry.advertisement = data
            entry.connectable = connectable
        case .scanResponse:
            entry.scanResponse = data
        }
        entries[key] = entry
        return entry
    }

    private mutating func evictOldest() {
        while head < order.count {
            let key = order[head]
            head += 1
            if entries.removeValue(forKey: key) != nil { break }
        }
        if head > 1024 && head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
