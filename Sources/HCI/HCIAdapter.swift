import AsyncSupport
import BLE
import BLESecurity
import Foundation
import Synchronization

/// A Bluetooth LE central implemented as a user-space HCI host over an H4 byte stream.
///
/// Open one with `HCIAdapter.open(spec:)` (`hci:tcp:HOST:PORT`, `hci:serial:/dev/ttyACM0[@BAUD]`,
/// `hci:user:0`, each optionally followed by `,option=value` pairs, see `AdapterConfiguration`).
///
/// The actor is an executor: every decision (command credits, connection creation and its cancel
/// races, the Filter Accept List, the scan, ACL credits, the L2CAP fixed channels) is taken by the
/// value-type `HCIHost`; the actor feeds it what happens (bytes read, callers' requests, deadlines
/// from the shared `Timeouts`) and carries out its actions: writes to a non-blocking transport,
/// deadlines, and the continuations of the callers waiting. Concurrent `connect(to:)` calls are
/// batched by the host (several pending devices go through the controller's Filter Accept List).
/// Every byte from the controller is distrusted: malformed input is logged and dropped.
public actor HCIAdapter: Central {
    /// Tunables of an adapter.
    public struct Options: Sendable {
        /// Deadline of every HCI command without a more specific one.
        public var commandTimeout: Duration
        /// Deadline of HCI_Reset (some controllers take a while).
        public var resetTimeout: Duration
        /// How long to wait for the Connection Complete after LE Create Connection Cancel, and for
        /// Disconnection Complete after Disconnect.
        public var teardownTimeout: Duration
        /// Deadline of commands the host can do without (capabilities at bring-up, data length,
        /// PHY): a controller that ignores one costs this once, then is not asked again.
        public var optionalCommandTimeout: Duration = .milliseconds(500)
        /// Links held at once (further connects fail at once). Lowered for the rest of the run when
        /// the controller answers Connection Limit Exceeded.
        public var connectionSlots: Int
        /// The static random address used as own address — the station's identity, under which bonds
        /// are kept. Nil: derived from the controller's BD_ADDR, so it stays the same across runs
        /// (`stationAddress(for:)`); random when the controller has no BD_ADDR.
        public var staticRandomAddress: BluetoothAddress?
        /// Scan interval and window (LE Set Scan Parameters; the interval is also the initiator's
        /// scan interval and window).
        public var scanInterval: Duration = .milliseconds(60)
        public var scanWindow: Duration = .milliseconds(60)
        /// Active scanning (scan requests, so scan responses with names arrive).
        public var activeScan = true
        /// Connection interval the host asks for.
        public var connectionIntervalMin: Duration = .milliseconds(15)
        public var connectionIntervalMax: Duration = .milliseconds(30)
        public var supervisionTimeout: Duration = .seconds(5)
        /// Ask for 251-byte LL payloads where the controller supports LE Data Length Extension.
        public var dataLength = true
        /// Ask for the LE 2M PHY where the controller supports it.
        public var twoMegabitPHY = true
        /// How connection creation uses the Filter Accept List.
        public var acceptList: HCIHost.AcceptListMode = .auto
        /// Whether scanning stays on while connecting; nil: as LE Read Supported States says.
        public var scanWhileConnecting: Bool?
        /// How long one connection initiation runs before devices outside it get their turn.
        public var rotation: Duration = .seconds(2)
        /// Where bonds are kept (`--bonds`): links to bonded devices encrypt with the stored key, new
        /// bonds are written there. Nil: bonds last as long as the link.
        public var bonds: BondStore?
        /// Sees every H4 packet both ways (`--trace`: a btsnoop log); nil traces nothing.
        public var packetTap: HCIPacketTap?
        /// Where log lines go (dropped packets, late events, fallbacks). Default: stderr when
        /// `PROVISION_HCI_LOG` is set, nowhere otherwise.
        public var log: @Sendable (String) -> Void

        public init(commandTimeout: Duration = .seconds(3), resetTimeout: Duration = .seconds(5),
                    teardownTimeout: Duration = .seconds(3), connectionSlots: Int = 8,
                    staticRandomAddress: BluetoothAddress? = nil,
                    log: @escaping @Sendable (String) -> Void = HCIAdapter.defaultLog) {
            self.commandTimeout = commandTimeout
            self.resetTimeout = resetTimeout
            self.teardownTimeout = teardownTimeout
            self.connectionSlots = connectionSlots
            self.staticRandomAddress = staticRandomAddress
            self.log = log
        }

        /// The host's configuration for these options (wire units, clamped to the spec's ranges).
        public var hostConfiguration: HCIHost.Configuration {
            var c = HCIHost.Configuration()
            c.commandTimeout = commandTimeout
            c.optionalCommandTimeout = optionalCommandTimeout
            c.teardownTimeout = teardownTimeout
            c.scan.active = activeScan
            c.scan.interval = Self.units(scanInterval, of: 0.625, in: 0x0004...0x4000)
            c.scan.window = min(c.scan.interval, Self.units(scanWindow, of: 0.625, in: 0x0004...0x4000))
            c.scanWhileInitiating = scanWhileConnecting
            c.acceptList = acceptList
            c.dataLength = dataLength
            c.twoMegabitPHY = twoMegabitPHY
            c.securityHandler = true
            var p = ConnectionInitiator.Parameters()
            p.scanInterval = c.scan.interval
            p.scanWindow = c.scan.interval
            p.intervalMin = Self.units(connectionIntervalMin, of: 1.25, in: 0x0006...0x0C80)
            p.intervalMax = max(p.intervalMin, Self.units(connectionIntervalMax, of: 1.25, in: 0x0006...0x0C80))
            // Vol 6 Part B 4.5.2: the supervision timeout must exceed twice the interval.
            let minimumTimeout = UInt16(min(3200, Int(p.intervalMax) * 125 * 2 / 1000 + 1))
            p.supervisionTimeout = max(minimumTimeout, Self.units(supervisionTimeout, of: 10, in: 0x000A...0x0C80))
            c.initiator = ConnectionInitiator.Configuration(slots: max(1, connectionSlots), rotation: rotation,
                                                            cancelTimeout: teardownTimeout, parameters: p)
            return c
        }

        private static func units(_ d: Duration, of milliseconds: Double, in range: ClosedRange<UInt16>) -> UInt16 {
            let ms = Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
            let n = (ms / milliseconds).rounded()
            return UInt16(max(Double(range.lowerBound), min(Double(range.upperBound), n)))
        }
    }

    /// Counters of hostile or surprising input, for tests and diagnostics.
    public typealias Statistics = HCIHost.Statistics

    /// What the controller said about itself during bring-up.
    public struct ControllerInfo: Sendable, Equatable {
        public var version: LocalVersionReturn
        public var publicAddress: BluetoothAddress
        public var ownAddress: BluetoothAddress
        public var aclMaxLength: Int
        public var aclPackets: Int
        /// LE Read Filter Accept List Size (0 when the controller would not say).
        public var acceptListSize: Int
        /// LE Read Local Supported Features and LE Read Supported States (nil when not answered).
        public var leFeatures: UInt64?
        public var supportedStates: UInt64?
    }

    public static let defaultLog: @Sendable (String) -> Void = { line in
        if ProcessInfo.processInfo.environment["PROVISION_HCI_LOG"] != nil {
            // The throwing write: a closed stderr drops the line (the legacy write traps on EPIPE).
            try? FileHandle.standardError.write(contentsOf: Data("hci: \(line)\n".utf8))
        }
    }

    public nonisolated let id: String
    public nonisolated var isSimulated: Bool { false }
    /// Devices with known addresses are connected without a scan first (by the controller's own
    /// initiator, batched through the Filter Accept List) — where the controller can read a link's
    /// RSSI (HCI Read RSSI, probed at bring-up), so that a scan satisfied by connecting still tells
    /// what a scan would have. Without it, scan steps scan first.
    public nonisolated var connectsByAddress: Bool { readsLinkRSSI.withLock { $0 } }
    /// Links the adapter can hold; lowered when the controller answers Connection Limit Exceeded.
    public nonisolated var connectionSlots: Int { slotCount.withLock { $0 } }

    private let transport: any HCITransport
    let options: Options
    private let slotCount: Mutex<Int>
    private let readsLinkRSSI = Mutex(false)
    private var host: HCIHost
    public private(set) var info: ControllerInfo?
    private var failure: BLEError?
    private var nextToken: UInt64 = 1
    private var readTask: Task<Void, Never>?
    private var timers: [HCIHost.Deadline: Timeouts.Token] = [:]
    private var commandWaiters: [UInt64: CheckedContinuation<HCICommandFlow.Outcome, any Error>] = [:]
    private var connectWaiters: [UInt64: CheckedContinuation<HCILink, any Error>] = [:]
    private var sendWaiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
    var links: [UInt64: HCILink] = [:]
    /// Callers waiting for `secure`, the security their connects asked for (HCIAdapter+Security.swift).
    var security = SecurityWaiters()

    private struct ScanConsumer {
        var filter: ScanFilter
        var continuation: AsyncThrowingStream<Advertisement, any Error>.Continuation
        var seen: Set<UInt64> = []
    }
    private var scanConsumers: [UInt64: ScanConsumer] = [:]

    /// Counters of hostile or surprising input.
    public var statistics: Statistics { host.statistics }

    // MARK: - Opening

    /// Opens the adapter named by `spec` (with its `,option=value` pairs applied over `options`) and
    /// brings its controller up.
    public static func open(spec: String, options: Options = Options()) async throws -> HCIAdapter {
        let configuration = try AdapterConfiguration(parsing: spec)
        var options = options
        configuration.apply(to: &options)
        let transport = try HCITransports.open(configuration.spec)
        return try await open(transport: transport, id: spec, options: options)
    }

    /// Brings up a controller reached through `transport` (closed again when bring-up fails).
    public static func open(transport: any HCITransport, id: String, options: Options = Options()) async throws -> HCIAdapter {
        let adapter = HCIAdapter(transport: transport, id: id, options: options)
        await adapter.startReading()
        do {
            try await adapter.bringUp()
        } catch {
            await adapter.shutdown(BLEError.adapterFailure("bring-up of \(id) failed: \(error)"))
            throw BLEError.adapterFailure("bring-up of \(id) failed: \(error)")
        }
        return adapter
    }

    private init(transport: any HCITransport, id: String, options: Options) {
        self.transport = transport
        self.id = id
        self.options = options
        self.slotCount = Mutex(max(1, options.connectionSlots))
        self.host = HCIHost(options.hostConfiguration)
    }

    private func startReading() {
        let reads = transport.reads
        readTask = Task { [weak self] in
            do {
                for try await chunk in reads {
                    guard let self else { return }
                    await self.feed(.received(chunk))
                }
                await self?.shutdown(BLEError.adapterFailure("the controller transport closed"))
            } catch {
                await self?.shutdown(BLEError.adapterFailure("the controller transport failed: \(error)"))
            }
        }
    }

    private func bringUp() async throws {
        try await execute(ResetCommand(), timeout: options.resetTimeout)
        let version = try decode(try await execute(ReadLocalVersionCommand()), LocalVersionReturn.init(from:))
        let bdaddr = try decode(try await execute(ReadBDADDRCommand()), BDADDRReturn.init(from:))
        var length = 0
        var count = 0
        let le = try decode(try await execute(LEReadBufferSizeCommand()), LEBufferSizeReturn.init(from:))
        if le.aclPackets > 0 && le.aclLength > 0 {
            length = Int(le.aclLength)
            count = Int(le.aclPackets)
        } else {
            // Vol 4 Part E 7.8.2: zero means LE shares the BR/EDR buffers.
            let shared = try decode(try await execute(ReadBufferSizeCommand()), BufferSizeReturn.init(from:))
            length = Int(shared.aclLength)
            count = Int(shared.aclPackets)
        }
        guard length > 0, count > 0 else {
            throw BLEError.adapterFailure("controller reports no ACL buffers (length \(length), count \(count))")
        }
        try await execute(SetEventMaskCommand.host)
        try await execute(LESetEventMaskCommand.host)
        let own = options.staticRandomAddress ?? Self.stationAddress(for: bdaddr.address) ?? Self.makeStaticRandomAddress()
        try await execute(LESetRandomAddressCommand(address: own))

        // What the controller can do; a controller that will not say gets the conservative choice.
        let optional = options.optionalCommandTimeout
        let features = try? decode(try await execute(LEReadLocalSupportedFeaturesCommand(), timeout: optional), LEFeaturesReturn.init(from:))
        let states = try? decode(try await execute(LEReadSupportedStatesCommand(), timeout: optional), LESupportedStatesReturn.init(from:))
        var listSize = 0
        if options.acceptList != .off,
           let size = try? decode(try await execute(LEReadFilterAcceptListSizeCommand(), timeout: optional), FilterAcceptListSizeReturn.init(from:)) {
            // The list starts empty (after Reset it is; a controller that cannot clear it is not used).
            listSize = (try? await execute(LEClearFilterAcceptListCommand(), timeout: optional)) != nil ? Int(size.size) : 0
        }
        var leFeatures = features?.features
        if options.dataLength, leFeatures.map({ $0 & LEFeaturesReturn.dataLengthExtension != 0 }) == true {
            do {
                try await execute(LEWriteSuggestedDefaultDataLengthCommand(), timeout: optional)
                try await probe(LESetDataLengthCommand(handle: Self.probeHandle), timeout: optional)
            } catch {
                options.log("\(id): the controller does not take LE Data Length commands (\(error)); links keep the default length")
                leFeatures? &= ~LEFeaturesReturn.dataLengthExtension
            }
        }
        if options.twoMegabitPHY, leFeatures.map({ $0 & LEFeaturesReturn.twoMegabitPHY != 0 }) == true {
            do {
                try await probe(LESetPHYCommand(handle: Self.probeHandle), timeout: optional)
            } catch {
                options.log("\(id): the controller does not take LE Set PHY (\(error)); links stay on LE 1M")
                leFeatures? &= ~LEFeaturesReturn.twoMegabitPHY
            }
        }
        do {
            try await probe(ReadRSSICommand(handle: Self.probeHandle), timeout: optional)
            readsLinkRSSI.withLock { $0 = true }
        } catch {
            options.log("\(id): the controller cannot read a link's RSSI (\(error)); scan steps scan before connecting, so each device's RSSI is known")
        }
        let capabilities = HCIHost.Capabilities(aclMaxLength: length, aclPackets: count, leFeatures: leFeatures,
                                                supportedStates: states?.states, acceptListSize: listSize)
        feed(.controllerReady(capabilities))
        info = ControllerInfo(version: version, publicAddress: bdaddr.address, ownAddress: own, aclMaxLength: length, aclPackets: count,
                              acceptListSize: listSize, leFeatures: features?.features, supportedStates: states?.states)
        options.log("\(id): controller up, HCI version \(version.hciVersion), BD_ADDR \(bdaddr.address), own \(own), ACL \(count)×\(length)")
    }

    /// A connection handle no link has (handles are 0x0000–0x0EFF, Vol 4 Part E 5.4.2).
    static let probeHandle: UInt16 = 0x0EFF

    /// Sends a per-link command for a handle that does not exist, at bring-up, to learn whether the
    /// controller takes the command at all: it must answer Unknown Connection Identifier (0x02). A
    /// controller that does not answer, or does not know the command, throws; once in use it would
    /// have stalled the command queue (or been asked in vain) on every link.
    private func probe<C: HCICommand>(_ command: C, timeout: Duration) async throws {
        do {
            try await execute(command, timeout: timeout)
        } catch let error as HCIError where error.status != .unknownCommand && error.status != .unsupportedFeature {
            // Unknown Connection Identifier (or another per-link refusal): the command is understood.
        }
    }

    /// A static random device address (Vol 6 Part B 1.3.2.1): the two top bits set, the rest random
    /// and neither all zeros nor all ones.
    public static func makeStaticRandomAddress() -> BluetoothAddress {
        var rng = SystemRandomNumberGenerator()
        while true {
            let random = rng.next() & 0x3FFF_FFFF_FFFF
            if random != 0 && random != 0x3FFF_FFFF_FFFF {
                return BluetoothAddress(value: random | 0xC000_0000_0000, kind: .random)
            }
        }
    }

    private func decode<T>(_ bytes: [UInt8], _ parse: (inout ByteReader) throws(DecodeError) -> T) throws -> T {
        var r = ByteReader(bytes)
        do {
            let value = try parse(&r)
            return value
        } catch {
            throw BLEError.protocolError("malformed return parameters: \(error)")
        }
    }

    func makeToken() -> UInt64 {
        defer { nextToken += 1 }
        return nextToken
    }

    // MARK: - The executor

    /// Feeds one event to the host and carries out what it decides.
    func feed(_ event: HCIHost.Event) {
        guard failure == nil else { return }
        if case .received(let bytes) = event { options.packetTap?.received(bytes) }
        perform(host.handle(event))
    }

    private func perform(_ actions: [HCIHost.Action]) {
        for action in actions {
            guard failure == nil else { return }
            switch action {
            case .write(let bytes):
                // Written at once and in order: the transport queues what the descriptor cannot take.
                options.packetTap?.sent(bytes)
                do {
                    try transport.write(bytes)
                } catch {
                    shutdown(BLEError.adapterFailure("write to the controller failed: \(error)"))
                }
            case .arm(let deadline, let limit):
                if let old = timers[deadline] { Timeouts.shared.cancel(old) }
                timers[deadline] = Timeouts.shared.schedule(after: limit) { [weak self] in
                    Task { await self?.expired(deadline) }
                }
            case .disarm(let deadline):
                if let t = timers.removeValue(forKey: deadline) { Timeouts.shared.cancel(t) }
            case .commandFinished(let token, let outcome):
                commandWaiters.removeValue(forKey: token)?.resume(returning: outcome)
            case .connected(let request, let info):
                let link = HCILink(peer: info.peer, adapter: self, adapterID: id, handle: info.handle, linkID: info.id,
                                   heardRSSI: info.heardRSSI)
                links[info.id] = link
                if let waiter = connectWaiters.removeValue(forKey: request) {
                    attachSecurity(link, asked: security.connects.removeValue(forKey: request))
                    waiter.resume(returning: link)
                } else {
                    feed(.disconnect(info.id, reason: .localHostTerminated))
                }
            case .connectFailed(let request, let error):
                security.connects[request] = nil
                connectWaiters.removeValue(forKey: request)?.resume(throwing: error)
            case .linkDown(let linkID, let reason):
                failSecureWaiters(of: linkID, BLEError.disconnected(reason))
                links.removeValue(forKey: linkID)?.markDisconnected(reason)
            case .att(let linkID, let pdu):
                links[linkID]?.deliverATT(pdu)
            case .securityCompleted(let linkID, let request, let outcome):
                securityCompleted(linkID, request, outcome)
            case .securityFailed(let linkID, let request, let failure):
                securityFailed(linkID, request, failure)
            case .displayPasskey(let linkID, _):
                // This side announces no display, so no pairing asks it to show one.
                options.log("\(id): link \(linkID) asked this side to display a passkey; it has no display")
            case .sent(let token):
                sendWaiters.removeValue(forKey: token)?.resume()
            case .sendFailed(let token, let error):
                sendWaiters.removeValue(forKey: token)?.resume(throwing: error)
            case .advertisement(let entry):
                deliver(entry)
            case .scanFailed(let why):
                for consumer in scanConsumers.values {
                    consumer.continuation.finish(throwing: BLEError.adapterFailure("scan could not start: \(why)"))
                }
                scanConsumers = [:]
                feed(.scanWanted(false))
            case .slots(let n):
                slotCount.withLock { $0 = max(1, n) }
            case .log(let line):
                options.log("\(id): \(line)")
            case .failure(let error):
                shutdown(error)
            }
        }
    }

    private func expired(_ deadline: HCIHost.Deadline) {
        // A deadline disarmed (or re-armed) meanwhile is stale.
        guard timers.removeValue(forKey: deadline) != nil else { return }
        feed(.deadline(deadline))
    }

    // MARK: - Commands

    /// Sends a command and waits for its Command Complete (returning its return parameters) or
    /// Command Status (returning nothing). A status other than success throws `HCIError`; no answer
    /// within `timeout` (the default command timeout when nil) throws `BLEError.timeout`.
    @discardableResult
    package func execute<C: HCICommand>(_ command: C, timeout: Duration? = nil) async throws -> [UInt8] {
        if let failure { throw failure }
        let token = makeToken()
        let outcome = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<HCICommandFlow.Outcome, any Error>) in
                if Task.isCancelled {
                    c.resume(throwing: BLEError.cancelled)
                    return
                }
                commandWaiters[token] = c
                feed(.command(token, HCICommandPacket(command: command), timeout: timeout))
            }
        } onCancel: {
            Task { await self.abandonCommand(token) }
        }
        switch outcome {
        case .complete(let parameters):
            guard let first = parameters.first else {
                throw BLEError.protocolError("Command Complete for \(C.opcode.name) without a status")
            }
            let status = HCIStatus(rawValue: first)
            guard status == .success else { throw HCIError(status: status, opcode: C.opcode) }
            return parameters
        case .status(let status):
            guard status == .success else { throw HCIError(status: status, opcode: C.opcode) }
            return []
        case .timedOut:
            throw BLEError.timeout(operation: "HCI \(C.opcode.name)", limit: timeout ?? options.commandTimeout)
        }
    }

    private func abandonCommand(_ token: UInt64) {
        guard let waiter = commandWaiters.removeValue(forKey: token) else { return }
        feed(.abandonCommand(token))
        waiter.resume(throwing: BLEError.cancelled)
    }

    /// HCI Read RSSI on a link; nil when the controller will not say.
    func readRSSI(handle: UInt16) async -> Int? {
        guard let bytes = try? await execute(ReadRSSICommand(handle: handle), timeout: options.optionalCommandTimeout),
              let r = try? decode(bytes, RSSIReturn.init(from:)), r.rssi != 127 else { return nil }
        return Int(r.rssi)
    }

    // MARK: - Scanning

    public nonisolated func scan(_ filter: ScanFilter) -> AsyncThrowingStream<Advertisement, any Error> {
        let (stream, continuation) = AsyncThrowingStream<Advertisement, any Error>.makeStream(bufferingPolicy: .bufferingNewest(512))
        Task { await self.addScanConsumer(filter, continuation) }
        return stream
    }

    private func addScanConsumer(_ filter: ScanFilter, _ continuation: AsyncThrowingStream<Advertisement, any Error>.Continuation) {
        if let failure {
            continuation.finish(throwing: failure)
            return
        }
        let id = makeToken()
        scanConsumers[id] = ScanConsumer(filter: filter, continuation: continuation)
        continuation.onTermination = { [weak self] _ in
            Task { await self?.removeScanConsumer(id) }
        }
        if scanConsumers.count == 1 { feed(.scanWanted(true)) }
    }

    private func removeScanConsumer(_ id: UInt64) {
        guard scanConsumers.removeValue(forKey: id) != nil else { return }
        if scanConsumers.isEmpty { feed(.scanWanted(false)) }
    }

    private func deliver(_ entry: AdvertisementCache.Entry) {
        guard !scanConsumers.isEmpty else { return }
        let ad = Advertisement(address: entry.address, rssi: entry.rssi, data: entry.merged,
                               connectable: entry.connectable, time: .now, adapter: id, identity: identity(of: entry.address))
        let key = entry.address.value
        var ended = false
        for (consumerID, var consumer) in scanConsumers where consumer.filter.matches(ad) {
            if !consumer.filter.allowDuplicates {
                if consumer.seen.contains(key) { continue }
                consumer.seen.insert(key)
                scanConsumers[consumerID] = consumer
            }
            if case .terminated = consumer.continuation.yield(ad) {
                scanConsumers[consumerID] = nil
                ended = true
            }
        }
        if ended && scanConsumers.isEmpty { feed(.scanWanted(false)) }
    }

    // MARK: - Connecting

    public func connect(to peer: BluetoothAddress, options connect: ConnectOptions) async throws -> any Link {
        try await connectLink(to: peer, options: connect)
    }

    /// `connect(to:options:)` with the concrete link type.
    public func connectLink(to peer: BluetoothAddress, options connect: ConnectOptions) async throws -> HCILink {
        if let failure { throw failure }
        // A bonded device that hides behind resolvable private addresses is connected at the one it
        // advertises with now (HCIAdapter+Security.swift).
        let (peer, timeout) = await connectionTarget(for: peer, within: connect.timeout)
        var connect = connect
        connect.timeout = timeout
        let request = makeToken()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<HCILink, any Error>) in
                if Task.isCancelled {
                    c.resume(throwing: BLEError.cancelled)
                    return
                }
                connectWaiters[request] = c
                security.connects[request] = connect.security
                feed(.connect(request, peer, timeout: connect.timeout))
            }
        } onCancel: {
            Task { await self.feed(.cancelConnect(request)) }
        }
    }

    // MARK: - Links

    /// Drops a link and waits (within the host's deadlines) until it is down. Idempotent.
    func disconnect(linkID: UInt64, reason: DisconnectReason) async {
        guard let link = links[linkID] else { return }
        feed(.disconnect(linkID, reason: reason))
        _ = await link.waitForDisconnect()
    }

    /// Queues an L2CAP frame and returns once all of it is with the controller (so the caller waits
    /// for ACL credits).
    func sendL2CAP(linkID: UInt64, channel: L2CAPBasicFrame.ChannelID, payload: [UInt8]) async throws {
        if let failure { throw failure }
        guard let link = links[linkID] else { throw BLEError.disconnected(.remoteUserTerminated) }
        if let reason = link.disconnectReason { throw BLEError.disconnected(reason) }
        let token = makeToken()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                if Task.isCancelled {
                    c.resume(throwing: BLEError.cancelled)
                    return
                }
                sendWaiters[token] = c
                feed(.send(token, linkID, channel, payload))
            }
        } onCancel: {
            Task { await self.feed(.cancelSend(token)) }
        }
    }

    // MARK: - Closing

    public func close() async {
        guard failure == nil else { return }
        for consumer in scanConsumers.values { consumer.continuation.finish() }
        scanConsumers = [:]
        feed(.scanWanted(false))
        await withTaskGroup(of: Void.self) { group in
            for linkID in links.keys {
                group.addTask { await self.disconnect(linkID: linkID, reason: .localHostTerminated) }
            }
        }
        if host.isScanning {
            _ = try? await execute(LESetScanEnableCommand(enable: false))
        }
        shutdown(BLEError.adapterFailure("adapter \(id) closed"), linkReason: .localHostTerminated)
    }

    /// Ends everything: waiters fail, links go down, scans end, the transport closes.
    private func shutdown(_ error: BLEError, linkReason: DisconnectReason = .transportClosed) {
        guard failure == nil else { return }
        failure = error
        options.log("\(id): \(error)")
        transport.close()
        readTask?.cancel()
        for t in timers.values { Timeouts.shared.cancel(t) }
        timers = [:]
        for c in commandWaiters.values { c.resume(throwing: error) }
        commandWaiters = [:]
        for c in connectWaiters.values { c.resume(throwing: error) }
        connectWaiters = [:]
        for c in sendWaiters.values { c.resume(throwing: BLEError.disconnected(linkReason)) }
        sendWaiters = [:]
        failSecureWaiters(of: nil, error)
        for link in links.values { link.markDisconnected(linkReason) }
        links = [:]
        for consumer in scanConsumers.values { consumer.continuation.finish(throwing: error) }
        scanConsumers = [:]
    }

    /// Nil while the adapter works; the error that ended it otherwise.
    public var failureReason: BLEError? { failure }
}
