import BLE

/// Bringing a controller up (after opening it, and again after it reset or came back) as a value state
/// machine: which command to send next, what each answer means, and what the controller turned out to
/// be — its buffers, what it can do, and the station's identity on it.
///
/// One command at a time, in this order (Core v5.4 Vol 4 Part E 7.3, 7.4, 7.8):
/// 1. Reset (again after flushing the input, `resetAttempts` times, when it gets no answer: a UART
///    opened mid-packet may swallow the first answer);
/// 2. Read Local Version Information, Read Local Supported Commands, Read BD_ADDR;
/// 3. LE Read Buffer Size v2 where supported, else v1 (then Read Buffer Size when LE shares the BR/EDR
///    buffers);
/// 4. Set Event Mask, LE Set Event Mask;
/// 5. on a Zephyr controller (manufacturer 0x05F1) without `address=`: Zephyr Read Supported Commands,
///    then Zephyr Read Static Addresses where it is there;
/// 6. the identity (`StationIdentity.choose`; kept as it was when bringing the controller up again),
///    then LE Set Random Address;
/// 7. what the controller can do, each command optional (a short deadline, the conservative choice
///    without an answer): LE Read Local Supported Features, LE Read Supported States, LE Read Filter
///    Accept List Size and LE Clear Filter Accept List, LE Write Suggested Default Data Length and a
///    probe of LE Set Data Length, LE Set Default PHY and a probe of LE Set PHY, a probe of Read RSSI.
///
/// A probe sends a per-link command for a handle no link has: a controller that takes the command
/// answers Unknown Connection Identifier; one that does not know it (or never answers) is not asked on
/// a link, where an unanswered command would hold the command queue for its deadline.
public struct ControllerSetup: Sendable {
    /// How to identify the station, and what is known already.
    public struct IdentityInputs: Sendable, Equatable {
        /// `address=` of the adapter spec.
        public var configured: BluetoothAddress?
        /// The identity kept with the bonds for this adapter.
        public var stored: BluetoothAddress?
        /// There is a bonds file to keep a generated identity in.
        public var canStore: Bool
        /// A fresh static random address, for when nothing else is there.
        public var fresh: BluetoothAddress
        /// The identity to keep (bringing a controller up again): no other choice is made.
        public var pinned: StationIdentity?

        public init(configured: BluetoothAddress? = nil, stored: BluetoothAddress? = nil, canStore: Bool = false,
                    fresh: BluetoothAddress, pinned: StationIdentity? = nil) {
            self.configured = configured
            self.stored = stored
            self.canStore = canStore
            self.fresh = fresh
            self.pinned = pinned
        }
    }

    public struct Configuration: Sendable, Equatable {
        public var identity: IdentityInputs
        public var resetTimeout: Duration = .seconds(5)
        public var commandTimeout: Duration = .seconds(3)
        public var optionalTimeout: Duration = .milliseconds(500)
        /// Resets tried before giving up (each after the input is flushed).
        public var resetAttempts = 1
        public var dataLength = true
        public var twoMegabitPHY = true
        public var acceptList = true
        /// Use extended scanning and LE Extended Create Connection where the controller has them.
        public var extendedAdvertising = true

        public init(identity: IdentityInputs) { self.identity = identity }
    }

    /// One command of the sequence.
    public enum Step: String, Sendable, Hashable {
        case reset, readVersion, readSupportedCommands, readBDADDR, leReadBufferSizeV2, leReadBufferSize, readBufferSize
        case setEventMask, leSetEventMask, zephyrSupportedCommands, zephyrStaticAddresses, setRandomAddress
        case leReadFeatures, leReadStates, leReadAcceptListSize, leClearAcceptList, leWriteDefaultDataLength
        case probeDataLength, leSetDefaultPHY, probePHY, probeRSSI
    }

    /// What bring-up found.
    public struct Profile: Sendable, Equatable {
        public var version: LocalVersionReturn
        public var publicAddress: BluetoothAddress
        public var identity: StationIdentity
        public var capabilities: HCIHost.Capabilities
        /// The controller is a Zephyr one (manufacturer 0x05F1).
        public var zephyr: Bool { version.companyIdentifier == zephyrManufacturer }
    }

    public enum Action: Sendable, Equatable {
        case send(Step, HCICommandPacket, timeout: Duration)
        /// Throw away input held back waiting for the rest of a packet (before Reset is sent again).
        case flushInput
        case done(Profile)
        case failed(String)
        case log(String)
    }

    /// LE Set Event Mask of this host: Connection Complete (bit 0), Advertising Report (1), Connection
    /// Update Complete (2), Read Remote Features Complete (3), Remote Connection Parameter Request (5),
    /// Data Length Change (6), Enhanced Connection Complete (9), PHY Update Complete (11), Extended
    /// Advertising Report (12).
    public static let leEventMask: UInt64 = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 3 | 1 << 5 | 1 << 6 | 1 << 9 | 1 << 11 | 1 << 12

    /// A connection handle no link has (handles are 0x0000–0x0EFF, Vol 4 Part E 5.4.2).
    public static let probeHandle: UInt16 = 0x0EFF

    public let configuration: Configuration
    private var resets = 0
    private var current: Step?
    private var version: LocalVersionReturn?
    private var commands: SupportedCommands?
    private var bdaddr = BluetoothAddress(value: 0)
    private var aclLength = 0
    private var aclPackets = 0
    private var staticEntry: ZephyrStaticAddressesReturn.Entry?
    private var identity: StationIdentity?
    private var features: UInt64?
    private var states: UInt64?
    private var listSize = 0
    private var readsRSSI = false
    private var setDefaultPHY = false

    public init(_ configuration: Configuration) { self.configuration = configuration }

    /// The step whose answer is awaited.
    public var awaiting: Step? { current }

    public mutating func start() -> [Action] {
        resets = 1
        return send(.reset)
    }

    /// The answer to `step` (or its deadline).
    public mutating func finished(_ step: Step, _ outcome: HCICommandFlow.Outcome) -> [Action] {
        guard step == current else { return [.log("answer to \(step.rawValue) while waiting for \(current?.rawValue ?? "nothing"); ignored")] }
        current = nil
        switch step {
        case .reset:
            if case .timedOut = outcome, resets < configuration.resetAttempts {
                resets += 1
                return [.log("Reset got no answer; flushing the input and resetting again (attempt \(resets))"), .flushInput] + send(.reset)
            }
            guard accepted(outcome) != nil else { return refused(outcome, step) }
            return send(.readVersion)
        case .readVersion:
            guard let bytes = accepted(outcome) else { return refused(outcome, step) }
            guard let v = Self.parse(bytes, LocalVersionReturn.init(from:)) else { return fail("malformed Read Local Version Information") }
            version = v
            return send(.readSupportedCommands)
        case .readSupportedCommands:
            commands = optional(outcome).flatMap { Self.parse($0, SupportedCommandsReturn.init(from:))?.commands }
            return send(.readBDADDR)
        case .readBDADDR:
            guard let bytes = accepted(outcome) else { return refused(outcome, step) }
            guard let r = Self.parse(bytes, BDADDRReturn.init(from:)) else { return fail("malformed Read BD_ADDR") }
            bdaddr = r.address
            return send(commands?.leReadBufferSizeV2 == true ? .leReadBufferSizeV2 : .leReadBufferSize)
        case .leReadBufferSizeV2:
            guard let r = optional(outcome).flatMap({ Self.parse($0, LEBufferSizeV2Return.init(from:)) }) else {
                return [.log("LE Read Buffer Size v2 failed; asking v1")] + send(.leReadBufferSize)
            }
            return buffers(Int(r.aclLength), Int(r.aclPackets))
        case .leReadBufferSize:
            guard let bytes = accepted(outcome) else { return refused(outcome, step) }
            guard let r = Self.parse(bytes, LEBufferSizeReturn.init(from:)) else { return fail("malformed LE Read Buffer Size") }
            return buffers(Int(r.aclLength), Int(r.aclPackets))
        case .readBufferSize:
            guard let bytes = accepted(outcome) else { return refused(outcome, step) }
            guard let r = Self.parse(bytes, BufferSizeReturn.init(from:)) else { return fail("malformed Read Buffer Size") }
            aclLength = Int(r.aclLength)
            aclPackets = Int(r.aclPackets)
            guard aclLength > 0, aclPackets > 0 else {
                return fail("controller reports no ACL buffers (length \(aclLength), count \(aclPackets))")
            }
            return send(.setEventMask)
        case .setEventMask:
            guard accepted(outcome) != nil else { return refused(outcome, step) }
            return send(.leSetEventMask)
        case .leSetEventMask:
            guard accepted(outcome) != nil else { return refused(outcome, step) }
            let zephyr = version?.companyIdentifier == zephyrManufacturer
            if zephyr && configuration.identity.configured == nil && configuration.identity.pinned == nil {
                return send(.zephyrSupportedCommands)
            }
            return chooseIdentity()
        case .zephyrSupportedCommands:
            let vendor = optional(outcome).flatMap { Self.parse($0, ZephyrSupportedCommandsReturn.init(from:)) }
            guard vendor?.readStaticAddresses == true else {
                return [.log("Zephyr controller without Read Static Addresses")] + chooseIdentity()
            }
            return send(.zephyrStaticAddresses)
        case .zephyrStaticAddresses:
            let r = optional(outcome).flatMap { Self.parse($0, ZephyrStaticAddressesReturn.init(from:)) }
            staticEntry = r?.firstStatic
            if staticEntry == nil { return [.log("Zephyr Read Static Addresses gave no static address")] + chooseIdentity() }
            return chooseIdentity()
        case .setRandomAddress:
            guard accepted(outcome) != nil else { return refused(outcome, step) }
            return send(.leReadFeatures)
        case .leReadFeatures:
            features = optional(outcome).flatMap { Self.parse($0, LEFeaturesReturn.init(from:))?.features }
            return send(.leReadStates)
        case .leReadStates:
            states = optional(outcome).flatMap { Self.parse($0, LESupportedStatesReturn.init(from:))?.states }
            return configuration.acceptList ? send(.leReadAcceptListSize) : afterAcceptList()
        case .leReadAcceptListSize:
            guard let size = optional(outcome).flatMap({ Self.parse($0, FilterAcceptListSizeReturn.init(from:)) }) else {
                return afterAcceptList()
            }
            listSize = Int(size.size)
            return send(.leClearAcceptList)
        case .leClearAcceptList:
            // The list starts empty (after Reset it is; a controller that cannot clear it is not used).
            if optional(outcome) == nil { listSize = 0 }
            return afterAcceptList()
        case .leWriteDefaultDataLength:
            guard optional(outcome) != nil else { return noDataLength("LE Write Suggested Default Data Length failed") + afterDataLength() }
            return send(.probeDataLength)
        case .probeDataLength:
            if !Self.understood(outcome) { return noDataLength("the controller does not take LE Set Data Length") + afterDataLength() }
            return afterDataLength()
        case .leSetDefaultPHY:
            setDefaultPHY = optional(outcome) != nil
            return send(.probePHY)
        case .probePHY:
            if !Self.understood(outcome) {
                features? &= ~LEFeaturesReturn.twoMegabitPHY
                return [.log("the controller does not take LE Set PHY (\(Self.text(outcome))); links stay on LE 1M")] + send(.probeRSSI)
            }
            return send(.probeRSSI)
        case .probeRSSI:
            readsRSSI = Self.understood(outcome)
            var out: [Action] = []
            if !readsRSSI {
                out.append(.log("the controller cannot read a link's RSSI (\(Self.text(outcome))); scan steps scan before connecting, so each device's RSSI is known"))
            }
            return out + finish()
        }
    }

    // MARK: - Steps

    private mutating func send(_ step: Step) -> [Action] {
        current = step
        let timeout: Duration
        switch step {
        case .reset: timeout = configuration.resetTimeout
        case .readVersion, .readBDADDR, .leReadBufferSize, .readBufferSize, .setEventMask, .leSetEventMask, .setRandomAddress:
            timeout = configuration.commandTimeout
        default: timeout = configuration.optionalTimeout
        }
        return [.send(step, packet(step), timeout: timeout)]
    }

    private func packet(_ step: Step) -> HCICommandPacket {
        switch step {
        case .reset: return HCICommandPacket(command: ResetCommand())
        case .readVersion: return HCICommandPacket(command: ReadLocalVersionCommand())
        case .readSupportedCommands: return HCICommandPacket(command: ReadLocalSupportedCommandsCommand())
        case .readBDADDR: return HCICommandPacket(command: ReadBDADDRCommand())
        case .leReadBufferSizeV2: return HCICommandPacket(command: LEReadBufferSizeV2Command())
        case .leReadBufferSize: return HCICommandPacket(command: LEReadBufferSizeCommand())
        case .readBufferSize: return HCICommandPacket(command: ReadBufferSizeCommand())
        case .setEventMask: return HCICommandPacket(command: SetEventMaskCommand.host)
        case .leSetEventMask: return HCICommandPacket(command: LESetEventMaskCommand(mask: Self.leEventMask))
        case .zephyrSupportedCommands: return HCICommandPacket(command: ZephyrReadSupportedCommandsCommand())
        case .zephyrStaticAddresses: return HCICommandPacket(command: ZephyrReadStaticAddressesCommand())
        case .setRandomAddress:
            return HCICommandPacket(command: LESetRandomAddressCommand(address: identity?.address ?? configuration.identity.fresh))
        case .leReadFeatures: return HCICommandPacket(command: LEReadLocalSupportedFeaturesCommand())
        case .leReadStates: return HCICommandPacket(command: LEReadSupportedStatesCommand())
        case .leReadAcceptListSize: return HCICommandPacket(command: LEReadFilterAcceptListSizeCommand())
        case .leClearAcceptList: return HCICommandPacket(command: LEClearFilterAcceptListCommand())
        case .leWriteDefaultDataLength: return HCICommandPacket(command: LEWriteSuggestedDefaultDataLengthCommand())
        case .probeDataLength: return HCICommandPacket(command: LESetDataLengthCommand(handle: Self.probeHandle))
        case .leSetDefaultPHY:
            return HCICommandPacket(command: LESetDefaultPHYCommand(txPHYs: LinkPHY.le2M.preferenceBit, rxPHYs: LinkPHY.le2M.preferenceBit))
        case .probePHY: return HCICommandPacket(command: LESetPHYCommand(handle: Self.probeHandle))
        case .probeRSSI: return HCICommandPacket(command: ReadRSSICommand(handle: Self.probeHandle))
        }
    }

    private mutating func buffers(_ length: Int, _ count: Int) -> [Action] {
        if length > 0 && count > 0 {
            aclLength = length
            aclPackets = count
            return send(.setEventMask)
        }
        // Vol 4 Part E 7.8.2: zero means LE shares the BR/EDR buffers.
        return send(.readBufferSize)
    }

    private mutating func chooseIdentity() -> [Action] {
        let inputs = configuration.identity
        let chosen = inputs.pinned ?? StationIdentity.choose(StationIdentity.Candidates(
            configured: inputs.configured, controllerStatic: staticEntry, publicAddress: bdaddr, stored: inputs.stored,
            canStore: inputs.canStore, fresh: inputs.fresh))
        identity = chosen
        return send(.setRandomAddress)
    }

    private mutating func afterAcceptList() -> [Action] {
        if configuration.dataLength, (features ?? 0) & LEFeaturesReturn.dataLengthExtension != 0,
           commands.map({ $0.leSetDataLength }) != false {
            return send(.leWriteDefaultDataLength)
        }
        return afterDataLength()
    }

    private mutating func noDataLength(_ why: String) -> [Action] {
        features? &= ~LEFeaturesReturn.dataLengthExtension
        return [.log("\(why); links keep the default length")]
    }

    private mutating func afterDataLength() -> [Action] {
        if configuration.twoMegabitPHY, (features ?? 0) & LEFeaturesReturn.twoMegabitPHY != 0 {
            if commands.map({ $0.leSetDefaultPHY }) != false { return send(.leSetDefaultPHY) }
            return send(.probePHY)
        }
        return send(.probeRSSI)
    }

    private mutating func finish() -> [Action] {
        guard let version, let identity else { return fail("bring-up ended without a version or an identity") }
        let extended = configuration.extendedAdvertising && (features ?? 0) & LEFeaturesReturn.extendedAdvertising != 0
            && commands.map { $0.leSetExtendedScanParameters && $0.leSetExtendedScanEnable && $0.leExtendedCreateConnection } == true
        let caps = HCIHost.Capabilities(aclMaxLength: aclLength, aclPackets: aclPackets, leFeatures: features, supportedStates: states,
                                        acceptListSize: listSize, readsRSSI: readsRSSI, extended: extended,
                                        connectionParameterReply: commands.map { $0.leRemoteConnectionParameterRequestReply } ?? true)
        return [.done(Profile(version: version, publicAddress: bdaddr, identity: identity, capabilities: caps))]
    }

    // MARK: - Answers

    /// A required command's return parameters (empty for a Command Status) when it succeeded; nil otherwise.
    private func accepted(_ outcome: HCICommandFlow.Outcome) -> [UInt8]? {
        switch outcome {
        case .complete(let p): return p.first == HCIStatus.success.rawValue ? p : nil
        case .status(let s): return s == .success ? [] : nil
        case .timedOut, .controllerReset: return nil
        }
    }

    /// Bring-up fails: a required command was refused or not answered.
    private func refused(_ outcome: HCICommandFlow.Outcome, _ step: Step) -> [Action] {
        let name = packet(step).opcode.name
        switch outcome {
        case .complete(let p): return fail("HCI \(name) failed: \(p.first.map { HCIStatus(rawValue: $0) } ?? .unspecifiedError)")
        case .status(let s): return fail("HCI \(name) failed: \(s)")
        case .timedOut: return fail("HCI \(name) timed out after \(step == .reset ? configuration.resetTimeout : configuration.commandTimeout)")
        case .controllerReset: return fail("HCI \(name): the controller went away")
        }
    }

    private func fail(_ why: String) -> [Action] { [.failed(why)] }

    /// An optional command's return parameters when it succeeded; nil otherwise.
    private func optional(_ outcome: HCICommandFlow.Outcome) -> [UInt8]? {
        guard case .complete(let p) = outcome, p.first == HCIStatus.success.rawValue else { return nil }
        return p
    }

    /// Whether a probe's answer shows the controller knows the command (any status but Unknown HCI
    /// Command and Unsupported Feature; no answer counts as not knowing it).
    static func understood(_ outcome: HCICommandFlow.Outcome) -> Bool {
        switch outcome {
        case .complete(let p):
            guard let s = p.first.map({ HCIStatus(rawValue: $0) }) else { return false }
            return s != .unknownCommand && s != .unsupportedFeature
        case .status(let s):
            return s != .unknownCommand && s != .unsupportedFeature
        case .timedOut, .controllerReset:
            return false
        }
    }

    private static func text(_ outcome: HCICommandFlow.Outcome) -> String {
        switch outcome {
        case .complete(let p): return p.first.map { "\(HCIStatus(rawValue: $0))" } ?? "no status"
        case .status(let s): return "\(s)"
        case .timedOut: return "no answer"
        case .controllerReset: return "the controller went away"
        }
    }

    static func parse<T>(_ bytes: [UInt8], _ read: (inout ByteReader) throws(DecodeError) -> T) -> T? {
        var r = ByteReader(bytes)
        return try? read(&r)
    }
}
