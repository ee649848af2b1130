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
        /// are kept (`address=` in the spec). Nil: the controller's own static address (Zephyr), else one
        /// derived from its BD_ADDR, else one generated once for the adapter and kept with the bonds
        /// (`StationIdentity.choose`).
        public var staticRandomAddress: BluetoothAddress?
        /// The name the adapter's generated identity is kept under with the bonds (its transport:
        /// `hci:serial:/dev/ttyACM0`); nil: the adapter's id.
        public var identityKey: String?
        /// Resynchronise a stream that loses bytes (reset the controller when bytes that are no packet
        /// arrive); nil: for UARTs.
        public var resynchronise: Bool?
        /// Scan and connect with the extended commands where the controller has them.
        public var extendedAdvertising = true
        /// Attempts to reopen a transport that went away before the adapter fails (0: fail at once).
        public var reopenAttempts = 30
        /// Where warnings for the operator go (a controller without an address of its own). Default:
        /// stderr, always.
        public var warn: @Sendable (String) -> Void = HCIAdapter.defaultWarn
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
            c.resynchronise = resynchronise ?? false
            c.reopenAttempts = reopenAttempts
            var p = ConnectionInitiator.Parameters()
            p.scanInterval = c.scan.interval
            p.scanWindow = c.scan.interval
            p.intervalMin = Self.units(connectionIntervalMin, of: 1.25, in: 0x0006...0x0C80)
            p.intervalMax = max(p.intervalMin, Self.units(connectionIntervalMax, of: 1.25, in: 0x0006...0x0C80))
            // Vol 6 Part B 4.5.2: the supervision timeout must exceed twice the interval.
            p.supervisionTimeout = max(LinkTuning.minimumTimeout(intervalMax: p.intervalMax, latency: p.latency),
                                       Self.units(supervisionTimeout, of: 10, in: 0x000A...0x0C80))
            c.initiator = ConnectionInitiator.Configuration(slots: max(1, connectionSlots), rotation: rotation,
                                                            cancelTimeout: teardownTimeout, parameters: p)
            return c
        }

        private static func units(_ d: Duration, of milliseconds: Double, in range: ClosedRange<UInt16>) -> UInt16 {
            LinkTuning.units(d, of: milliseconds, in: range)
        }
    }

    /// Counters of hostile or surprising input, for tests and diagnostics.
    public typealias Statistics = HCIHost.Statistics

    /// What the controller said about itself during bring-up.
    public struct ControllerInfo: Sendable, Equatable {
        public var version: LocalVersionReturn
        public var publicAddress: BluetoothAddress
        public var ownAddress: BluetoothAddress
        /// The station's identity on this controller (`ownAddress`) and where it came from.
        public var identity: StationIdentity
        public var aclMaxLength: Int
        public var aclPackets: Int
        /// LE Read Filter Accept List Size (0 when the controller would not say).
        public var acceptListSize: Int
        /// LE Read Local Supported Features and LE Read Supported States (nil when not answered).
        public var leFeatures: UInt64?
        public var supportedStates: UInt64?
        /// Scans and connects with the extended commands.
        public var extended: Bool
        /// Times the controller was brought up again during the adapter's life (reset, lost sync,
        /// transport back).
        public var reinitialisations: Int

        init(_ p: ControllerSetup.Profile, reinitialisations: Int) {
            version = p.version
            publicAddress = p.publicAddress
            ownAddress = p.identity.address
            identity = p.identity
            aclMaxLength = p.capabilities.aclMaxLength
            aclPackets = p.capabilities.aclPackets
            acceptListSize = p.capabilities.acceptListSize
            leFeatures = p.capabilities.leFeatures
            supportedStates = p.capabilities.supportedStates
            extended = p.capabilities.extended
            self.reinitialisations = reinitialisations
        }
    }

    public static let defaultLog: @Sendable (String) -> Void = { line in
        if ProcessInfo.processInfo.environment["PROVISION_HCI_LOG"] != nil {
            // The throwing write: a closed stderr drops the line (the legacy write traps on EPIPE).
            try? FileHandle.standardError.write(contentsOf: Data("hci: \(line)\n".utf8))
        }
    }

    public static let defaultWarn: @Sendable (String) -> Void = { line in
        try? FileHandle.standardError.write(contentsOf: Data("warning: \(line)\n".utf8))
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
    /// The station's identity on this controller (set at bring-up, the same after a re-initialisation).
    public nonisolated var stationIdentity: BluetoothAddress? { identityAddress.withLock { $0 } }
    /// Why the controller is down (being brought up again, or failed for good); nil while it is up.
    public nonisolated var outage: String? { down.withLock { $0 } }

    private var transport: any HCITransport
    /// Opens the transport again after it went away (nil: an adapter opened on a given transport fails).
    private let reopener: (@Sendable () throws -> any HCITransport)?
    /// Which transport the read task reads: the end of an older one is not news.
    private var transportGeneration = 0
    let options: Options
    private let slotCount: Mutex<Int>
    private let readsLinkRSSI = Mutex(false)
    private let identityAddress = Mutex<BluetoothAddress?>(nil)
    private let down = Mutex<String?>(nil)
    private var setupWaiter: CheckedContinuation<Void, any Error>?
    private var host: HCIHost
    public private(set) var info: ControllerInfo?
    private var failure: BLEError?
    private var nextToken: UInt64 = 1
    private var readTask: Task<Void, Never>?
    private var timers: [HCIHost.Deadline: Timeouts.Token] = [:]
    /// Callers waiting for a command's answer, a connection, a send; a ticket's id is the token the
    /// host knows the caller's request by.
    private let commandWaiters = WaiterQueue<Void, Result<HCICommandFlow.Outcome, any Error>>()
    private let connectWaiters = WaiterQueue<Void, Result<HCILink, any Error>>()
    private let sendWaiters = WaiterQueue<Void, Result<Void, any Error>>()
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
        try await open(AdapterConfiguration(parsing: spec), id: spec, options: options)
    }

    /// The same, from a spec already parsed (`id`: the spec as given, the adapter's name in reports).
    public static func open(_ configuration: AdapterConfiguration, id: String, options: Options = Options()) async throws -> HCIAdapter {
        var options = options
        configuration.apply(to: &options)
        if options.identityKey == nil { options.identityKey = configuration.spec.identityKey }
        if options.resynchronise == nil, case .serial = configuration.spec { options.resynchronise = true }
        let transportSpec = configuration.spec
        let transport = try await Self.openOffPool { try HCITransports.open(transportSpec) }
        return try await open(transport: transport, id: id, options: options, reopen: { try HCITransports.open(transportSpec) })
    }

    /// Brings up a controller reached through `transport` (closed again when bring-up fails). `reopen`
    /// opens it again when it goes away (a TCP peer restarting, a dongle re-enumerating); without it,
    /// the adapter fails then.
    public static func open(transport: any HCITransport, id: String, options: Options = Options(),
                            reopen: (@Sendable () throws -> any HCITransport)? = nil) async throws -> HCIAdapter {
        let adapter = HCIAdapter(transport: transport, id: id, options: options, reopen: reopen)
        await adapter.startReading()
        do {
            try await adapter.bringUp()
        } catch {
            let why: String
            if case BLEError.adapterFailure(let text) = error { why = text } else { why = "\(error)" }
            await adapter.shutdown(BLEError.adapterFailure("bring-up of \(id) failed: \(why)"))
            throw BLEError.adapterFailure("bring-up of \(id) failed: \(why)")
        }
        return adapter
    }

    private init(transport: any HCITransport, id: String, options: Options, reopen: (@Sendable () throws -> any HCITransport)?) {
        self.transport = transport
        self.id = id
        self.options = options
        self.reopener = reopen
        self.slotCount = Mutex(max(1, options.connectionSlots))
        var configuration = options.hostConfiguration
        if reopen == nil { configuration.reopenAttempts = 0 }
        self.host = HCIHost(configuration)
    }

    /// Runs a blocking open (connect with a deadline, tty set-up) on a thread of its own, never on the
    /// cooperative pool.
    private static func openOffPool(_ open: @escaping @Sendable () throws -> any HCITransport) async throws -> any HCITransport {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<any HCITransport, any Error>) in
            Thread.detachNewThread {
                c.resume(with: Result { try open() })
            }
        }
    }

    private func startReading() {
        let reads = transport.reads
        let generation = transportGeneration
        readTask = Task { [weak self] in
            do {
                for try await chunk in reads {
                    guard let self else { return }
                    await self.feed(.received(chunk), generation: generation)
                }
                await self?.transportEnded("the controller transport closed", generation: generation)
            } catch {
                await self?.transportEnded("the controller transport failed: \(error)", generation: generation)
            }
        }
    }

    /// The transport's reads ended: the host decides (reopen, or fail).
    private func transportEnded(_ why: String, generation: Int) {
        guard generation == transportGeneration, failure == nil else { return }
        transport.close()
        feed(.transportLost(why))
    }

    /// Opens the transport again, off the cooperative pool, and tells the host how it went.
    private func reopenTransport() {
        guard let reopener else {
            feed(.transportReopenFailed("the adapter cannot reopen its transport"))
            return
        }
        let generation = transportGeneration
        Task {
            let result: Result<any HCITransport, any Error>
            do { result = .success(try await Self.openOffPool(reopener)) } catch { result = .failure(error) }
            self.reopened(result, generation: generation)
        }
    }

    private func reopened(_ result: Result<any HCITransport, any Error>, generation: Int) {
        guard failure == nil, generation == transportGeneration else {
            if case .success(let t) = result { t.close() }
            return
        }
        switch result {
        case .success(let t):
            transport = t
            transportGeneration += 1
            startReading()
            options.log("\(id): the transport is open again")
            feed(.transportReopened)
        case .failure(let error):
            feed(.transportReopenFailed("\(error)"))
        }
    }

    /// Brings the controller up (`ControllerSetup`, driven by the host) and waits for it: the station's
    /// identity comes from `address=`, the controller, or the bonds file (a generated one is stored
    /// there before the adapter is used).
    private func bringUp() async throws {
        let key = options.identityKey ?? id
        var setup = ControllerSetup.Configuration(identity: ControllerSetup.IdentityInputs(
            configured: options.staticRandomAddress, stored: options.bonds?.stationIdentity(adapter: key),
            canStore: options.bonds != nil, fresh: StationIdentity.staticAddress(random: UInt64.random(in: 0...UInt64.max))))
        setup.resetTimeout = options.resetTimeout
        setup.commandTimeout = options.commandTimeout
        setup.optionalTimeout = options.optionalCommandTimeout
        setup.resetAttempts = (options.resynchronise ?? false) ? 3 : 1
        setup.dataLength = options.dataLength
        setup.twoMegabitPHY = options.twoMegabitPHY
        setup.acceptList = options.acceptList != .off
        setup.extendedAdvertising = options.extendedAdvertising
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
            setupWaiter = c
            feed(.start(setup))
        }
        guard let info else { throw BLEError.adapterFailure("bring-up ended without the controller's profile") }
        if info.identity.source == .generated, let bonds = options.bonds {
            do {
                try await bonds.saveStationIdentity(info.identity.address, adapter: key)
            } catch {
                throw BLEError.adapterFailure("the station identity generated for \(id) could not be kept with the bonds: \(error)")
            }
        }
        if let warning = info.identity.warning(adapter: id) { options.warn(warning) }
        options.log("\(id): controller up, HCI version \(info.version.hciVersion), manufacturer 0x\(String(info.version.companyIdentifier, radix: 16)), "
                    + "BD_ADDR \(info.publicAddress), station \(info.identity), ACL \(info.aclPackets)×\(info.aclMaxLength)")
    }

    /// The controller is up (again): what it is, and who the station is on it.
    private func controllerUp(_ profile: ControllerSetup.Profile) {
        info = ControllerInfo(profile, reinitialisations: host.statistics.reinitialisations)
        identityAddress.withLock { $0 = profile.identity.address }
        down.withLock { $0 = nil }
        readsLinkRSSI.withLock { $0 = profile.capabilities.readsRSSI }
        if let waiter = setupWaiter {
            setupWaiter = nil
            waiter.resume()
        } else {
            options.log("\(id): controller up again as \(profile.identity.address)")
        }
    }

    /// A static random device address (Vol 6 Part B 1.3.2.1): the two top bits set, the rest random
    /// and neither all zeros nor all ones.
    public static func makeStaticRandomAddress() -> BluetoothAddress {
        StationIdentity.staticAddress(random: UInt64.random(in: 0...UInt64.max))
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

    /// Feeds what the transport of `generation` read (reads of a transport replaced since are dropped).
    private func feed(_ event: HCIHost.Event, generation: Int) {
        guard generation == transportGeneration else { return }
        feed(event)
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
                commandWaiters.withLock { _, w in _ = w.resume(WaitTicket(id: token), .success(outcome)) }
            case .connected(let request, let info):
                let link = HCILink(peer: info.peer, adapter: self, adapterID: id, handle: info.handle, linkID: info.id,
                                   heardRSSI: info.heardRSSI, parameters: info.parameters)
                links[info.id] = link
                let asked = security.connects.removeValue(forKey: request)
                // The caller resumes on this actor, so after the link's security is attached below.
                if connectWaiters.withLock({ _, w in w.resume(WaitTicket(id: request), .success(link)) }) {
                    attachSecurity(link, asked: asked)
                } else {
                    feed(.disconnect(info.id, reason: .localHostTerminated))
                }
            case .connectFailed(let request, let error):
                security.connects[request] = nil
                connectWaiters.withLock { _, w in _ = w.resume(WaitTicket(id: request), .failure(error)) }
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
                sendWaiters.withLock { _, w in _ = w.resume(WaitTicket(id: token), .success(())) }
            case .sendFailed(let token, let error):
                sendWaiters.withLock { _, w in _ = w.resume(WaitTicket(id: token), .failure(error)) }
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
            case .controllerUp(let profile):
                controllerUp(profile)
            case .controllerDown(let why):
                down.withLock { $0 = "the controller \(why); it is being brought up again" }
                options.warn("adapter \(id): the controller \(why); its links were dropped (their devices are retried) and it is brought up again as \(info?.ownAddress.description ?? "before")")
            case .reopenTransport:
                reopenTransport()
            case .linkParameters(let linkID, let parameters):
                links[linkID]?.update(parameters)
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
        if Task.isCancelled { throw BLEError.cancelled }
        let ticket = commandWaiters.enqueue()
        feed(.command(ticket.id, HCICommandPacket(command: command), timeout: timeout))
        let outcome: HCICommandFlow.Outcome
        switch await commandWaiters.wait(ticket) {
        case .granted(let result):
            outcome = try result.get()
        case .cancelled, .timedOut:
            feed(.abandonCommand(ticket.id))
            throw BLEError.cancelled
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
        case .controllerReset:
            throw BLEError.disconnected(DisconnectReason(code: HCIStatus.unspecifiedError.rawValue,
                                                         text: "the controller was reset before it answered \(C.opcode.name)"))
        }
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
        if Task.isCancelled { throw BLEError.cancelled }
        let ticket = connectWaiters.enqueue()
        security.connects[ticket.id] = connect.security
        feed(.connect(ticket.id, peer, timeout: connect.timeout, link: connect.link))
        switch await connectWaiters.wait(ticket) {
        case .granted(let result):
            return try result.get()
        case .cancelled, .timedOut:
            // A connection that completes anyway is an orphan: dropped when it comes up (`perform`).
            security.connects[ticket.id] = nil
            feed(.cancelConnect(ticket.id))
            throw BLEError.cancelled
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
        if Task.isCancelled { throw BLEError.cancelled }
        let ticket = sendWaiters.enqueue()
        feed(.send(ticket.id, linkID, channel, payload))
        switch await sendWaiters.wait(ticket) {
        case .granted(let result):
            try result.get()
        case .cancelled, .timedOut:
            feed(.cancelSend(ticket.id))
            throw BLEError.cancelled
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
        if linkReason != .localHostTerminated { down.withLock { $0 = error.description } }
        options.log("\(id): \(error)")
        transport.close()
        readTask?.cancel()
        for t in timers.values { Timeouts.shared.cancel(t) }
        timers = [:]
        setupWaiter?.resume(throwing: error)
        setupWaiter = nil
        commandWaiters.withLock { _, w in _ = w.resumeAll(.failure(error)) }
        connectWaiters.withLock { _, w in _ = w.resumeAll(.failure(error)) }
        sendWaiters.withLock { _, w in _ = w.resumeAll(.failure(BLEError.disconnected(linkReason))) }
        failSecureWaiters(of: nil, error)
        for link in links.values { link.markDisconnected(linkReason) }
        links = [:]
        for consumer in scanConsumers.values { consumer.continuation.finish(throwing: error) }
        scanConsumers = [:]
    }

    /// Nil while the adapter works; the error that ended it otherwise.
    public var failureReason: BLEError? { failure }
}
