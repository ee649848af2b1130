import BLE
import BLESecurity

/// The whole HCI host as one value: bytes from the controller and requests from callers in, bytes to
/// write, deadlines to arm and outcomes to deliver out. No clock, no I/O, no tasks: `HCIAdapter`
/// executes the actions (writes, `Timeouts` deadlines, continuations) and feeds back what happens.
///
/// It owns the H4 decoder and composes the protocol machines, routing each event to the one that
/// decides and each machine's command through the one command queue:
/// - `ControllerSetup`: bringing the controller up, the station's identity on it, and again after the
///   controller reset (Hardware Error), lost sync (a UART that dropped a byte) or went away and came back;
/// - `HCICommandFlow`: command credits, FIFO, answers matched to commands, command deadlines;
/// - `ConnectionInitiator` (with `FilterAcceptList`): LE Create Connection, cancel, the accept list;
/// - `ScanController` (with `AdvertisementCache`): the scan and its pause around initiating;
/// - `ACLFlowControl`: ACL credits and fragmentation;
/// - one `FixedChannelRouter` per link: reassembly and the ATT / signalling / SMP channels;
/// - `LinkTuning`: each link's data length, PHY and interval, and the answer to a peer that asks for
///   other connection parameters.
///
/// Links are named by a `LinkID` that is unique for the host's lifetime (the controller reuses handles).
public struct HCIHost: Sendable {
    public typealias Token = UInt64
    public typealias RequestID = UInt64
    public typealias LinkID = UInt64

    /// Tokens the host uses for its own commands and sends; callers' tokens must stay below.
    public static let internalTokens: UInt64 = 1 << 62

    public struct Configuration: Sendable {
        /// Deadline of a command without a more specific one.
        public var commandTimeout: Duration = .seconds(3)
        /// Deadline of commands the host can do without (data length, PHY, parameter updates): a
        /// controller that ignores one stalls the command queue only this long, once.
        public var optionalCommandTimeout: Duration = .milliseconds(500)
        /// How long to wait for Disconnection Complete after Disconnect.
        public var teardownTimeout: Duration = .seconds(3)
        public var initiator = ConnectionInitiator.Configuration()
        public var scan = ScanController.Parameters()
        /// Overrides what LE Read Supported States says about scanning while initiating.
        public var scanWhileInitiating: Bool?
        /// How the Filter Accept List is used.
        public var acceptList: AcceptListMode = .auto
        /// Ask for 251-byte LL payloads on every link where the controller supports them.
        public var dataLength = true
        /// Ask for the LE 2M PHY on every link where the controller supports it.
        public var twoMegabitPHY = true
        /// Each link gets a Security Manager (`HCISecurity`): SMP PDUs, encryption events and callers'
        /// requests go to it. Without, every pairing request is answered "pairing not supported".
        public var securityHandler = false
        /// Randomness and key pairs of the Security Managers (fixed in tests that check golden bytes).
        public var securityRandom: @Sendable () -> any SMPRandomSource = { SystemRandom() }
        /// The byte stream can lose bytes (a UART): bytes that are no H4 packet, once the stream was in
        /// step, mean it lost sync — the host resets the controller and brings it up again. Off (TCP,
        /// the user channel), such bytes are skipped and counted.
        public var resynchronise = false
        /// How long to wait before each attempt to reopen a transport that went away (the last value
        /// repeats); `reopenAttempts` attempts in all before the adapter fails.
        public var reopenDelays: [Duration] = [.milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1)]
        public var reopenAttempts = 30

        public init() {}
    }

    /// How connection creation uses the controller's Filter Accept List.
    public enum AcceptListMode: String, Sendable, Equatable {
        /// Use it where the controller has one; take turns until the controller shows it honours it.
        case auto
        /// Use it and trust the controller to honour it.
        case on
        /// Connect by address, one device at a time.
        case off
    }

    /// What bring-up learned about the controller.
    public struct Capabilities: Sendable, Equatable {
        public var aclMaxLength: Int
        public var aclPackets: Int
        /// LE Read Local Supported Features (nil when the controller would not say).
        public var leFeatures: UInt64?
        /// LE Read Supported States (nil when the controller would not say).
        public var supportedStates: UInt64?
        /// LE Read Filter Accept List Size (0 when the controller would not say).
        public var acceptListSize: Int
        /// HCI Read RSSI works on a link (probed at bring-up).
        public var readsRSSI: Bool
        /// Scan and connect with the extended commands (LE Set Extended Scan Parameters/Enable, LE
        /// Extended Create Connection): the controller has them, and extended advertising.
        public var extended: Bool
        /// The controller takes LE Remote Connection Parameter Request Reply (so the host answers the
        /// peer's LL request; without it the controller answers by itself).
        public var connectionParameterReply: Bool

        public init(aclMaxLength: Int, aclPackets: Int, leFeatures: UInt64? = nil, supportedStates: UInt64? = nil,
                    acceptListSize: Int = 0, readsRSSI: Bool = false, extended: Bool = false, connectionParameterReply: Bool = true) {
            self.aclMaxLength = aclMaxLength
            self.aclPackets = aclPackets
            self.leFeatures = leFeatures
            self.supportedStates = supportedStates
            self.acceptListSize = acceptListSize
            self.readsRSSI = readsRSSI
            self.extended = extended
            self.connectionParameterReply = connectionParameterReply
        }
    }

    /// Counters of hostile or surprising input, for tests and diagnostics.
    public struct Statistics: Sendable, Equatable {
        public var malformedEvents = 0
        public var droppedACLPackets = 0
        public var discardedH4Bytes = 0
        public var ignoredCompletedPackets = 0
        public var commandTimeouts = 0
        public var unexpectedEvents = 0
        public var advertisingReports = 0
        public var connections = 0
        public var orphanConnections = 0
        /// Times the controller was brought up again (Hardware Error, lost sync, transport back).
        public var reinitialisations = 0
        /// Peer requests for other connection parameters accepted and refused (L2CAP and LL).
        public var parameterRequestsAccepted = 0
        public var parameterRequestsRefused = 0

        public init() {}
    }

    /// A link that just came up.
    public struct LinkInfo: Sendable, Equatable {
        public var id: LinkID
        public var handle: UInt16
        public var peer: BluetoothAddress
        /// RSSI of the last advertisement heard from the peer, if any.
        public var heardRSSI: Int?
        /// What the link got, as LE Connection Complete reported it.
        public var parameters: LinkParameters
    }

    /// A deadline the executor arms (and disarms) for the host.
    public enum Deadline: Sendable, Hashable {
        case command(Token)
        case connect(RequestID)
        case initiator(ConnectionInitiator.Timer)
        case disconnection(LinkID)
        /// The link's Security Manager timer (Vol 3 Part H 3.4).
        case security(LinkID)
        /// Time to try reopening the transport that went away.
        case reopen
    }

    public enum Event: Sendable, Equatable {
        /// Bytes read from the controller, in chunks of any size.
        case received([UInt8])
        /// A caller's command (bring-up, Read RSSI); `timeout` nil for the default.
        case command(Token, HCICommandPacket, timeout: Duration?)
        /// The caller stopped waiting for its command.
        case abandonCommand(Token)
        /// Bring the controller up (`ControllerSetup`); answered by `.controllerUp` or `.failure`.
        case start(ControllerSetup.Configuration)
        /// Bring-up was done elsewhere: what the controller can do (tests drive the host from here).
        case controllerReady(Capabilities)
        /// A caller wants a link to `peer` within `timeout`, with what `link` asks of the radio.
        case connect(RequestID, BluetoothAddress, timeout: Duration, link: LinkPreferences? = nil)
        /// The caller was cancelled.
        case cancelConnect(RequestID)
        /// Drop a link; `reason` is what its owner will be told.
        case disconnect(LinkID, reason: DisconnectReason)
        /// Send an L2CAP frame; `.sent` once it is all with the controller.
        case send(Token, LinkID, L2CAPBasicFrame.ChannelID, [UInt8])
        case cancelSend(Token)
        /// Someone wants advertisements (or nobody does any more).
        case scanWanted(Bool)
        case deadline(Deadline)
        /// A link the executor handed out gets its Security Manager (addresses, stored bond, policy).
        case attachSecurity(LinkID, SMPCentralConfiguration)
        /// A caller wants the link secured as `request` asks; answered by `securityCompleted`/`securityFailed`.
        case secure(LinkID, RequestID, SecurityRequest)
        /// The caller stopped waiting for its `secure`.
        case cancelSecure(LinkID, RequestID)
        /// The transport ended (the TCP peer closed, the dongle went away): every link is lost; the host
        /// asks to reopen it (`.reopenTransport`) and brings the controller up again.
        case transportLost(String)
        /// The transport was opened again: the controller is brought up with the same identity.
        case transportReopened
        /// Opening it again failed.
        case transportReopenFailed(String)
    }

    public enum Action: Sendable, Equatable {
        /// Write these bytes (whole H4 packets) to the controller.
        case write([UInt8])
        case arm(Deadline, Duration)
        case disarm(Deadline)
        case commandFinished(Token, HCICommandFlow.Outcome)
        case connected(RequestID, LinkInfo)
        case connectFailed(RequestID, BLEError)
        case linkDown(LinkID, DisconnectReason)
        /// An ATT PDU for the link's bearer.
        case att(LinkID, [UInt8])
        /// A link's security procedure ended well; `RequestID` nil when no caller asked (a peer's
        /// Security Request) — a bond in it is to be stored all the same.
        case securityCompleted(LinkID, RequestID?, SMPOutcome)
        case securityFailed(LinkID, RequestID?, SMPFailure)
        /// This side shows a passkey for an operator to type on the device.
        case displayPasskey(LinkID, Passkey)
        case sent(Token)
        case sendFailed(Token, BLEError)
        /// An advertisement (merged with its scan response) was heard.
        case advertisement(AdvertisementCache.Entry)
        /// Scanning could not be started.
        case scanFailed(String)
        /// The usable connection slots changed.
        case slots(Int)
        case log(String)
        /// The controller is up (again): what it is, the station's identity on it.
        case controllerUp(ControllerSetup.Profile)
        /// The controller reset, lost sync or went away; it is being brought up again (its links are
        /// down, pending connects wait).
        case controllerDown(String)
        /// Open the transport again (it went away).
        case reopenTransport
        /// What a link got from the radio changed (interval, PHY, data length).
        case linkParameters(LinkID, LinkParameters)
        /// The controller is unusable: bring-up failed, or it went away for good.
        case failure(BLEError)
    }

    private enum Owner: Sendable {
        case external
        case setup(ControllerSetup.Step)
        case initiator(ConnectionInitiator.Command)
        case scanner(ScanController.Command)
        case disconnect(LinkID)
        case tuning(Tuning, LinkID)
        case parameterUpdate(LinkID)
        case parameterReply(LinkID)
        case encryption(LinkID)
        case longTermKeyRefusal
    }

    private enum Tuning: String, Sendable {
        case dataLength = "LE Set Data Length"
        case phy = "LE Set PHY"
        case interval = "LE Connection Update"
    }

    /// Where the controller is.
    private enum Phase: Sendable, Equatable {
        /// Working (also a host that was never started: tests drive it with `.controllerReady`).
        case up
        /// `ControllerSetup` runs; `initial` for the first bring-up (a failure then fails the open).
        case settingUp(initial: Bool)
        /// The transport went away; `attempt` reopens tried so far.
        case reopening(attempt: Int)
        case failed
    }

    private struct LinkState: Sendable {
        var id: LinkID
        var handle: UInt16
        var peer: BluetoothAddress
        var router: FixedChannelRouter
        /// Nobody asked for it: it is being dropped.
        var orphan: Bool
        var disconnecting = false
        var localReason: DisconnectReason?
        var target: LinkTuning.Target
        var parameters: LinkParameters
    }

    public let configuration: Configuration
    public private(set) var capabilities: Capabilities?
    private var stats = Statistics()
    private var decoder = H4Decoder()
    private var commandFlow = HCICommandFlow()
    private var initiator: ConnectionInitiator
    private var scanner: ScanController
    private var acl = ACLFlowControl(maxFragment: 27, credits: 1)
    private var cache = AdvertisementCache()
    private var owners: [Token: Owner] = [:]
    private var links: [UInt16: LinkState] = [:]
    private var handles: [LinkID: UInt16] = [:]
    private var requests: [RequestID: (peer: BluetoothAddress, timeout: Duration, link: LinkPreferences?)] = [:]
    private var nextInternal: UInt64 = HCIHost.internalTokens
    private var nextLink: LinkID = 1
    private var scanWaiting = false
    private var dataLengthOff = false
    private var phyOff = false
    private var security: HCISecurity
    private var phase = Phase.up
    private var setup: ControllerSetup?
    /// The last bring-up's configuration and result (kept to bring the controller up again).
    private var setupConfiguration: ControllerSetup.Configuration?
    public private(set) var profile: ControllerSetup.Profile?
    /// Someone wants advertisements (kept while the controller is down).
    private var scanWanted = false
    /// The stream has been in step since the last flush (a Command Complete or Status came).
    private var synced = false
    /// Initiator deadlines armed now (disarmed when the machine is replaced).
    private var initiatorTimers: Set<ConnectionInitiator.Timer> = []
    /// Counters of machines replaced at a re-initialisation.
    private var retired = Statistics()
    /// Restarts since the controller was last up.
    private var consecutiveRestarts = 0

    public init(_ configuration: Configuration = Configuration()) {
        self.configuration = configuration
        decoder = H4Decoder(fromController: true)
        initiator = ConnectionInitiator(configuration.initiator)
        scanner = ScanController(parameters: configuration.scan, scansWhileInitiating: configuration.scanWhileInitiating ?? false)
        security = HCISecurity(random: configuration.securityRandom)
    }

    public var statistics: Statistics {
        var s = stats
        s.commandTimeouts = commandFlow.counters.timeouts
        s.unexpectedEvents += commandFlow.counters.unexpectedAnswers + initiator.counters.lateCompletions + retired.unexpectedEvents
        return s
    }

    /// Bytes of an incomplete packet held back by the H4 decoder.
    public var pendingInputBytes: Int { decoder.pendingBytes }
    /// Links the controller holds now (including ones being dropped).
    public var linkCount: Int { links.count }
    /// Usable connection slots (lowered by Connection Limit Exceeded).
    public var slots: Int { initiator.configuration.slots }
    /// Whether the controller is scanning.
    public var isScanning: Bool { scanner.enabled }
    /// Whether the controller is up (not being brought up, not gone).
    public var isUp: Bool { phase == .up }
    /// What a link got from the radio, as its controller last reported it.
    public func parameters(of link: LinkID) -> LinkParameters? { handles[link].flatMap { links[$0]?.parameters } }
    /// The connection machine (for inspection).
    public var connections: ConnectionInitiator { initiator }
    /// The last advertisement heard from `address`.
    public func heard(_ address: BluetoothAddress) -> AdvertisementCache.Entry? { cache.entry(for: address) }

    public mutating func handle(_ event: Event) -> [Action] {
        var out: [Action] = []
        switch event {
        case .received(let bytes):
            receive(bytes, &out)
        case .command(let token, let packet, let timeout):
            owners[token] = .external
            commands(.submit(token, packet, timeout: timeout ?? configuration.commandTimeout), &out)
        case .abandonCommand(let token):
            commands(.abandon(token), &out)
            owners[token] = nil
        case .start(let c):
            setupConfiguration = c
            startSetup(initial: true, &out)
        case .controllerReady(let caps):
            phase = .up
            ready(caps, &out)
        case .connect(let id, let peer, let timeout, let link):
            connect(id, peer, timeout, link, &out)
        case .cancelConnect(let id):
            withdraw(id, .cancelled, &out)
        case .disconnect(let linkID, let reason):
            disconnect(linkID, reason: reason, &out)
        case .send(let token, let linkID, let channel, let payload):
            guard let h = handles[linkID], let link = links[h], !link.orphan else {
                out.append(.sendFailed(token, .disconnected(.remoteUserTerminated)))
                break
            }
            aclActions(acl.enqueue(token: token, handle: h, frame: L2CAPBasicFrame(channel: channel, payload: payload).bytes),
                       reason: .remoteUserTerminated, &out)
        case .cancelSend(let token):
            if acl.cancel(token: token) { out.append(.sendFailed(token, .cancelled)) }
        case .scanWanted(let wanted):
            scanWanted = wanted
            if phase == .up { scan(scanner.handle(.wanted(wanted)), &out) }
        case .deadline(let deadline):
            expired(deadline, &out)
        case .attachSecurity(let linkID, let c):
            guard handles[linkID] != nil else { break }
            secure(.attach(linkID, c), &out)
        case .secure(let linkID, let id, let request):
            secure(.secure(linkID, id, request), &out)
        case .cancelSecure(let linkID, let id):
            secure(.cancel(linkID, id), &out)
        case .transportLost(let why):
            transportLost(why, &out)
        case .transportReopened:
            guard case .reopening = phase else { break }
            out.append(.log("the transport is back; bringing the controller up again"))
            startSetup(initial: false, &out)
        case .transportReopenFailed(let why):
            reopenFailed(why, &out)
        }
        let waiting = phase == .up && scanner.sharesRadioWithInitiating
        if waiting != scanWaiting {
            scanWaiting = waiting
            runInitiator(.scanWaiting(waiting), &out)
        }
        return out
    }

    // MARK: - Controller setup and recovery

    private mutating func startSetup(initial: Bool, _ out: inout [Action]) {
        guard var c = setupConfiguration else {
            phase = .failed
            out.append(.failure(.adapterFailure("the controller must be brought up again, and this host was never told how")))
            return
        }
        if let identity = profile?.identity { c.identity.pinned = identity }
        var machine = ControllerSetup(c)
        phase = .settingUp(initial: initial)
        let actions = machine.start()
        setup = machine
        runSetup(actions, &out)
    }

    private mutating func runSetup(_ actions: [ControllerSetup.Action], _ out: inout [Action]) {
        for action in actions {
            switch action {
            case .send(let step, let packet, let timeout):
                submit(.setup(step), packet, timeout: timeout, &out)
            case .flushInput:
                decoder.flush()
                synced = false
            case .done(let p):
                let again = profile != nil
                setup = nil
                profile = p
                phase = .up
                consecutiveRestarts = 0
                ready(p.capabilities, &out)
                out.append(.controllerUp(p))
                if again {
                    out.append(.log("controller up again as \(p.identity.address); \(requests.count) connect(s) waiting resume"))
                }
            case .failed(let why):
                let initial = phase == .settingUp(initial: true)
                setup = nil
                phase = .failed
                out.append(.failure(.adapterFailure(initial ? why : "bringing the controller up again failed: \(why)")))
            case .log(let text):
                out.append(.log(text))
            }
        }
    }

    private func reopenDelay(_ attempt: Int) -> Duration {
        let delays = configuration.reopenDelays
        guard let last = delays.last else { return .seconds(1) }
        return attempt < delays.count ? delays[attempt] : last
    }

    private mutating func transportLost(_ why: String, _ out: inout [Action]) {
        switch phase {
        case .failed:
            return
        case .settingUp(initial: true):
            phase = .failed
            out.append(.failure(.adapterFailure(why)))
        case .reopening:
            // Already reopening: a transport that failed while coming back counts as a failed attempt.
            reopenFailed(why, &out)
        case .up, .settingUp(initial: false):
            guard setupConfiguration != nil, configuration.reopenAttempts > 0 else {
                phase = .failed
                out.append(.failure(.adapterFailure(why)))
                return
            }
            restart("went away (\(why))", transport: true, &out)
        }
    }

    private mutating func reopenFailed(_ why: String, _ out: inout [Action]) {
        guard case .reopening(let attempt) = phase else { return }
        let tried = attempt + 1
        if tried >= configuration.reopenAttempts {
            phase = .failed
            out.append(.failure(.adapterFailure("the controller went away and did not come back after \(tried) attempts to reopen it (\(why))")))
        } else {
            phase = .reopening(attempt: tried)
            out.append(.arm(.reopen, reopenDelay(tried)))
        }
    }

    /// The controller reset, lost sync or went away: every link is down (its owner hears a retryable
    /// disconnect), every command ends, the machines start over; connects keep waiting (their own
    /// deadlines run); then the controller is brought up again with the same identity, or — when the
    /// transport went away — the transport is reopened first.
    private mutating func restart(_ why: String, transport: Bool, _ out: inout [Action]) {
        consecutiveRestarts += 1
        if consecutiveRestarts > 3 {
            phase = .failed
            out.append(.failure(.adapterFailure("the controller \(why), for the \(consecutiveRestarts)th time without coming up in between")))
            return
        }
        let wasInitial = phase == .settingUp(initial: true)
        stats.reinitialisations += 1
        let reason = DisconnectReason(code: HCIStatus.unspecifiedError.rawValue, text: "the controller \(why); the adapter brings it up again")
        // Not up from here: nothing below may start connecting or scanning on the old controller.
        phase = transport ? .reopening(attempt: 0) : .settingUp(initial: wasInitial)
        setup = nil
        for h in Array(links.keys) { linkDown(h, reason: reason, &out) }
        commands(.reset, &out)
        owners = [:]
        for timer in initiatorTimers { out.append(.disarm(.initiator(timer))) }
        initiatorTimers = []
        retired.unexpectedEvents += initiator.counters.lateCompletions
        initiator = ConnectionInitiator(configuration.initiator)
        scanner = ScanController(parameters: configuration.scan, scansWhileInitiating: false)
        scanWaiting = false
        acl = ACLFlowControl(maxFragment: 27, credits: 1)
        decoder.flush()
        synced = false
        out.append(.controllerDown(why))
        out.append(.log("the controller \(why): \(reason.text); \(requests.count) connect(s) wait for it"))
        if transport {
            out.append(.arm(.reopen, reopenDelay(0)))
        } else {
            startSetup(initial: wasInitial, &out)
        }
    }

    // MARK: - Bring-up

    private mutating func ready(_ caps: Capabilities, _ out: inout [Action]) {
        capabilities = caps
        acl = ACLFlowControl(maxFragment: caps.aclMaxLength, credits: caps.aclPackets)
        var ic = configuration.initiator
        ic.acceptListSize = configuration.acceptList == .off ? 0 : caps.acceptListSize
        ic.acceptListTrusted = configuration.acceptList == .on
        for timer in initiatorTimers { out.append(.disarm(.initiator(timer))) }
        initiatorTimers = []
        retired.unexpectedEvents += initiator.counters.lateCompletions
        initiator = ConnectionInitiator(ic)
        let states = caps.supportedStates.map { LESupportedStatesReturn(states: $0) }
        let coexist = configuration.scanWhileInitiating ?? states?.scansWhileInitiating(active: configuration.scan.active) ?? false
        scanner = ScanController(parameters: configuration.scan, scansWhileInitiating: coexist)
        scanWaiting = false
        if scanWanted { scan(scanner.handle(.wanted(true)), &out) }
        let listText = ic.acceptListSize >= 2
            ? "Filter Accept List of \(ic.acceptListSize)" + (ic.acceptListTrusted ? " (trusted)" : "")
            : "no Filter Accept List in use" + (configuration.acceptList == .off ? " (accept-list=off)" : "")
        out.append(.log("connects with \(listText); \(coexist ? "scans while connecting" : "pauses scanning to connect"); "
                        + "data length \(wantsDataLength ? "251" : "default"), PHY \(wantsPHY ? "2M" : "1M")"
                        + (caps.extended ? "; extended scanning and connecting" : "")))
        // Connects that waited while the controller was down go to the new initiator together, oldest first.
        let waiting = requests.keys.sorted().compactMap { waitingRequest($0) }
        if !waiting.isEmpty { runInitiator(.requests(waiting), &out) }
    }

    /// The controller takes LE Set Data Length (and has not ignored it on a link).
    private var dataLengthUsable: Bool {
        !dataLengthOff && (capabilities?.leFeatures ?? 0) & LEFeaturesReturn.dataLengthExtension != 0
    }

    private var phyUsable: Bool {
        !phyOff && (capabilities?.leFeatures ?? 0) & LEFeaturesReturn.twoMegabitPHY != 0
    }

    private var wantsDataLength: Bool { configuration.dataLength && dataLengthUsable }
    private var wantsPHY: Bool { configuration.twoMegabitPHY && phyUsable }

    /// A link's target: the adapter's defaults with what its connect asked for (`LinkTuning`).
    private func linkTarget(_ preferences: LinkPreferences?) -> LinkTuning.Target {
        let abilities = LinkTuning.Abilities(dataLength: dataLengthUsable, twoMegabitPHY: phyUsable,
                                             codedPHY: !phyOff && (capabilities?.leFeatures ?? 0) & LEFeaturesReturn.codedPHY != 0)
        return LinkTuning.target(defaults: configuration.initiator.parameters, defaultDataLength: wantsDataLength ? 251 : nil,
                                 defaultPHY: wantsPHY ? .le2M : nil, abilities: abilities, preferences: preferences)
    }

    /// LE Create Connection parameters for a connect that asks for its own interval, latency or timeout.
    private func initiatorParameters(_ preferences: LinkPreferences?) -> ConnectionInitiator.Parameters? {
        guard let p = preferences, p.interval != nil || p.latency != nil || p.supervisionTimeout != nil else { return nil }
        let t = linkTarget(p)
        var parameters = configuration.initiator.parameters
        parameters.intervalMin = t.intervalMin
        parameters.intervalMax = t.intervalMax
        parameters.latency = t.latency
        parameters.supervisionTimeout = t.supervisionTimeout
        return parameters
    }

    // MARK: - Commands

    private mutating func submit(_ owner: Owner, _ packet: HCICommandPacket, timeout: Duration, _ out: inout [Action]) {
        let token = nextInternal
        nextInternal &+= 1
        owners[token] = owner
        commands(.submit(token, packet, timeout: timeout), &out)
    }

    private mutating func commands(_ event: HCICommandFlow.Event, _ out: inout [Action]) {
        for action in commandFlow.handle(event) {
            switch action {
            case .send(let bytes):
                out.append(.write([H4PacketType.command.rawValue] + bytes))
            case .armTimeout(let token, let limit):
                out.append(.arm(.command(token), limit))
            case .disarmTimeout(let token):
                out.append(.disarm(.command(token)))
            case .finished(let token, _, let outcome):
                guard let owner = owners.removeValue(forKey: token) else { continue }
                finished(owner, token, outcome, &out)
            case .note(let text):
                out.append(.log(text))
            }
        }
    }

    private static func status(of outcome: HCICommandFlow.Outcome) -> HCIStatus? {
        switch outcome {
        case .status(let s): return s
        case .complete(let parameters): return parameters.first.map { HCIStatus(rawValue: $0) } ?? .unspecifiedError
        case .timedOut, .controllerReset: return nil
        }
    }

    private mutating func finished(_ owner: Owner, _ token: Token, _ outcome: HCICommandFlow.Outcome, _ out: inout [Action]) {
        let status = Self.status(of: outcome)
        if case .controllerReset = outcome {
            // The controller is being brought up again: only callers hear of their commands; the
            // machines that sent the others are replaced.
            if case .external = owner { out.append(.commandFinished(token, outcome)) }
            return
        }
        switch owner {
        case .external:
            out.append(.commandFinished(token, outcome))
        case .setup(let step):
            guard var machine = setup else { return }
            let actions = machine.finished(step, outcome)
            setup = machine
            runSetup(actions, &out)
        case .initiator(let command):
            let result: ConnectionInitiator.CommandResult = status.map { $0 == .success ? .success : .failed($0) } ?? .timedOut
            runInitiator(.commandFinished(command, result), &out)
        case .scanner(let command):
            scan(scanner.handle(.commandFinished(command, status)), &out)
        case .disconnect(let linkID):
            guard let h = handles[linkID], let link = links[h] else { return }
            if status == .success {
                out.append(.arm(.disconnection(linkID), configuration.teardownTimeout))
            } else {
                out.append(.log("Disconnect of 0x\(String(h, radix: 16)) \(status.map { "failed: \($0)" } ?? "got no answer"); dropping the link locally"))
                linkDown(h, reason: link.localReason ?? .localHostTerminated, &out)
            }
        case .tuning(let tuning, _):
            guard status != .success else { return }
            let global = status == nil || status == .unknownCommand || status == .unsupportedFeature
            if global && tuning != .interval {
                switch tuning {
                case .dataLength: dataLengthOff = true
                case .phy: phyOff = true
                case .interval: break
                }
                out.append(.log("the controller did not take \(tuning.rawValue) (\(status.map { "\($0)" } ?? "no answer")); not asking again"))
            } else if let status {
                out.append(.log("\(tuning.rawValue) failed: \(status)"))
            }
        case .parameterUpdate(let linkID):
            if status != .success {
                out.append(.log("LE Connection Update for link \(linkID) \(status.map { "failed: \($0)" } ?? "got no answer")"))
            }
        case .parameterReply(let linkID):
            if status != .success {
                out.append(.log("the answer to link \(linkID)'s connection parameter request \(status.map { "failed: \($0)" } ?? "got no answer")"))
            }
        case .encryption(let linkID):
            if status != .success { secure(.encryptionRefused(linkID, status), &out) }
        case .longTermKeyRefusal:
            break
        }
    }

    // MARK: - Connecting

    private mutating func connect(_ id: RequestID, _ peer: BluetoothAddress, _ timeout: Duration, _ link: LinkPreferences?,
                                  _ out: inout [Action]) {
        requests[id] = (peer, timeout, link)
        out.append(.arm(.connect(id), timeout))
        // While the controller is being brought up the request waits; `ready` hands it over.
        if phase == .up { feedRequest(id, &out) }
    }

    /// Hands a waiting connect to the initiator.
    private mutating func feedRequest(_ id: RequestID, _ out: inout [Action]) {
        guard let w = waitingRequest(id) else { return }
        runInitiator(.request(id, peer: w.peer, inferredType: w.inferredType, parameters: w.parameters), &out)
    }

    /// A waiting connect as the initiator takes it. The address type: as heard; else an inventory
    /// address with the static random address's top bits (0b11) is taken as random, and turns
    /// alternate the guess.
    private func waitingRequest(_ id: RequestID) -> ConnectionInitiator.Waiting? {
        guard let r = requests[id] else { return nil }
        var target = r.peer
        var inferred = false
        if let heard = cache.entry(for: r.peer) {
            target.kind = heard.address.kind
        } else if r.peer.kind == .public, r.peer.value >> 46 == 0b11 {
            target.kind = .random
            inferred = true
        }
        return ConnectionInitiator.Waiting(id: id, peer: target, inferredType: inferred, parameters: initiatorParameters(r.link))
    }

    private mutating func withdraw(_ id: RequestID, _ error: BLEError, _ out: inout [Action]) {
        guard requests.removeValue(forKey: id) != nil else { return }
        out.append(.disarm(.connect(id)))
        out.append(.connectFailed(id, error))
        runInitiator(.withdraw(id), &out)
    }

    private mutating func runInitiator(_ event: ConnectionInitiator.Event, _ out: inout [Action]) {
        // Nothing goes to a controller that is down: `ready` hands the waiting connects to a new machine.
        guard phase == .up else { return }
        for action in initiator.handle(event) {
            switch action {
            case .send(let command):
                if case .create(let c) = command {
                    out.append(.log(c.filterPolicy == 0 ? "creating a connection to \(c.peer)"
                        : "creating a connection to whichever of \(initiator.list.entries.count) devices in the Filter Accept List advertises first"))
                }
                submit(.initiator(command), wire(command), timeout: configuration.commandTimeout, &out)
            case .requestRadio:
                scan(scanner.handle(.initiation(true)), &out)
            case .releaseRadio:
                scan(scanner.handle(.initiation(false)), &out)
            case .connected(let id, let e):
                let target = linkTarget(requests[id]?.link)
                let linkID = register(e, orphan: false, target: target, &out)
                guard requests.removeValue(forKey: id) != nil else {
                    // The caller is gone (cannot happen: withdrawing removes the request first).
                    drop(linkID, &out)
                    continue
                }
                stats.connections += 1
                out.append(.disarm(.connect(id)))
                let parameters = LinkTuning.parameters(interval: e.interval, latency: e.latency, timeout: e.supervisionTimeout)
                out.append(.connected(id, LinkInfo(id: linkID, handle: e.handle, peer: e.peer, heardRSSI: cache.entry(for: e.peer)?.rssi,
                                                   parameters: parameters)))
                tune(linkID, e, target, &out)
                runInitiator(.links(links.count), &out)
            case .failed(let id, let failure):
                guard requests.removeValue(forKey: id) != nil else { continue }
                out.append(.disarm(.connect(id)))
                out.append(.connectFailed(id, Self.error(failure)))
            case .orphan(let e):
                stats.orphanConnections += 1
                let linkID = register(e, orphan: true, target: linkTarget(nil), &out)
                drop(linkID, &out)
                runInitiator(.links(links.count), &out)
            case .arm(let timer, let limit):
                initiatorTimers.insert(timer)
                out.append(.arm(.initiator(timer), limit))
            case .disarm(let timer):
                initiatorTimers.remove(timer)
                out.append(.disarm(.initiator(timer)))
            case .slots(let n):
                out.append(.slots(n))
                out.append(.log("the controller refused a connection with Connection Limit Exceeded; using \(n) connection slot(s) from now on"))
            case .note(let text):
                out.append(.log(text))
            }
        }
    }

    private static func error(_ failure: ConnectionInitiator.Failure) -> BLEError {
        switch failure {
        case .controller(let status):
            return .connectFailed("controller: \(status)")
        case .noSlot(let n):
            return .connectFailed("all \(n) connection slots are in use")
        case .limitExceeded(let n):
            return .connectFailed("the controller holds no more links (connection limit exceeded); \(n) slot(s) from now on")
        }
    }

    /// Asks for what the link's target wants and the connection did not bring: its data length (LE Set
    /// Data Length), its PHY (LE Set PHY) and its interval (LE Connection Update). A controller that
    /// ignores or rejects the first two is asked no more.
    private mutating func tune(_ linkID: LinkID, _ e: LEConnectionCompleteEvent, _ t: LinkTuning.Target, _ out: inout [Action]) {
        if let octets = t.dataLength {
            // TX_Time for that many octets on LE 1M, (octets + 14) × 8 µs; the controller lowers it for
            // faster PHYs (Vol 6 Part B 4.5.10).
            let time = UInt16(clamping: max(328, (Int(octets) + 14) * 8))
            submit(.tuning(.dataLength, linkID), HCICommandPacket(command: LESetDataLengthCommand(handle: e.handle, txOctets: octets, txTime: time)),
                   timeout: configuration.optionalCommandTimeout, &out)
        }
        if let phy = t.phy {
            submit(.tuning(.phy, linkID), HCICommandPacket(command: LESetPHYCommand(handle: e.handle, txPHYs: phy.preferenceBit, rxPHYs: phy.preferenceBit)),
                   timeout: configuration.optionalCommandTimeout, &out)
        }
        if !LinkTuning.inRange(interval: e.interval, latency: e.latency, t) {
            let update = LEConnectionUpdateCommand(handle: e.handle, intervalMin: t.intervalMin, intervalMax: t.intervalMax,
                                                   maxLatency: t.latency, supervisionTimeout: t.supervisionTimeout)
            submit(.tuning(.interval, linkID), HCICommandPacket(command: update), timeout: configuration.optionalCommandTimeout, &out)
        }
    }

    /// The packet a scan command goes out as: the extended commands on a controller that scans with them.
    private func wire(_ command: ScanController.Command) -> HCICommandPacket {
        guard capabilities?.extended == true else { return command.packet }
        switch command {
        case .parameters(let c):
            // Primary advertising on LE 1M; the controller follows AUX_ADV_IND to any secondary PHY it has.
            let p = ExtendedScanPHYParameters(scanType: c.scanType, interval: c.interval, window: c.window)
            return HCICommandPacket(command: LESetExtendedScanParametersCommand(ownAddressType: c.ownAddressType, filterPolicy: c.filterPolicy,
                                                                                 phys: LinkPHY.le1M.preferenceBit, parameters: [p]))
        case .enable(let on):
            return HCICommandPacket(command: LESetExtendedScanEnableCommand(enable: on))
        }
    }

    /// The packet an initiator command goes out as: LE Extended Create Connection on a controller that
    /// connects with it (scanning LE 1M; parameters for LE 2M too, for an AUX_ADV_IND on LE 2M).
    private func wire(_ command: ConnectionInitiator.Command) -> HCICommandPacket {
        guard capabilities?.extended == true, case .create(let c) = command else { return command.packet }
        let phys = LinkPHY.le1M.preferenceBit | (phyUsable ? LinkPHY.le2M.preferenceBit : 0)
        return HCICommandPacket(command: LEExtendedCreateConnectionCommand(c, phys: phys))
    }

    // MARK: - Scanning

    private mutating func scan(_ actions: [ScanController.Action], _ out: inout [Action]) {
        guard phase == .up else { return }
        for action in actions {
            switch action {
            case .send(let command):
                submit(.scanner(command), wire(command), timeout: configuration.commandTimeout, &out)
            case .radioFree:
                runInitiator(.radioGranted, &out)
            case .failed(let why):
                out.append(.scanFailed(why))
            case .note(let text):
                out.append(.log(text))
            }
        }
    }

    private mutating func advertisingReports(_ reports: [AdvertisingReport], _ out: inout [Action]) {
        for report in reports {
            stats.advertisingReports += 1
            guard let entry = cache.record(report) else {
                out.append(.log("dropped malformed advertising data from \(report.address)"))
                continue
            }
            out.append(.advertisement(entry))
            if initiator.pendingCount > 0 { runInitiator(.heard(report.address), &out) }
        }
    }

    // MARK: - Links

    private mutating func register(_ e: LEConnectionCompleteEvent, orphan: Bool, target: LinkTuning.Target, _ out: inout [Action]) -> LinkID {
        if let old = links[e.handle] {
            out.append(.log("handle 0x\(String(e.handle, radix: 16)) reused while still known; dropping the old link"))
            linkDown(e.handle, reason: old.localReason ?? .supervisionTimeout, &out)
        }
        let id = nextLink
        nextLink += 1
        links[e.handle] = LinkState(id: id, handle: e.handle, peer: e.peer,
                                    router: FixedChannelRouter(securityHandler: configuration.securityHandler, target: target),
                                    orphan: orphan, target: target,
                                    parameters: LinkTuning.parameters(interval: e.interval, latency: e.latency, timeout: e.supervisionTimeout))
        handles[id] = e.handle
        return id
    }

    /// Records what a link got from the radio and tells the executor.
    private mutating func update(_ handle: UInt16, _ out: inout [Action], _ change: (inout LinkParameters) -> Void) {
        guard var link = links[handle] else { return }
        let before = link.parameters
        change(&link.parameters)
        links[handle] = link
        if link.parameters != before && !link.orphan { out.append(.linkParameters(link.id, link.parameters)) }
    }

    private mutating func disconnect(_ linkID: LinkID, reason: DisconnectReason = .localHostTerminated, _ out: inout [Action]) {
        guard let h = handles[linkID], var link = links[h], !link.disconnecting else { return }
        link.disconnecting = true
        link.localReason = link.localReason ?? reason
        links[h] = link
        // Reason 0x13 (Remote User Terminated): the allowed reason for a host's own disconnect.
        submit(.disconnect(linkID), HCICommandPacket(command: DisconnectCommand(handle: h, reason: .remoteUserTerminated)),
               timeout: configuration.commandTimeout, &out)
    }

    private mutating func drop(_ linkID: LinkID, _ out: inout [Action]) {
        if let h = handles[linkID], let link = links[h] {
            out.append(.log("dropping connection 0x\(String(h, radix: 16)) to \(link.peer)"))
        }
        disconnect(linkID, &out)
    }

    private mutating func linkDown(_ handle: UInt16, reason: DisconnectReason, _ out: inout [Action]) {
        guard let link = links.removeValue(forKey: handle) else { return }
        handles[link.id] = nil
        out.append(.disarm(.disconnection(link.id)))
        secure(.detach(link.id), &out)
        aclActions(acl.connectionClosed(handle: handle), reason: reason, &out)
        if !link.orphan { out.append(.linkDown(link.id, reason)) }
        runInitiator(.links(links.count), &out)
    }

    private mutating func aclActions(_ actions: [ACLFlowControl.Action], reason: DisconnectReason, _ out: inout [Action]) {
        // Fragments released together go to the transport in one write.
        var batch: [UInt8] = []
        for case .transmit(let packet) in actions {
            batch.append(H4PacketType.acl.rawValue)
            batch.append(contentsOf: packet.packet)
        }
        if !batch.isEmpty { out.append(.write(batch)) }
        for action in actions {
            switch action {
            case .transmit:
                break
            case .sent(let token):
                if token < Self.internalTokens { out.append(.sent(token)) }
            case .failed(let token):
                if token < Self.internalTokens { out.append(.sendFailed(token, .disconnected(reason))) }
            }
        }
    }

    private mutating func sendInternal(_ handle: UInt16, _ channel: L2CAPBasicFrame.ChannelID, _ payload: [UInt8], _ out: inout [Action]) {
        let token = nextInternal
        nextInternal &+= 1
        aclActions(acl.enqueue(token: token, handle: handle, frame: L2CAPBasicFrame(channel: channel, payload: payload).bytes),
                   reason: .remoteUserTerminated, &out)
    }

    // MARK: - Deadlines

    private mutating func expired(_ deadline: Deadline, _ out: inout [Action]) {
        switch deadline {
        case .command(let token):
            commands(.timedOut(token), &out)
        case .connect(let id):
            guard let r = requests[id] else { return }
            withdraw(id, .timeout(operation: "connect to \(r.peer)", limit: r.timeout), &out)
        case .initiator(let timer):
            runInitiator(.deadline(timer), &out)
        case .disconnection(let linkID):
            guard let h = handles[linkID], let link = links[h] else { return }
            out.append(.log("no Disconnection Complete for 0x\(String(h, radix: 16)); dropping the link locally"))
            linkDown(h, reason: link.localReason ?? .localHostTerminated, &out)
        case .security(let linkID):
            secure(.timerExpired(linkID), &out)
        case .reopen:
            guard case .reopening = phase else { return }
            out.append(.reopenTransport)
        }
    }

    // MARK: - Incoming

    private mutating func receive(_ bytes: [UInt8], _ out: inout [Action]) {
        guard phase != .failed else { return }
        let before = decoder.discardedBytes
        let packets = decoder.feed(bytes)
        let skipped = decoder.discardedBytes - before
        if skipped > 0 {
            stats.discardedH4Bytes += skipped
            if configuration.resynchronise && synced {
                // Bytes that are no packet in a stream that was in step: it lost some (a UART). What was
                // lost may have been anything — a Command Complete, completed packets, a disconnection —
                // so the controller is reset and brought up again; the decoder looks for the next packet.
                restart("lost sync with the host (\(skipped) byte(s) that are no H4 packet)", transport: false, &out)
                return
            }
            out.append(.log("skipped \(skipped) byte(s) that are not an H4 packet"))
        }
        for packet in packets {
            switch packet.type {
            case .event:
                receiveEvent(packet.bytes, &out)
                guard phase != .failed else { return }
            case .acl: receiveACL(packet.bytes, &out)
            default:
                stats.droppedACLPackets += 1
                out.append(.log("dropped an H4 packet of type 0x\(String(packet.type.rawValue, radix: 16))"))
            }
        }
    }

    private mutating func receiveEvent(_ bytes: [UInt8], _ out: inout [Action]) {
        let event: HCIEvent
        do {
            event = try HCIEvent(packet: bytes)
        } catch {
            stats.malformedEvents += 1
            out.append(.log("dropped malformed event \(bytes.hexString): \(error)"))
            return
        }
        switch event {
        case .commandComplete(let e):
            // In step again: an answer to a command (after a Reset, its answer) is no accident of noise.
            synced = true
            commands(.commandComplete(e), &out)
        case .commandStatus(let e):
            synced = true
            commands(.commandStatus(e), &out)
        case .numberOfCompletedPackets(let e):
            for entry in e.entries {
                let (actions, ignored) = acl.completed(handle: entry.handle, count: Int(entry.count))
                if ignored > 0 {
                    stats.ignoredCompletedPackets += ignored
                    out.append(.log("ignored \(ignored) completed packet(s) for handle 0x\(String(entry.handle, radix: 16)) not in flight"))
                }
                aclActions(actions, reason: .remoteUserTerminated, &out)
            }
        case .disconnectionComplete(let e):
            guard e.status == .success else {
                out.append(.log("Disconnection Complete with status \(e.status) for handle 0x\(String(e.handle, radix: 16))"))
                return
            }
            guard let link = links[e.handle] else {
                stats.unexpectedEvents += 1
                out.append(.log("Disconnection Complete for unknown handle 0x\(String(e.handle, radix: 16))"))
                return
            }
            linkDown(e.handle, reason: link.localReason ?? e.reason.disconnectReason, &out)
        case .leConnectionComplete(let e):
            if e.role == 0 {
                runInitiator(.connectionComplete(e), &out)
            } else {
                stats.unexpectedEvents += 1
                guard e.status == .success else { return }
                // A connection as peripheral: nobody here advertises for one.
                stats.orphanConnections += 1
                out.append(.log("unexpected connection 0x\(String(e.handle, radix: 16)) from \(e.peer); disconnecting"))
                let linkID = register(e, orphan: true, target: linkTarget(nil), &out)
                drop(linkID, &out)
            }
        case .leAdvertisingReport(let e):
            advertisingReports(e.reports.map(\.report), &out)
        case .leExtendedAdvertisingReport(let e):
            advertisingReports(e.reports.map(\.report), &out)
        case .leConnectionUpdateComplete(let e):
            out.append(.log("connection 0x\(String(e.handle, radix: 16)) parameters: status \(e.status), interval \(e.interval) × 1.25 ms, latency \(e.latency), timeout \(e.supervisionTimeout) × 10 ms"))
            guard e.status == .success else { break }
            update(e.handle, &out) { p in
                let n = LinkTuning.parameters(interval: e.interval, latency: e.latency, timeout: e.supervisionTimeout)
                p.interval = n.interval
                p.latency = n.latency
                p.supervisionTimeout = n.supervisionTimeout
            }
        case .leDataLengthChange(let e):
            out.append(.log("connection 0x\(String(e.handle, radix: 16)) data length: TX \(e.maxTxOctets), RX \(e.maxRxOctets) octets"))
            update(e.handle, &out) { p in
                p.txOctets = Int(e.maxTxOctets)
                p.rxOctets = Int(e.maxRxOctets)
            }
        case .lePHYUpdateComplete(let e):
            out.append(.log("connection 0x\(String(e.handle, radix: 16)) PHY: status \(e.status), TX \(e.txPHY), RX \(e.rxPHY)"))
            guard e.status == .success, let tx = LinkPHY(code: e.txPHY), let rx = LinkPHY(code: e.rxPHY) else { break }
            update(e.handle, &out) { p in
                p.txPHY = tx
                p.rxPHY = rx
            }
        case .leRemoteConnectionParameterRequest(let e):
            parameterRequest(e, &out)
        case .hardwareError(let code):
            guard setupConfiguration != nil else {
                out.append(.failure(.adapterFailure("controller hardware error 0x\(String(code, radix: 16))")))
                return
            }
            restart("reported hardware error 0x\(String(code, radix: 16))", transport: false, &out)
        case .encryptionChange(let e):
            guard let link = links[e.handle], !link.orphan else { return }
            secure(.encryptionChanged(link.id, e), &out)
        case .encryptionKeyRefreshComplete(let e):
            guard let link = links[e.handle], !link.orphan else { return }
            secure(.keyRefreshed(link.id, e.status), &out)
        case .leLongTermKeyRequest(let e):
            // This host is never a peripheral: it holds no key for a link the peer encrypts.
            submit(.longTermKeyRefusal, HCICommandPacket(command: LELongTermKeyRequestNegativeReplyCommand(handle: e.handle)),
                   timeout: configuration.optionalCommandTimeout, &out)
        case .leMeta, .unknown:
            break
        }
    }

    private mutating func receiveACL(_ bytes: [UInt8], _ out: inout [Action]) {
        let packet: ACLDataPacket
        do {
            packet = try ACLDataPacket(packet: bytes)
        } catch {
            stats.droppedACLPackets += 1
            out.append(.log("dropped malformed ACL packet: \(error)"))
            return
        }
        guard var link = links[packet.handle] else {
            stats.droppedACLPackets += 1
            out.append(.log("dropped ACL data for unknown handle 0x\(String(packet.handle, radix: 16))"))
            return
        }
        let outputs = link.router.receive(packet)
        links[packet.handle] = link
        for output in outputs {
            switch output {
            case .att(let pdu):
                if !link.orphan { out.append(.att(link.id, pdu)) }
            case .smp(let pdu):
                if !link.orphan { secure(.received(link.id, pdu), &out) }
            case .reply(let channel, let payload):
                sendInternal(packet.handle, channel, payload, &out)
            case .updateParameters(let p):
                stats.parameterRequestsAccepted += 1
                out.append(.log("connection 0x\(String(packet.handle, radix: 16)): the device asked for other parameters (L2CAP); running at interval \(p.intervalMin)–\(p.intervalMax) × 1.25 ms, latency \(p.latency)"))
                let update = LEConnectionUpdateCommand(handle: packet.handle, intervalMin: p.intervalMin, intervalMax: p.intervalMax,
                                                       maxLatency: p.latency, supervisionTimeout: p.timeout)
                submit(.parameterUpdate(link.id), HCICommandPacket(command: update), timeout: configuration.optionalCommandTimeout, &out)
            case .refusedParameters:
                stats.parameterRequestsRefused += 1
                out.append(.log("connection 0x\(String(packet.handle, radix: 16)): refused the device's L2CAP request for connection parameters outside the link's limits"))
            case .dropped(let why):
                stats.droppedACLPackets += 1
                out.append(.log("handle 0x\(String(packet.handle, radix: 16)): \(why)"))
            }
        }
    }

    /// The peer asks for other connection parameters (LL Connection Parameters Request procedure): the
    /// host answers within the link's limits (`LinkTuning.answer`), or refuses with Unacceptable
    /// Connection Parameters. Unanswered, the procedure would time out and the link be lost.
    private mutating func parameterRequest(_ e: LERemoteConnectionParameterRequestEvent, _ out: inout [Action]) {
        let h = String(e.handle, radix: 16)
        guard let link = links[e.handle], let answer = LinkTuning.answer(e.request, target: link.target) else {
            stats.parameterRequestsRefused += 1
            out.append(.log("connection 0x\(h): refused the device's request for interval \(e.intervalMin)–\(e.intervalMax) × 1.25 ms, latency \(e.maxLatency) (outside the link's limits)"))
            submit(.parameterReply(links[e.handle]?.id ?? 0),
                   HCICommandPacket(command: LERemoteConnectionParameterRequestNegativeReplyCommand(handle: e.handle)),
                   timeout: configuration.optionalCommandTimeout, &out)
            return
        }
        stats.parameterRequestsAccepted += 1
        out.append(.log("connection 0x\(h): the device asked for interval \(e.intervalMin)–\(e.intervalMax) × 1.25 ms, latency \(e.maxLatency); accepted at \(answer.intervalMin)–\(answer.intervalMax), latency \(answer.latency)"))
        let reply = LERemoteConnectionParameterRequestReplyCommand(handle: e.handle, intervalMin: answer.intervalMin, intervalMax: answer.intervalMax,
                                                                  maxLatency: answer.latency, timeout: answer.timeout)
        submit(.parameterReply(link.id), HCICommandPacket(command: reply), timeout: configuration.optionalCommandTimeout, &out)
    }

    // MARK: - Security

    /// Feeds the links' Security Managers and carries out what they decide: SMP PDUs on CID 6, LE
    /// Enable Encryption through the command queue, the SMP timer as a deadline, outcomes for callers.
    private mutating func secure(_ event: HCISecurity.Event, _ out: inout [Action]) {
        for action in security.handle(event) {
            switch action {
            case .send(let linkID, let pdu):
                guard let h = handles[linkID] else { continue }
                sendInternal(h, .smp, pdu, &out)
            case .enableEncryption(let linkID, let key):
                guard let h = handles[linkID] else { continue }
                submit(.encryption(linkID), HCICommandPacket(command: LEEnableEncryptionCommand(handle: h, key: key)),
                       timeout: configuration.commandTimeout, &out)
            case .armTimer(let linkID, let limit):
                out.append(.arm(.security(linkID), limit))
            case .disarmTimer(let linkID):
                out.append(.disarm(.security(linkID)))
            case .completed(let linkID, let id, let outcome):
                out.append(.securityCompleted(linkID, id, outcome))
            case .failed(let linkID, let id, let failure):
                out.append(.securityFailed(linkID, id, failure))
            case .displayPasskey(let linkID, let passkey):
                out.append(.displayPasskey(linkID, passkey))
            case .note(let text):
                out.append(.log(text))
            }
        }
    }
}
