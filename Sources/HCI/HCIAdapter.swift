import BLE
import Foundation

/// A Bluetooth LE central implemented as a user-space HCI host over an H4 byte stream.
///
/// Open one with `HCIAdapter.open(spec:)` (`hci:tcp:HOST:PORT`, `hci:serial:/dev/ttyACM0[@BAUD]`,
/// `hci:user:0`). The actor owns the controller: command flow control, one shared scan fanned out
/// to every `scan(_:)` consumer, serialized connection creation with a deadline, ACL credits and
/// L2CAP fixed channels (ATT to the link's bearer; LE signalling and SMP answered here).
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
        /// Links held at once (further connects fail at once).
        public var connectionSlots: Int
        /// The static random address used as own address; random when nil.
        public var staticRandomAddress: BluetoothAddress?
        /// Where log lines go (dropped packets, late events). Default: stderr when
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
    }

    /// Counters of hostile or surprising input, for tests and diagnostics.
    public struct Statistics: Sendable, Equatable {
        public var malformedEvents = 0
        public var droppedACLPackets = 0
        public var discardedH4Bytes = 0
        public var ignoredCompletedPackets = 0
        public var commandTimeouts = 0
        public var unexpectedEvents = 0
    }

    /// What the controller said about itself during bring-up.
    public struct ControllerInfo: Sendable, Equatable {
        public var version: LocalVersionReturn
        public var publicAddress: BluetoothAddress
        public var ownAddress: BluetoothAddress
        public var aclMaxLength: Int
        public var aclPackets: Int
    }

    public static let defaultLog: @Sendable (String) -> Void = { line in
        if ProcessInfo.processInfo.environment["PROVISION_HCI_LOG"] != nil {
            FileHandle.standardError.write(Data("hci: \(line)\n".utf8))
        }
    }

    public nonisolated let id: String
    public nonisolated let connectionSlots: Int
    public nonisolated var isSimulated: Bool { false }

    private let transport: any HCITransport
    private let options: Options
    private var decoder = H4Decoder()
    public private(set) var statistics = Statistics()
    public private(set) var info: ControllerInfo?
    private var flow = ACLFlowControl(maxFragment: 27, credits: 1)
    private var failure: BLEError?
    private var nextID: UInt64 = 1
    private var readTask: Task<Void, Never>?

    // Commands and the events they wait for.
    private enum WaitKey: Equatable {
        case command(HCIOpcode)
        case leConnection
        case disconnection(UInt16)
    }
    private struct Waiter {
        var key: WaitKey
        var continuation: CheckedContinuation<HCIEvent, any Error>
        var timer: Task<Void, Never>?
    }
    private var waiters: [UInt64: Waiter] = [:]
    private var commandCredits = 1
    private var commandQueue: [(waiter: UInt64, packet: [UInt8])] = []

    // Connections.
    private struct Connection {
        var link: HCILink
        var reassembler = ACLReassembler()
        var localReason: DisconnectReason?
    }
    private var connections: [UInt16: Connection] = [:]
    private var sendWaiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
    private var creatingConnection = false
    private var stashedConnectionComplete: HCIEvent?

    // The radio: scan toggling and connection creation take turns.
    private var radioBusy = false
    private var radioQueue: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []

    // Scanning.
    private struct ScanConsumer {
        var filter: ScanFilter
        var continuation: AsyncThrowingStream<Advertisement, any Error>.Continuation
        var seen: Set<[UInt8]> = []
    }
    private struct AdvertiserEntry {
        var kind: BluetoothAddress.Kind
        var advertisement: AdvertisingData?
        var scanResponse: AdvertisingData?
        var connectable = true
    }
    private var scanConsumers: [UInt64: ScanConsumer] = [:]
    private var scanning = false
    private var advertisers: [[UInt8]: AdvertiserEntry] = [:]

    // MARK: - Opening

    /// Opens the adapter named by `spec` and brings its controller up.
    public static func open(spec: String, options: Options = Options()) async throws -> HCIAdapter {
        let parsed = try AdapterSpec(parsing: spec)
        let transport = try HCITransports.open(parsed)
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
        self.connectionSlots = max(1, options.connectionSlots)
    }

    private func startReading() {
        let reads = transport.reads
        readTask = Task { [weak self] in
            do {
                for try await chunk in reads {
                    guard let self else { return }
                    await self.receive(chunk)
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
        flow = ACLFlowControl(maxFragment: length, credits: count)
        try await execute(SetEventMaskCommand.host)
        try await execute(LESetEventMaskCommand.host)
        let own = options.staticRandomAddress ?? Self.makeStaticRandomAddress()
        try await execute(LESetRandomAddressCommand(address: own))
        info = ControllerInfo(version: version, publicAddress: bdaddr.address, ownAddress: own,
                              aclMaxLength: length, aclPackets: count)
        options.log("\(id): controller up, HCI version \(version.hciVersion), BD_ADDR \(bdaddr.address), own \(own), ACL \(count)×\(length)")
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

    private func makeID() -> UInt64 {
        defer { nextID += 1 }
        return nextID
    }

    // MARK: - Waiting for events

    /// Registers a waiter for `key`, runs `start` once it is registered, and waits with a deadline.
    private func waitFor(_ key: WaitKey, timeout: Duration, operation: String,
                         start: (UInt64) -> Void = { _ in }) async throws -> HCIEvent {
        if let failure { throw failure }
        let id = makeID()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<HCIEvent, any Error>) in
                if Task.isCancelled {
                    c.resume(throwing: BLEError.cancelled)
                    return
                }
                let timer = Task { [weak self] in
                    do { try await Task.sleep(for: timeout) } catch { return }
                    await self?.expire(id, BLEError.timeout(operation: operation, limit: timeout))
                }
                waiters[id] = Waiter(key: key, continuation: c, timer: timer)
                start(id)
            }
        } onCancel: {
            Task { await self.expire(id, BLEError.cancelled) }
        }
    }

    private func expire(_ id: UInt64, _ error: BLEError) {
        guard let waiter = waiters.removeValue(forKey: id) else { return }
        waiter.timer?.cancel()
        if case .command = waiter.key {
            if let i = commandQueue.firstIndex(where: { $0.waiter == id }) {
                commandQueue.remove(at: i)
            } else if case .timeout = error {
                // The controller never answered: assume the credit is lost and carry on.
                statistics.commandTimeouts += 1
                commandCredits = max(commandCredits, 1)
                options.log("\(id): \(error)")
                pumpCommands()
            }
        }
        waiter.continuation.resume(throwing: error)
    }

    private func resolveFirst(_ key: WaitKey, with event: HCIEvent) -> Bool {
        guard let id = waiters.filter({ $0.value.key == key }).keys.min(),
              let waiter = waiters.removeValue(forKey: id) else { return false }
        waiter.timer?.cancel()
        waiter.continuation.resume(returning: event)
        return true
    }

    // MARK: - Commands

    /// Sends a command and waits for its Command Complete (returning its return parameters) or
    /// Command Status (returning nothing). A status other than success throws `HCIError`.
    @discardableResult
    func execute<C: HCICommand>(_ command: C, timeout: Duration? = nil) async throws -> [UInt8] {
        let packet = command.packet
        let event = try await waitFor(.command(C.opcode), timeout: timeout ?? options.commandTimeout,
                                      operation: "HCI \(C.opcode.name)") { id in
            commandQueue.append((id, packet))
            pumpCommands()
        }
        return try Self.result(of: event, opcode: C.opcode)
    }

    private static func result(of event: HCIEvent, opcode: HCIOpcode) throws -> [UInt8] {
        switch event {
        case .commandComplete(let e):
            guard let status = e.status else {
                throw BLEError.protocolError("Command Complete for \(opcode.name) without a status")
            }
            guard status == .success else { throw HCIError(status: status, opcode: opcode) }
            return e.returnParameters
        case .commandStatus(let e):
            guard e.status == .success else { throw HCIError(status: e.status, opcode: opcode) }
            return []
        default:
            throw BLEError.protocolError("unexpected answer to \(opcode.name)")
        }
    }

    private func pumpCommands() {
        while commandCredits > 0, !commandQueue.isEmpty, failure == nil {
            let next = commandQueue.removeFirst()
            commandCredits -= 1
            write([H4PacketType.command.rawValue] + next.packet)
        }
    }

    private func write(_ bytes: [UInt8]) {
        do {
            try transport.write(bytes)
        } catch {
            shutdown(BLEError.adapterFailure("write to the controller failed: \(error)"))
        }
    }

    // MARK: - Incoming bytes

    private func receive(_ chunk: [UInt8]) {
        let before = decoder.discardedBytes
        let packets = decoder.feed(chunk)
        if decoder.discardedBytes > before {
            statistics.discardedH4Bytes += decoder.discardedBytes - before
            options.log("\(id): skipped \(decoder.discardedBytes - before) byte(s) that are not an H4 packet indicator")
        }
        for packet in packets {
            guard failure == nil else { return }
            switch packet.type {
            case .event: receiveEvent(packet.bytes)
            case .acl: receiveACL(packet.bytes)
            default:
                statistics.droppedACLPackets += 1
                options.log("\(id): dropped an H4 packet of type 0x\(String(packet.type.rawValue, radix: 16))")
            }
        }
    }

    private func receiveEvent(_ bytes: [UInt8]) {
        let event: HCIEvent
        do {
            event = try HCIEvent(packet: bytes)
        } catch {
            statistics.malformedEvents += 1
            options.log("\(id): dropped malformed event \(bytes.hexString): \(error)")
            return
        }
        switch event {
        case .commandComplete(let e):
            commandCredits = Int(e.numCommandPackets)
            if e.opcode.rawValue != 0 && !resolveFirst(.command(e.opcode), with: event) {
                statistics.unexpectedEvents += 1
                options.log("\(id): Command Complete for \(e.opcode.name) that nobody waits for")
            }
            pumpCommands()
        case .commandStatus(let e):
            commandCredits = Int(e.numCommandPackets)
            if e.opcode.rawValue != 0 && !resolveFirst(.command(e.opcode), with: event) {
                statistics.unexpectedEvents += 1
                options.log("\(id): Command Status \(e.status) for \(e.opcode.name) that nobody waits for")
            }
            pumpCommands()
        case .numberOfCompletedPackets(let e):
            for entry in e.entries {
                let (actions, ignored) = flow.completed(handle: entry.handle, count: Int(entry.count))
                if ignored > 0 {
                    statistics.ignoredCompletedPackets += ignored
                    options.log("\(id): ignored \(ignored) completed packet(s) for handle 0x\(String(entry.handle, radix: 16)) not in flight")
                }
                perform(actions)
            }
        case .disconnectionComplete(let e):
            guard e.status == .success else {
                options.log("\(id): Disconnection Complete with status \(e.status) for handle 0x\(String(e.handle, radix: 16))")
                return
            }
            linkDown(handle: e.handle, reason: e.reason.disconnectReason)
        case .leConnectionComplete(let e):
            connectionComplete(e, event: event)
        case .leAdvertisingReport(let e):
            advertisingReports(e.reports.map(\.report))
        case .leExtendedAdvertisingReport(let e):
            advertisingReports(e.reports.map(\.report))
        case .leConnectionUpdateComplete(let e):
            options.log("\(id): connection 0x\(String(e.handle, radix: 16)) parameters: status \(e.status), interval \(e.interval)")
        case .hardwareError(let code):
            shutdown(BLEError.adapterFailure("controller hardware error 0x\(String(code, radix: 16))"))
        case .leMeta, .unknown:
            break
        }
    }

    private func receiveACL(_ bytes: [UInt8]) {
        let packet: ACLDataPacket
        do {
            packet = try ACLDataPacket(packet: bytes)
        } catch {
            statistics.droppedACLPackets += 1
            options.log("\(id): dropped malformed ACL packet: \(error)")
            return
        }
        guard var connection = connections[packet.handle] else {
            statistics.droppedACLPackets += 1
            options.log("\(id): dropped ACL data for unknown handle 0x\(String(packet.handle, radix: 16))")
            return
        }
        let outputs = connection.reassembler.push(packet)
        connections[packet.handle] = connection
        for output in outputs {
            switch output {
            case .dropped(let why):
                statistics.droppedACLPackets += 1
                options.log("\(id): handle 0x\(String(packet.handle, radix: 16)): \(why)")
            case .frame(let frame):
                route(frame, handle: packet.handle, link: connection.link)
            }
        }
    }

    private func route(_ frame: L2CAPBasicFrame, handle: UInt16, link: HCILink) {
        switch frame.channel {
        case .att:
            link.deliverATT(frame.payload)
        case .leSignaling:
            let (response, accepted) = LESignalingResponder.respond(to: frame.payload)
            if let response { sendInternal(handle: handle, channel: .leSignaling, payload: response.bytes) }
            if let p = accepted {
                let update = LEConnectionUpdateCommand(handle: handle, intervalMin: p.intervalMin, intervalMax: p.intervalMax,
                                                       maxLatency: p.latency, supervisionTimeout: p.timeout)
                Task {
                    do { try await self.execute(update) } catch {
                        self.options.log("\(self.id): LE Connection Update for 0x\(String(handle, radix: 16)) failed: \(error)")
                    }
                }
            }
        case .smp:
            if let response = SMPResponder.respond(to: frame.payload) {
                sendInternal(handle: handle, channel: .smp, payload: response)
            }
        default:
            statistics.droppedACLPackets += 1
            options.log("\(id): dropped L2CAP frame on unsupported CID 0x\(String(frame.channel.rawValue, radix: 16))")
        }
    }

    // MARK: - ACL out

    private func perform(_ actions: [ACLFlowControl.Action]) {
        // Fragments released together go to the transport in one write.
        var batch: [UInt8] = []
        for case .transmit(let packet) in actions {
            batch.append(H4PacketType.acl.rawValue)
            batch.append(contentsOf: packet.packet)
        }
        if !batch.isEmpty { write(batch) }
        for action in actions {
            switch action {
            case .transmit:
                break
            case .sent(let token):
                sendWaiters.removeValue(forKey: token)?.resume()
            case .failed(let token):
                sendWaiters.removeValue(forKey: token)?.resume(throwing: BLEError.disconnected(.failedToEstablish))
            }
        }
    }

    /// Queues an L2CAP frame and returns once all of it is with the controller (so the caller waits
    /// for ACL credits).
    func sendL2CAP(linkID: UInt64, handle: UInt16, channel: L2CAPBasicFrame.ChannelID, payload: [UInt8]) async throws {
        if let failure { throw failure }
        guard let connection = connections[handle], connection.link.linkID == linkID else {
            throw BLEError.disconnected(.remoteUserTerminated)
        }
        if let reason = connection.link.disconnectReason { throw BLEError.disconnected(reason) }
        let frame = L2CAPBasicFrame(channel: channel, payload: payload).bytes
        let token = makeID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                if Task.isCancelled {
                    c.resume(throwing: BLEError.cancelled)
                    return
                }
                sendWaiters[token] = c
                perform(flow.enqueue(token: token, handle: handle, frame: frame))
            }
        } onCancel: {
            Task { await self.cancelSend(token) }
        }
    }

    private func cancelSend(_ token: UInt64) {
        if flow.cancel(token: token) {
            sendWaiters.removeValue(forKey: token)?.resume(throwing: BLEError.cancelled)
        }
    }

    private func sendInternal(handle: UInt16, channel: L2CAPBasicFrame.ChannelID, payload: [UInt8]) {
        perform(flow.enqueue(token: makeID(), handle: handle,
                             frame: L2CAPBasicFrame(channel: channel, payload: payload).bytes))
    }

    // MARK: - Radio turn-taking

    private func acquireRadio() async throws {
        if let failure { throw failure }
        if !radioBusy {
            radioBusy = true
            return
        }
        let id = makeID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                if Task.isCancelled {
                    c.resume(throwing: BLEError.cancelled)
                    return
                }
                radioQueue.append((id, c))
            }
        } onCancel: {
            Task { await self.cancelRadioWait(id) }
        }
    }

    private func cancelRadioWait(_ id: UInt64) {
        if let i = radioQueue.firstIndex(where: { $0.id == id }) {
            radioQueue.remove(at: i).continuation.resume(throwing: BLEError.cancelled)
        }
    }

    private func releaseRadio() {
        if radioQueue.isEmpty {
            radioBusy = false
        } else {
            radioQueue.removeFirst().continuation.resume()
        }
    }

    // MARK: - Scanning

    public nonisolated func scan(_ filter: ScanFilter) -> AsyncThrowingStream<Advertisement, any Error> {
        let (stream, continuation) = AsyncThrowingStream<Advertisement, any Error>.makeStream(bufferingPolicy: .bufferingNewest(512))
        Task { await self.addScanConsumer(filter, continuation) }
        return stream
    }

    private func addScanConsumer(_ filter: ScanFilter, _ continuation: AsyncThrowingStream<Advertisement, any Error>.Continuation) async {
        if let failure {
            continuation.finish(throwing: failure)
            return
        }
        let id = makeID()
        scanConsumers[id] = ScanConsumer(filter: filter, continuation: continuation)
        continuation.onTermination = { [weak self] _ in
            Task { await self?.removeScanConsumer(id) }
        }
        await reconcileScan()
    }

    private func removeScanConsumer(_ id: UInt64) async {
        guard scanConsumers.removeValue(forKey: id) != nil else { return }
        await reconcileScan()
    }

    /// Makes the controller's scan state match the consumers (on while there is one).
    private func reconcileScan() async {
        guard failure == nil else { return }
        let wanted = !scanConsumers.isEmpty
        guard wanted != scanning else { return }
        do {
            try await acquireRadio()
        } catch {
            return
        }
        let desired = !scanConsumers.isEmpty
        if desired != scanning {
            do {
                if desired {
                    try await execute(LESetScanParametersCommand())
                    try await execute(LESetScanEnableCommand(enable: true, filterDuplicates: false))
                    scanning = true
                } else {
                    scanning = false
                    try await execute(LESetScanEnableCommand(enable: false))
                }
            } catch {
                options.log("\(id): could not \(desired ? "start" : "stop") scanning: \(error)")
                if desired {
                    for consumer in scanConsumers.values {
                        consumer.continuation.finish(throwing: BLEError.adapterFailure("scan could not start: \(error)"))
                    }
                    scanConsumers = [:]
                }
            }
        }
        releaseRadio()
    }

    private func advertisingReports(_ reports: [AdvertisingReport]) {
        for report in reports {
            let key = report.address.bytes
            var entry = advertisers[key] ?? AdvertiserEntry(kind: report.address.kind)
            entry.kind = report.address.kind
            let data: AdvertisingData
            do {
                data = try AdvertisingData(parsing: report.data)
            } catch {
                options.log("\(id): dropped malformed advertising data from \(report.address): \(error)")
                continue
            }
            switch report.kind {
            case .advertisement(let connectable):
                entry.advertisement = data
                entry.connectable = connectable
            case .scanResponse:
                entry.scanResponse = data
            }
            if advertisers.count > 4096 { advertisers = [:] }
            advertisers[key] = entry
            guard !scanConsumers.isEmpty else { continue }
            let merged = (entry.advertisement ?? AdvertisingData()).merged(with: entry.scanResponse ?? AdvertisingData())
            let ad = Advertisement(address: report.address, rssi: Int(report.rssi), data: merged,
                                   connectable: entry.connectable, time: .now, adapter: id)
            for (consumerID, var consumer) in scanConsumers where consumer.filter.matches(ad) {
                if !consumer.filter.allowDuplicates {
                    if consumer.seen.contains(key) { continue }
                    consumer.seen.insert(key)
                    scanConsumers[consumerID] = consumer
                }
                if case .terminated = consumer.continuation.yield(ad) {
                    scanConsumers[consumerID] = nil
                    Task { await self.reconcileScan() }
                }
            }
        }
    }

    // MARK: - Connecting

    public func connect(to peer: BluetoothAddress, options connect: ConnectOptions) async throws -> any Link {
        try await connectLink(to: peer, options: connect)
    }

    /// `connect(to:options:)` with the concrete link type.
    public func connectLink(to peer: BluetoothAddress, options connect: ConnectOptions) async throws -> HCILink {
        if let failure { throw failure }
        let deadline = ContinuousClock.now + connect.timeout
        try await acquireRadio()
        creatingConnection = true
        stashedConnectionComplete = nil
        defer {
            creatingConnection = false
            stashedConnectionComplete = nil
            releaseRadio()
            Task { await self.reconcileScan() }
        }
        guard connections.count < connectionSlots else {
            throw BLEError.connectFailed("all \(connectionSlots) connection slots of \(id) are in use")
        }
        // Many controllers refuse to initiate while scanning; the scan resumes afterwards.
        if scanning {
            scanning = false
            do { try await execute(LESetScanEnableCommand(enable: false)) } catch {
                options.log("\(id): could not pause scanning: \(error)")
            }
        }
        // Use the address type the device advertises with when we have heard it.
        var target = peer
        if let heard = advertisers[peer.bytes] { target.kind = heard.kind }
        do {
            try await execute(LECreateConnectionCommand(peer: target))
            options.log("\(id): creating a connection to \(target)")
            let remaining = deadline - .now
            let event = try await waitForConnection(timeout: max(remaining, .milliseconds(1)), operation: "connect to \(peer)")
            return try established(event, peer: target)
        } catch let error as HCIError {
            // The controller refused to initiate: nothing is pending.
            throw BLEError.connectFailed("\(error)")
        } catch let error as BLEError where error == .cancelled || Self.isTimeout(error) {
            // Also when the Command Status itself was late: the controller may be initiating.
            await cancelPendingConnection(peer: target)
            throw error
        }
    }

    private static func isTimeout(_ error: BLEError) -> Bool {
        if case .timeout = error { return true }
        return false
    }

    private func waitForConnection(timeout: Duration, operation: String) async throws -> HCIEvent {
        if let stashed = stashedConnectionComplete {
            stashedConnectionComplete = nil
            return stashed
        }
        return try await waitFor(.leConnection, timeout: timeout, operation: operation)
    }

    /// LE Create Connection Cancel, then the Connection Complete it causes (Vol 4 Part E 7.8.13);
    /// a connection that won the race is dropped. Runs to the end even when the caller is cancelled.
    private func cancelPendingConnection(peer: BluetoothAddress) async {
        let limit = options.teardownTimeout
        do {
            let event: HCIEvent?
            if let stashed = stashedConnectionComplete {
                stashedConnectionComplete = nil
                event = stashed
            } else {
                event = try await Task {
                    let packet = LECreateConnectionCancelCommand().packet
                    let answer = try await self.waitFor(.command(.leCreateConnectionCancel), timeout: limit,
                                                        operation: "LE Create Connection Cancel") { id in
                        self.commandQueue.append((id, packet))
                        self.pumpCommands()
                    }
                    do {
                        _ = try Self.result(of: answer, opcode: .leCreateConnectionCancel)
                    } catch let error as HCIError where error.status == .commandDisallowed {
                        // Nothing pending any more: a Connection Complete that won the race has
                        // already arrived (it precedes the cancel's Command Complete), or none comes.
                        return self.stashedConnectionComplete
                    }
                    return try await self.waitForConnection(timeout: limit, operation: "Connection Complete after cancel")
                }.value
            }
            stashedConnectionComplete = nil
            if case .leConnectionComplete(let e)? = event, e.status == .success {
                options.log("\(id): connection to \(peer) completed while being cancelled; dropping it")
                let link = register(e, peer: peer)
                await disconnect(linkID: link.linkID, handle: link.handle, reason: .localHostTerminated)
            }
        } catch {
            options.log("\(id): cancelling the connection to \(peer): \(error)")
        }
    }

    private func established(_ event: HCIEvent, peer: BluetoothAddress) throws -> HCILink {
        guard case .leConnectionComplete(let e) = event else {
            throw BLEError.protocolError("unexpected event while connecting")
        }
        guard e.status == .success else {
            throw BLEError.connectFailed("controller: \(e.status)")
        }
        return register(e, peer: peer)
    }

    private func register(_ e: LEConnectionCompleteEvent, peer: BluetoothAddress) -> HCILink {
        let link = HCILink(peer: e.peer, adapter: self, adapterID: id, handle: e.handle, linkID: makeID())
        if let old = connections[e.handle] {
            options.log("\(id): handle 0x\(String(e.handle, radix: 16)) reused while still known; dropping the old link")
            linkDown(handle: e.handle, reason: old.localReason ?? .supervisionTimeout)
        }
        connections[e.handle] = Connection(link: link)
        return link
    }

    private func connectionComplete(_ e: LEConnectionCompleteEvent, event: HCIEvent) {
        if creatingConnection && e.role == 0 {
            if !resolveFirst(.leConnection, with: event) {
                stashedConnectionComplete = event
            }
            return
        }
        statistics.unexpectedEvents += 1
        guard e.status == .success else { return }
        // A connection nobody asked for (e.g. after a cancel gave up, or as peripheral): drop it.
        options.log("\(id): unexpected connection 0x\(String(e.handle, radix: 16)) from \(e.peer); disconnecting")
        let link = register(e, peer: e.peer)
        Task { await self.disconnect(linkID: link.linkID, handle: link.handle, reason: .localHostTerminated) }
    }

    // MARK: - Disconnecting

    /// Drops a link and waits (with a deadline) for Disconnection Complete. Idempotent.
    func disconnect(linkID: UInt64, handle: UInt16, reason: DisconnectReason) async {
        guard var connection = connections[handle], connection.link.linkID == linkID else { return }
        if connection.localReason != nil {
            // Already disconnecting: wait for the outcome.
            _ = await connection.link.waitForDisconnect()
            return
        }
        connection.localReason = reason
        connections[handle] = connection
        let limit = options.teardownTimeout
        do {
            _ = try await Task {
                let packet = DisconnectCommand(handle: handle, reason: .remoteUserTerminated).packet
                let answer = try await self.waitFor(.command(.disconnect), timeout: limit, operation: "HCI Disconnect") { id in
                    self.commandQueue.append((id, packet))
                    self.pumpCommands()
                }
                _ = try Self.result(of: answer, opcode: .disconnect)
                guard let c = self.connections[handle], c.link.linkID == linkID else { return }
                _ = try await self.waitFor(.disconnection(handle), timeout: limit, operation: "Disconnection Complete")
            }.value
        } catch {
            options.log("\(id): disconnecting 0x\(String(handle, radix: 16)): \(error); dropping the link locally")
            if let c = connections[handle], c.link.linkID == linkID {
                linkDown(handle: handle, reason: reason)
            }
        }
    }

    private func linkDown(handle: UInt16, reason: DisconnectReason) {
        guard let connection = connections.removeValue(forKey: handle) else {
            statistics.unexpectedEvents += 1
            options.log("\(id): Disconnection Complete for unknown handle 0x\(String(handle, radix: 16))")
            return
        }
        connection.link.markDisconnected(connection.localReason ?? reason)
        perform(flow.connectionClosed(handle: handle))
        _ = resolveFirst(.disconnection(handle), with: .disconnectionComplete(
            DisconnectionCompleteEvent(handle: handle, reason: HCIStatus(rawValue: reason.code))))
    }

    // MARK: - Closing

    public func close() async {
        guard failure == nil else { return }
        for (handle, connection) in connections {
            await disconnect(linkID: connection.link.linkID, handle: handle, reason: .localHostTerminated)
        }
        if scanning {
            scanning = false
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
        for (_, waiter) in waiters {
            waiter.timer?.cancel()
            waiter.continuation.resume(throwing: error)
        }
        waiters = [:]
        commandQueue = []
        for (_, c) in sendWaiters { c.resume(throwing: BLEError.disconnected(linkReason)) }
        sendWaiters = [:]
        for waiter in radioQueue { waiter.continuation.resume(throwing: error) }
        radioQueue = []
        for (_, connection) in connections { connection.link.markDisconnected(connection.localReason ?? linkReason) }
        connections = [:]
        for (_, consumer) in scanConsumers { consumer.continuation.finish(throwing: error) }
        scanConsumers = [:]
    }

    /// Nil while the adapter works; the error that ended it otherwise.
    public var failureReason: BLEError? { failure }
}
