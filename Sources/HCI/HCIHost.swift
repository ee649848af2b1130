import BLE

/// The whole HCI host as one value: bytes from the controller and requests from callers in, bytes to
/// write, deadlines to arm and outcomes to deliver out. No clock, no I/O, no tasks: `HCIAdapter`
/// executes the actions (writes, `Timeouts` deadlines, continuations) and feeds back what happens.
///
/// It owns the H4 decoder and composes the protocol machines, routing each event to the one that
/// decides and each machine's command through the one command queue:
/// - `HCICommandFlow`: command credits, FIFO, answers matched to commands, command deadlines;
/// - `ConnectionInitiator` (with `FilterAcceptList`): LE Create Connection, cancel, the accept list;
/// - `ScanController` (with `AdvertisementCache`): the scan and its pause around initiating;
/// - `ACLFlowControl`: ACL credits and fragmentation;
/// - one `FixedChannelRouter` per link: reassembly and the ATT / signalling / SMP channels.
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
        /// SMP PDUs go to a security handler instead of being answered "pairing not supported".
        public var securityHandler = false

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

        public init(aclMaxLength: Int, aclPackets: Int, leFeatures: UInt64? = nil, supportedStates: UInt64? = nil,
                    acceptListSize: Int = 0) {
            self.aclMaxLength = aclMaxLength
            self.aclPackets = aclPackets
            self.leFeatures = leFeatures
            self.supportedStates = supportedStates
            self.acceptListSize = acceptListSize
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

        public init() {}
    }

    /// A link that just came up.
    public struct LinkInfo: Sendable, Equatable {
        public var id: LinkID
        public var handle: UInt16
        public var peer: BluetoothAddress
        /// RSSI of the last advertisement heard from the peer, if any.
        public var heardRSSI: Int?
    }

    /// A deadline the executor arms (and disarms) for the host.
    public enum Deadline: Sendable, Hashable {
        case command(Token)
        case connect(RequestID)
        case initiator(ConnectionInitiator.Timer)
        case disconnection(LinkID)
    }

    public enum Event: Sendable, Equatable {
        /// Bytes read from the controller, in chunks of any size.
        case received([UInt8])
        /// A caller's command (bring-up, Read RSSI); `timeout` nil for the default.
        case command(Token, HCICommandPacket, timeout: Duration?)
        /// The caller stopped waiting for its command.
        case abandonCommand(Token)
        /// Bring-up is done: what the controller can do.
        case controllerReady(Capabilities)
        /// A caller wants a link to `peer` within `timeout`.
        case connect(RequestID, BluetoothAddress, timeout: Duration)
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
        /// An SMP PDU for the security handler.
        case smp(LinkID, [UInt8])
        case sent(Token)
        case sendFailed(Token, BLEError)
        /// An advertisement (merged with its scan response) was heard.
        case advertisement(AdvertisementCache.Entry)
        /// Scanning could not be started.
        case scanFailed(String)
        /// The usable connection slots changed.
        case slots(Int)
        case log(String)
        /// The controller is unusable (hardware error).
        case failure(BLEError)
    }

    private enum Owner: Sendable {
        case external
        case initiator(ConnectionInitiator.Command)
        case scanner(ScanController.Command)
        case disconnect(LinkID)
        case tuning(Tuning, LinkID)
        case parameterUpdate(LinkID)
    }

    private enum Tuning: String, Sendable {
        case dataLength = "LE Set Data Length"
        case phy = "LE Set PHY"
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
    private var requests: [RequestID: (peer: BluetoothAddress, timeout: Duration)] = [:]
    private var nextInternal: UInt64 = HCIHost.internalTokens
    private var nextLink: LinkID = 1
    private var scanWaiting = false
    private var dataLengthOff = false
    private var phyOff = false

    public init(_ configuration: Configuration = Configuration()) {
        self.configuration = configuration
        initiator = ConnectionInitiator(configuration.initiator)
        scanner = ScanController(parameters: configuration.scan, scansWhileInitiating: configuration.scanWhileInitiating ?? false)
    }

    public var statistics: Statistics {
        var s = stats
        s.commandTimeouts = commandFlow.counters.timeouts
        s.unexpectedEvents += commandFlow.counters.unexpectedAnswers + initiator.counters.lateCompletions
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
        case .controllerReady(let caps):
            ready(caps, &out)
        case .connect(let id, let peer, let timeout):
            connect(id, peer, timeout, &out)
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
            scan(scanner.handle(.wanted(wanted)), &out)
        case .deadline(let deadline):
            expired(deadline, &out)
        }
        let waiting = scanner.sharesRadioWithInitiating
        if waiting != scanWaiting {
            scanWaiting = waiting
            runInitiator(.scanWaiting(waiting), &out)
        }
        return out
    }

    // MARK: - Bring-up

    private mutating func ready(_ caps: Capabilities, _ out: inout [Action]) {
        capabilities = caps
        acl = ACLFlowControl(maxFragment: caps.aclMaxLength, credits: caps.aclPackets)
        var ic = configuration.initiator
        ic.acceptListSize = configuration.acceptList == .off ? 0 : caps.acceptListSize
        ic.acceptListTrusted = configuration.acceptList == .on
        initiator = ConnectionInitiator(ic)
        let states = caps.supportedStates.map { LESupportedStatesReturn(states: $0) }
        let coexist = configuration.scanWhileInitiating ?? states?.scansWhileInitiating(active: configuration.scan.active) ?? false
        let wanted = scanner.wanted
        scanner = ScanController(parameters: configuration.scan, scansWhileInitiating: coexist)
        if wanted { scan(scanner.handle(.wanted(true)), &out) }
        let listText = ic.acceptListSize >= 2
            ? "Filter Accept List of \(ic.acceptListSize)" + (ic.acceptListTrusted ? " (trusted)" : "")
            : "no Filter Accept List in use" + (configuration.acceptList == .off ? " (accept-list=off)" : "")
        out.append(.log("connects with \(listText); \(coexist ? "scans while connecting" : "pauses scanning to connect"); "
                        + "data length \(wantsDataLength ? "251" : "default"), PHY \(wantsPHY ? "2M" : "1M")"))
    }

    private var wantsDataLength: Bool {
        configuration.dataLength && !dataLengthOff
            && (capabilities?.leFeatures ?? 0) & LEFeaturesReturn.dataLengthExtension != 0
    }

    private var wantsPHY: Bool {
        configuration.twoMegabitPHY && !phyOff && (capabilities?.leFeatures ?? 0) & LEFeaturesReturn.twoMegabitPHY != 0
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
        case .timedOut: return nil
        }
    }

    private mutating func finished(_ owner: Owner, _ token: Token, _ outcome: HCICommandFlow.Outcome, _ out: inout [Action]) {
        let status = Self.status(of: outcome)
        switch owner {
        case .external:
            out.append(.commandFinished(token, outcome))
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
            if global {
                switch tuning {
                case .dataLength: dataLengthOff = true
                case .phy: phyOff = true
                }
                out.append(.log("the controller did not take \(tuning.rawValue) (\(status.map { "\($0)" } ?? "no answer")); not asking again"))
            } else if let status {
                out.append(.log("\(tuning.rawValue) failed: \(status)"))
            }
        case .parameterUpdate(let linkID):
            if status != .success {
                out.append(.log("LE Connection Update for link \(linkID) \(status.map { "failed: \($0)" } ?? "got no answer")"))
            }
        }
    }

    // MARK: - Connecting

    private mutating func connect(_ id: RequestID, _ peer: BluetoothAddress, _ timeout: Duration, _ out: inout [Action]) {
        // The address type: as heard; else an inventory address with the static random address's top
        // bits (0b11) is taken as random, and turns alternate the guess.
        var target = peer
        var inferred = false
        if let heard = cache.entry(for: peer) {
            target.kind = heard.address.kind
        } else if peer.kind == .public, peer.value >> 46 == 0b11 {
            target.kind = .random
            inferred = true
        }
        requests[id] = (peer, timeout)
        out.append(.arm(.connect(id), timeout))
        runInitiator(.request(id, peer: target, inferredType: inferred), &out)
    }

    private mutating func withdraw(_ id: RequestID, _ error: BLEError, _ out: inout [Action]) {
        guard requests.removeValue(forKey: id) != nil else { return }
        out.append(.disarm(.connect(id)))
        out.append(.connectFailed(id, error))
        runInitiator(.withdraw(id), &out)
    }

    private mutating func runInitiator(_ event: ConnectionInitiator.Event, _ out: inout [Action]) {
        for action in initiator.handle(event) {
            switch action {
            case .send(let command):
                if case .create(let c) = command {
                    out.append(.log(c.filterPolicy == 0 ? "creating a connection to \(c.peer)"
                        : "creating a connection to whichever of \(initiator.list.entries.count) devices in the Filter Accept List advertises first"))
                }
                submit(.initiator(command), command.packet, timeout: configuration.commandTimeout, &out)
            case .requestRadio:
                scan(scanner.handle(.initiation(true)), &out)
            case .releaseRadio:
                scan(scanner.handle(.initiation(false)), &out)
            case .connected(let id, let e):
                let linkID = register(e, orphan: false, &out)
                guard requests.removeValue(forKey: id) != nil else {
                    // The caller is gone (cannot happen: withdrawing removes the request first).
                    drop(linkID, &out)
                    continue
                }
                stats.connections += 1
                out.append(.disarm(.connect(id)))
                out.append(.connected(id, LinkInfo(id: linkID, handle: e.handle, peer: e.peer, heardRSSI: cache.entry(for: e.peer)?.rssi)))
                tune(linkID, e.handle, &out)
                runInitiator(.links(links.count), &out)
            case .failed(let id, let failure):
                guard requests.removeValue(forKey: id) != nil else { continue }
                out.append(.disarm(.connect(id)))
                out.append(.connectFailed(id, Self.error(failure)))
            case .orphan(let e):
                stats.orphanConnections += 1
                let linkID = register(e, orphan: true, &out)
                drop(linkID, &out)
                runInitiator(.links(links.count), &out)
            case .arm(let timer, let limit):
                out.append(.arm(.initiator(timer), limit))
            case .disarm(let timer):
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

    /// Asks for the data length and PHY a provisioning link wants; a controller that ignores or
    /// rejects them is asked no more.
    private mutating func tune(_ linkID: LinkID, _ handle: UInt16, _ out: inout [Action]) {
        if wantsDataLength {
            submit(.tuning(.dataLength, linkID), HCICommandPacket(command: LESetDataLengthCommand(handle: handle)),
                   timeout: configuration.optionalCommandTimeout, &out)
        }
        if wantsPHY {
            submit(.tuning(.phy, linkID), HCICommandPacket(command: LESetPHYCommand(handle: handle)),
                   timeout: configuration.optionalCommandTimeout, &out)
        }
    }

    // MARK: - Scanning

    private mutating func scan(_ actions: [ScanController.Action], _ out: inout [Action]) {
        for action in actions {
            switch action {
            case .send(let command):
                submit(.scanner(command), command.packet, timeout: configuration.commandTimeout, &out)
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

    private mutating func register(_ e: LEConnectionCompleteEvent, orphan: Bool, _ out: inout [Action]) -> LinkID {
        if let old = links[e.handle] {
            out.append(.log("handle 0x\(String(e.handle, radix: 16)) reused while still known; dropping the old link"))
            linkDown(e.handle, reason: old.localReason ?? .supervisionTimeout, &out)
        }
        let id = nextLink
        nextLink += 1
        links[e.handle] = LinkState(id: id, handle: e.handle, peer: e.peer,
                                    router: FixedChannelRouter(securityHandler: configuration.securityHandler), orphan: orphan)
        handles[id] = e.handle
        return id
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
        }
    }

    // MARK: - Incoming

    private mutating func receive(_ bytes: [UInt8], _ out: inout [Action]) {
        let before = decoder.discardedBytes
        let packets = decoder.feed(bytes)
        if decoder.discardedBytes > before {
            stats.discardedH4Bytes += decoder.discardedBytes - before
            out.append(.log("skipped \(decoder.discardedBytes - before) byte(s) that are not an H4 packet indicator"))
        }
        for packet in packets {
            switch packet.type {
            case .event: receiveEvent(packet.bytes, &out)
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
            commands(.commandComplete(e), &out)
        case .commandStatus(let e):
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
                let linkID = register(e, orphan: true, &out)
                drop(linkID, &out)
            }
        case .leAdvertisingReport(let e):
            advertisingReports(e.reports.map(\.report), &out)
        case .leExtendedAdvertisingReport(let e):
            advertisingReports(e.reports.map(\.report), &out)
        case .leConnectionUpdateComplete(let e):
            out.append(.log("connection 0x\(String(e.handle, radix: 16)) parameters: status \(e.status), interval \(e.interval)"))
        case .leDataLengthChange(let e):
            out.append(.log("connection 0x\(String(e.handle, radix: 16)) data length: TX \(e.maxTxOctets), RX \(e.maxRxOctets) octets"))
        case .lePHYUpdateComplete(let e):
            out.append(.log("connection 0x\(String(e.handle, radix: 16)) PHY: status \(e.status), TX \(e.txPHY), RX \(e.rxPHY)"))
        case .hardwareError(let code):
            out.append(.failure(.adapterFailure("controller hardware error 0x\(String(code, radix: 16))")))
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
                if !link.orphan { out.append(.smp(link.id, pdu)) }
            case .reply(let channel, let payload):
                sendInternal(packet.handle, channel, payload, &out)
            case .updateParameters(let p):
                let update = LEConnectionUpdateCommand(handle: packet.handle, intervalMin: p.intervalMin, intervalMax: p.intervalMax,
                                                       maxLatency: p.latency, supervisionTimeout: p.timeout)
                submit(.parameterUpdate(link.id), HCICommandPacket(command: update), timeout: configuration.optionalCommandTimeout, &out)
            case .dropped(let why):
                stats.droppedACLPackets += 1
                out.append(.log("handle 0x\(String(packet.handle, radix: 16)): \(why)"))
            }
        }
    }
}
