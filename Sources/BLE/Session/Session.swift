import Synchronization

/// One peripheral, over as many links as it takes: connects, exchanges the MTU, resolves characteristics
/// by UUID (lazily, cached per link), and keeps notification subscriptions alive across reconnects.
///
/// After an unexpected link loss (never after `disconnect()`) the session follows its `ReconnectPolicy`:
/// each attempt connects, starts from an empty GATT cache, rediscovers what the active subscriptions need,
/// rewrites their CCCDs, and only then becomes `ready`. A failed restore is a failed attempt. When the
/// attempts run out the session is `failed(error)` and every notification stream throws.
public actor Session {
    public nonisolated let central: any Central
    public nonisolated let peer: BluetoothAddress
    public nonisolated let options: SessionOptions

    /// The current ATT_MTU (23 before the exchange).
    public private(set) var mtu: Int = ATTClient.defaultMTU
    /// ATT requests sent over the session's life, all links.
    public var roundTrips: Int { counter.value }
    /// The current connection state.
    public var state: ConnectionState { states.current }
    /// What the session's current (or last) link got from the radio, where its adapter can tell.
    public var linkParameters: LinkParameters? { link?.parameters ?? lastLinkParameters }
    private var lastLinkParameters: LinkParameters?
    /// What securing the session's links achieved so far (nil: no link was secured): the level of the
    /// latest, the method of the last pairing, whether a bond was made or used.
    public private(set) var security: SecurityOutcome?

    private let counter = RoundTripCounter()
    private let states = StateBroadcaster()
    private let router = NotificationRouter()
    private let log: @Sendable (String) -> Void

    private var link: (any Link)?
    private var gatt: GATTClient?
    private var generation = 0
    private var establishing = false
    private var manualDisconnect = false
    private var lastReason: DisconnectReason?
    private var reconnectTask: Task<Void, Never>?

    private var readyWaiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
    /// The security every new link gets before `ready`: the options', raised by `secure` and upgrades.
    private var securityWanted: SecurityRequest?
    /// The current link's protection.
    private var linkSecurity: LinkSecurity = .none
    private var nextID: UInt64 = 0

    private struct Subscription {
        var indicate: Bool
        var consumers: Set<UInt64> = []
        /// Handle bound on the current link, nil until enabled.
        var valueHandle: UInt16?
        var cccdHandle: UInt16?
        var active = false
        /// Subscribers waiting for the first consumer's enable.
        var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
    }

    private var subscriptions: [SubscriptionKey: Subscription] = [:]

    public init(central: any Central, peer: BluetoothAddress, options: SessionOptions = SessionOptions()) {
        self.central = central
        self.peer = peer
        self.options = options
        self.log = options.log ?? { _ in }
        self.securityWanted = options.security
    }

    /// Connection states: each call returns a new stream that starts with the current state.
    public nonisolated func connectionStates() -> AsyncStream<ConnectionState> {
        states.stream()
    }

    // MARK: - Connect and disconnect

    /// Connects (within `options.connect.timeout`), exchanges the MTU, and becomes `ready`.
    /// Returns at once when already ready; waits when a connection is being made.
    public func connect() async throws {
        switch state {
        case .ready:
            return
        case .connecting, .connected, .discovering, .reconnecting:
            try await withDeadline(options.connect.timeout, operation: "connect \(peer)") {
                try await self.waitForReady()
            }
            return
        case .disconnected, .failed:
            break
        }
        manualDisconnect = false
        publish(.connecting)
        do {
            try await establishWithinDeadline()
        } catch {
            let e = Self.bleError(error)
            if !manualDisconnect { publish(.failed(e)) }
            failReadyWaiters(e)
            throw e
        }
    }

    /// Disconnects on purpose: no reconnect follows. Pending operations fail with `disconnected`;
    /// notification streams end.
    public func disconnect() async {
        manualDisconnect = true
        reconnectTask?.cancel()
        reconnectTask = nil
        let reason = DisconnectReason.localHostTerminated
        let current = link
        let client = gatt
        dropLink(reason)
        if let client { await client.att.fail(.disconnected(reason)) }
        if let current { await current.disconnect() }
        publish(.disconnected)
        failReadyWaiters(.disconnected(reason))
        for key in subscriptions.keys { router.finish(key, error: nil) }
        for (_, s) in subscriptions { for (_, w) in s.waiters { w.resume(throwing: BLEError.disconnected(reason)) } }
        subscriptions = [:]
    }

    /// `establish()` within `options.connect.timeout`: the link, the MTU exchange and the restore together
    /// (a device that connects but never answers fails the attempt at the connect deadline).
    private func establishWithinDeadline() async throws {
        try await withDeadline(options.connect.timeout, operation: "connect \(peer)") {
            try await self.establish()
        }
    }

    /// Connects a link and brings it to `ready`: MTU, then restores every active subscription.
    private func establish() async throws {
        establishing = true
        defer { establishing = false }
        let newLink: any Link
        let handoff = LinkHandoff()
        do {
            let central = self.central, peer = self.peer
            var asked = options.connect
            asked.security = securityWanted ?? options.upgrade
            let connectOptions = asked
            newLink = try await withDeadline(connectOptions.timeout, operation: "connect \(peer)") {
                let link = try await central.connect(to: peer, options: connectOptions)
                // The deadline (or a cancellation) may already have given up on this connect.
                if !handoff.deliver(link) { await link.disconnect() }
                return link
            }
        } catch {
            // A link that arrived as the attempt gave up belongs to nobody: drop it, or the peripheral
            // and the adapter's slot stay taken.
            if let orphan = handoff.abandon() { await orphan.disconnect() }
            throw error
        }
        if manualDisconnect {
            await newLink.disconnect()
            throw BLEError.disconnected(.localHostTerminated)
        }
        generation += 1
        let gen = generation
        router.reset(generation: gen)
        let router = self.router
        let serviceChanged = ServiceChangedSlot()
        let att = ATTClient(bearer: newLink.bearer, transactionTimeout: options.attTimeout, counter: counter,
                            disconnectReason: { await newLink.waitForDisconnect() },
                            log: { [log, peer] in log("\(peer): \($0)") }) { [weak self] event in
            router.deliver(event, generation: gen)
            if event.isIndication, let h = serviceChanged.valueHandle, event.handle == h {
                Task { await self?.serviceChanged(generation: gen) }
            }
        }
        await att.start()
        let client = GATTClient(att: att, discovery: options.discovery, cache: options.gattCache, cacheKey: options.gattCacheKey,
                                serviceChanged: serviceChanged, log: { [log, peer] in log("\(peer): \($0)") })
        link = newLink
        gatt = client
        linkSecurity = .none
        for key in subscriptions.keys {
            subscriptions[key]?.valueHandle = nil
            subscriptions[key]?.cccdHandle = nil
        }
        Task { [weak self] in
            let reason = await newLink.waitForDisconnect()
            await self?.linkLost(generation: gen, reason: reason)
        }
        publish(.connected)
        do {
            // Secured before anything else: a device may refuse even discovery on a plain link, and
            // the subscriptions restored below may need it.
            if let wanted = securityWanted, wanted.level > .none {
                _ = try await secureLink(newLink, wanted)
            }
            mtu = try await att.exchangeMTU(preferred: options.connect.preferredMTU)
            let active = subscriptions.filter { $0.value.active }.map(\.key)
            if !active.isEmpty {
                publish(.discovering)
                for key in active {
                    guard let sub = subscriptions[key] else { continue }
                    try await enableRediscovering(key, indicate: sub.indicate, on: client, generation: gen)
                }
            }
        } catch {
            if gen == generation {
                dropLink(.localHostTerminated)
                await att.fail(.disconnected(.localHostTerminated))
                await newLink.disconnect()
            }
            throw error
        }
        guard gen == generation, link != nil else {
            throw BLEError.disconnected(lastReason ?? .bearerClosed)
        }
        publish(.ready)
        let waiters = readyWaiters
        readyWaiters = [:]
        for (_, w) in waiters { w.resume() }
    }

    /// Forgets the current link (its late events are ignored from now on).
    private func dropLink(_ reason: DisconnectReason) {
        generation += 1
        router.reset(generation: generation)
        lastLinkParameters = link?.parameters ?? lastLinkParameters
        link = nil
        gatt = nil
        linkSecurity = .none
        lastReason = reason
    }

    private func linkLost(generation gen: Int, reason: DisconnectReason) async {
        guard gen == generation, !manualDisconnect else { return }
        let client = gatt
        dropLink(reason)
        // Decide before any suspension: the attempt in progress (if any) sees its own failure.
        if !establishing && reconnectTask == nil {
            switch options.reconnect {
            case .limited(let attempts, _) where attempts > 0:
                reconnectTask = Task { await self.reconnectLoop(after: reason) }
            default:
                publish(.disconnected)
                failReadyWaiters(.disconnected(reason))
                failSubscriptions(.disconnected(reason))
            }
        }
        // Every pending operation ends now.
        if let client { await client.att.fail(.disconnected(reason)) }
    }

    private func reconnectLoop(after reason: DisconnectReason) async {
        defer { reconnectTask = nil }
        guard case .limited(let attempts, _) = options.reconnect else { return }
        var lastError = BLEError.disconnected(reason)
        for attempt in 1...max(1, attempts) {
            publish(.reconnecting(attempt: attempt))
            do {
                try await Task.sleep(for: options.reconnect.delay(before: attempt))
            } catch {
                return   // cancelled by disconnect()
            }
            if manualDisconnect { return }
            do {
                try await establishWithinDeadline()
                // The new link can be lost between `ready` and this loop resuming; `linkLost` then left
                // the reconnect to this loop (it was still running), so go on with the next attempt.
                if link != nil || manualDisconnect { return }
                lastError = .disconnected(lastReason ?? .bearerClosed)
                log("link to \(peer) lost right after reconnect attempt \(attempt)")
            } catch {
                if manualDisconnect { return }
                lastError = Self.bleError(error)
                log("reconnect attempt \(attempt) to \(peer) failed: \(lastError)")
            }
        }
        publish(.failed(lastError))
        failReadyWaiters(lastError)
        failSubscriptions(lastError)
    }

    // MARK: - Security

    /// Secures the ready link as `request` asks (a stored bond, else pairing; see `Link.secure`) within
    /// `timeout`, and keeps the request for every later link (reconnects are secured before `ready`).
    /// Throws `BLEError.security` when pairing or encryption fails; after a Security Manager timeout the
    /// link is dropped (no pairing on it until it is reconnected, Vol 3 Part H 3.4).
    public func secure(_ request: SecurityRequest, timeout: Duration) async throws -> SecurityOutcome {
        try await withDeadline(timeout, operation: "secure \(peer) (\(request.level))") {
            try await self.secureReadyLink(request)
        }
    }

    private func secureReadyLink(_ request: SecurityRequest) async throws -> SecurityOutcome {
        _ = try await readyClient()
        guard let current = link else { throw BLEError.disconnected(lastReason ?? .localHostTerminated) }
        let outcome = try await secureLink(current, request)
        keepForReconnects(request)
        return outcome
    }

    /// Later links get at least `request`'s level (with what it brings: passkey, OOB data, policy).
    private func keepForReconnects(_ request: SecurityRequest) {
        var kept = request
        kept.pairAgain = false
        if kept.level >= (securityWanted?.level ?? .none) { securityWanted = kept }
    }

    /// One link secured: a device that lost its bond is paired again when the request says so; a
    /// Security Manager timeout drops the link.
    private func secureLink(_ target: any Link, _ request: SecurityRequest) async throws -> SecurityOutcome {
        var outcome: SecurityOutcome
        do {
            do {
                outcome = try await target.secure(request)
            } catch BLEError.security(let f) where f.category == .bondLost && request.pairIfBondLost && !request.pairAgain {
                log("\(peer): \(f); pairing again (the workflow allows it)")
                var again = request
                again.pairAgain = true
                outcome = try await target.secure(again)
                outcome.bondWasLost = true
            }
        } catch BLEError.security(let f) where f.category == .timeout {
            log("\(peer): \(f); dropping the link (no pairing on it until it is reconnected)")
            await target.disconnect()
            throw BLEError.security(f)
        }
        if target === link || link == nil { linkSecurity = outcome.security }
        security = security.map { $0.followed(by: outcome) } ?? outcome
        return outcome
    }

    /// When `error` is a refusal for insufficient security and the session may upgrade, secures the
    /// link once at the level the refusal asks for and returns true: the caller repeats its request.
    /// Insufficient Encryption asks for encryption; Insufficient Authentication for MITM protection
    /// (encryption first on a plain link when this side has no passkey or OOB data); Insufficient
    /// Encryption Key Size for a new pairing (a longer key).
    private func upgrade(after error: BLEError) async throws -> Bool {
        guard case .att(let refusal) = error, let allowed = options.upgrade, let current = link else { return false }
        let level = linkSecurity.level
        var request = allowed
        switch refusal.code {
        case .insufficientEncryption:
            guard level == .none else { return false }
            request.level = max(allowed.level, .encrypted)
        case .insufficientAuthentication:
            guard level < .authenticated else { return false }
            request.level = level >= .encrypted || allowed.achievableLevel == .authenticated ? .authenticated : .encrypted
        case .insufficientEncryptionKeySize:
            request.level = max(level, allowed.level, .encrypted)
            request.pairAgain = true
        default:
            return false
        }
        log("\(peer): \(refusal.code.name); securing the link (\(request.level)) and repeating the request")
        _ = try await secureLink(current, request)
        keepForReconnects(request)
        return true
    }

    /// Runs `body`, and once more after an upgrade when it was refused for insufficient security.
    private func upgrading<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let e as BLEError {
            guard try await upgrade(after: e) else { throw e }
            return try await body()
        }
    }

    // MARK: - Operations

    /// Discovers services and their characteristics ahead of use, caching them for this link: the named
    /// services (per the discovery mode), or every primary service when `services` is empty. Later
    /// operations on them need no discovery round trips. A named service that is missing throws
    /// `attributeNotFound`.
    public func discover(services: [BluetoothUUID], timeout: Duration) async throws {
        let what = services.isEmpty ? "all services" : services.map(\.description).joined(separator: ",")
        try await withDeadline(timeout, operation: "discover \(what)") {
            try await self.withClient { client in
                var found: [GATTService] = []
                if services.isEmpty {
                    found = try await client.discoverAllPrimaryServices()
                } else {
                    for uuid in services { found.append(try await client.service(uuid)) }
                }
                for service in found { _ = try await client.discoverCharacteristics(of: service) }
            }
        }
    }

    /// Reads a characteristic's value (long values with Read Blob).
    public func read(service: BluetoothUUID, characteristic: BluetoothUUID, timeout: Duration) async throws -> [UInt8] {
        try await withDeadline(timeout, operation: "read \(characteristic)") {
            try await self.withClient { client in
                let r = try await client.resolve(service: service, characteristic: characteristic)
                return try await client.read(handle: r.characteristic.valueHandle)
            }
        }
    }

    /// Reads several characteristics, in one round trip where the server answers Read Multiple Variable
    /// Length (one read each where it does not). Each entry succeeds or fails on its own: a characteristic
    /// that is missing or refuses the read fails only its entry. A lost link, the deadline or a protocol
    /// error fails the call.
    public func read(_ targets: [CharacteristicPath], timeout: Duration) async throws -> [Result<[UInt8], BLEError>] {
        let what = targets.map(\.characteristic.description).joined(separator: ",")
        return try await withDeadline(timeout, operation: "read \(what)") {
            let results = try await self.withClient { client in try await Self.read(targets, on: client) }
            // An entry refused for insufficient security upgrades the link once; then all are read again.
            for case .failure(let e) in results where try await self.upgrade(after: e) {
                return try await self.withClient { client in try await Self.read(targets, on: client) }
            }
            return results
        }
    }

    private static func read(_ targets: [CharacteristicPath], on client: GATTClient) async throws -> [Result<[UInt8], BLEError>] {
        var results = [Result<[UInt8], BLEError>](repeating: .failure(.protocolError("not read")), count: targets.count)
        /// An error that belongs to one entry; one that says the shared layout is stale is thrown instead,
        /// so the whole call runs again on rediscovered handles.
        func entryError(_ error: any Error) async throws -> BLEError {
            let e = Session.bleError(error)
            switch e {
            case .att(let a):
                let shared = await client.layoutIsShared
                if a.code == .databaseOutOfSync || shared { throw e }
                return e
            case .attributeNotFound, .unsupportedProperty:
                return e
            default:
                throw e
            }
        }
        var pending: [(index: Int, handle: UInt16)] = []
        for (i, t) in targets.enumerated() {
            do {
                let r = try await client.resolve(service: t.service, characteristic: t.characteristic)
                pending.append((i, r.characteristic.valueHandle))
            } catch {
                results[i] = .failure(try await entryError(error))
            }
        }
        if pending.count >= 2, try await client.prefersReadMultipleVariable() {
            do {
                let values = try await client.readMultipleVariable(handles: pending.map(\.handle))
                await client.noteReadMultipleVariable(true)
                for (p, v) in zip(pending, values) { results[p.index] = .success(v) }
                pending = []
            } catch BLEError.att(let e) where e.code == .requestNotSupported {
                await client.noteReadMultipleVariable(false)
            } catch BLEError.att(let e) where e.code != .databaseOutOfSync {
                // One of them refused: read each, so the error lands on its own characteristic.
            }
        }
        for p in pending {
            do {
                results[p.index] = .success(try await client.read(handle: p.handle))
            } catch {
                results[p.index] = .failure(try await entryError(error))
            }
        }
        return results
    }

    /// Writes a characteristic's value: a Write Request (long values with Prepare/Execute Write), or a
    /// Write Command when `withResponse` is false (the value must then fit in MTU-3).
    public func write(service: BluetoothUUID, characteristic: BluetoothUUID, value: [UInt8], withResponse: Bool,
                      timeout: Duration) async throws {
        try await withDeadline(timeout, operation: "write \(characteristic)") {
            try await self.withClient { client in
                let r = try await client.resolve(service: service, characteristic: characteristic)
                if withResponse {
                    try self.require(.write, "write", of: r)
                    try await client.write(handle: r.characteristic.valueHandle, value: value)
                } else {
                    try self.require(.writeWithoutResponse, "write-without-response", of: r)
                    let limit = client.att.mtu - 3
                    guard value.count <= limit else {
                        throw BLEError.protocolError("a write without response of \(value.count) bytes exceeds MTU-3 (\(limit)); use writeBlob")
                    }
                    try await client.writeWithoutResponse(handle: r.characteristic.valueHandle, value: value)
                }
            }
        }
    }

    /// Streams `data` with write without response in MTU-3 chunks, waiting for link credits.
    public func writeBlob(service: BluetoothUUID, characteristic: BluetoothUUID, data: [UInt8], timeout: Duration) async throws {
        try await withDeadline(timeout, operation: "write blob \(characteristic)") {
            try await self.withClient { client in
                let r = try await client.resolve(service: service, characteristic: characteristic)
                try self.require(.writeWithoutResponse, "write-without-response", of: r)
                try await client.writeBlob(handle: r.characteristic.valueHandle, data: data)
            }
        }
    }

    /// Subscribes to a characteristic's notifications (or indications). Consumers of one characteristic
    /// share one subscription; the stream buffers every value that arrives after this call returns.
    public func notifications(service: BluetoothUUID, characteristic: BluetoothUUID, indicate: Bool = false,
                              timeout: Duration) async throws -> NotificationStream {
        let key = SubscriptionKey(service: service, characteristic: characteristic)
        nextID += 1
        let id = nextID
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: [UInt8].self, throwing: (any Error).self)
        continuation.onTermination = { @Sendable _ in
            Task { await self.consumerLeft(key, id: id) }
        }
        let token = LeaveToken { await self.consumerLeft(key, id: id) }
        // Register first, so nothing that arrives after the CCCD write is lost.
        router.add(continuation, id: id, for: key)
        do {
            try await withDeadline(timeout, operation: "subscribe \(characteristic)") {
                try await self.join(key, id: id, indicate: indicate)
            }
        } catch {
            router.remove(id: id, for: key)
            await removeConsumer(key, id: id, disable: true)
            continuation.finish()
            throw error
        }
        return NotificationStream(base: stream, token: token)
    }

    private func join(_ key: SubscriptionKey, id: UInt64, indicate: Bool) async throws {
        let client = try await readyClient()
        if var sub = subscriptions[key] {
            sub.consumers.insert(id)
            subscriptions[key] = sub
            if sub.active { return }
            // Another consumer is enabling it: wait for that.
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                    if Task.isCancelled {
                        c.resume(throwing: BLEError.cancelled)
                    } else {
                        subscriptions[key]?.waiters[id] = c
                    }
                }
            } onCancel: {
                Task { await self.cancelSubscribeWaiter(key, id: id) }
            }
            return
        }
        subscriptions[key] = Subscription(indicate: indicate, consumers: [id])
        do {
            let gen = generation
            try await upgrading { try await self.enableRediscovering(key, indicate: indicate, on: client, generation: gen) }
        } catch {
            let waiters = subscriptions[key]?.waiters ?? [:]
            subscriptions[key]?.waiters = [:]
            for (_, w) in waiters { w.resume(throwing: error) }
            throw error
        }
        subscriptions[key]?.active = true
        let waiters = subscriptions[key]?.waiters ?? [:]
        subscriptions[key]?.waiters = [:]
        for (_, w) in waiters { w.resume() }
    }

    private func cancelSubscribeWaiter(_ key: SubscriptionKey, id: UInt64) {
        subscriptions[key]?.waiters.removeValue(forKey: id)?.resume(throwing: BLEError.cancelled)
    }

    /// Resolves the characteristic, binds its handle, and writes its CCCD on (strict unless allowed).
    private func enable(_ key: SubscriptionKey, indicate: Bool, on client: GATTClient, generation gen: Int) async throws {
        let r = try await client.resolve(service: key.service, characteristic: key.characteristic, needCCCD: true)
        let property: GATTProperties = indicate ? .indicate : .notify
        try require(property, indicate ? "indicate" : "notify", of: r)
        router.bind(handle: r.characteristic.valueHandle, to: key, generation: gen)
        subscriptions[key]?.valueHandle = r.characteristic.valueHandle
        subscriptions[key]?.cccdHandle = r.cccdHandle
        if let cccd = r.cccdHandle {
            try await client.writeCCCD(handle: cccd, notify: !indicate, indicate: indicate)
        } else if !options.allowUnsupportedProperties {
            throw BLEError.attributeNotFound("client characteristic configuration of characteristic \(key.characteristic) in service \(key.service)")
        }
    }

    /// `enable`, once more on rediscovered handles when the client says the failure came from a stale
    /// layout.
    private func enableRediscovering(_ key: SubscriptionKey, indicate: Bool, on client: GATTClient, generation gen: Int) async throws {
        do {
            try await enable(key, indicate: indicate, on: client, generation: gen)
        } catch let e as BLEError {
            guard await client.shouldRediscover(after: e) else { throw e }
            log("\(peer): \(e); finding \(key) again")
            router.unbind(key)
            try await enable(key, indicate: indicate, on: client, generation: gen)
        }
    }

    /// A consumer left: the last one out disables the subscription on the device.
    private func consumerLeft(_ key: SubscriptionKey, id: UInt64) async {
        router.remove(id: id, for: key)?.finish()
        await removeConsumer(key, id: id, disable: true)
    }

    private func removeConsumer(_ key: SubscriptionKey, id: UInt64, disable: Bool) async {
        guard var sub = subscriptions[key], sub.consumers.contains(id) else { return }
        sub.consumers.remove(id)
        if let w = sub.waiters.removeValue(forKey: id) { w.resume(throwing: BLEError.cancelled) }
        guard sub.consumers.isEmpty else {
            subscriptions[key] = sub
            return
        }
        subscriptions[key] = nil
        router.unbind(key)
        guard disable, sub.active, case .ready = state, let client = gatt, let cccd = sub.cccdHandle else { return }
        do {
            try await withDeadline(options.attTimeout, operation: "unsubscribe \(key.characteristic)") {
                try await client.writeCCCD(handle: cccd, notify: false, indicate: false)
            }
        } catch {
            log("disabling \(key) on \(peer) failed: \(error)")
        }
    }

    /// The server's database changed (Service Changed indication): the link's layout is dropped, and every
    /// active subscription is found again by UUID, rebound and its CCCD written, as after a reconnect.
    /// (Requests already queued with old handles are not stopped: the server's robust caching, which this
    /// client asks for wherever the server offers it, is what refuses those.)
    private func serviceChanged(generation gen: Int) async {
        guard gen == generation, let client = gatt else { return }
        log("\(peer): Service Changed indicated; rediscovering")
        await client.serviceChangedIndicated()
        for key in subscriptions.filter({ $0.value.active }).map(\.key) {
            guard gen == generation, let sub = subscriptions[key] else { continue }
            router.unbind(key)
            do {
                try await enableRediscovering(key, indicate: sub.indicate, on: client, generation: gen)
            } catch {
                log("\(peer): restoring \(key) after Service Changed failed: \(error)")
            }
        }
    }

    // MARK: - Helpers

    /// Runs `body` with the ready link's GATT client; once more, on rediscovered handles, when the client
    /// says the failure came from a stale layout (`GATTClient.shouldRediscover(after:)`).
    private func withClient<T: Sendable>(_ body: @Sendable (GATTClient) async throws -> T) async throws -> T {
        let client = try await readyClient()
        do {
            return try await upgrading { try await body(client) }
        } catch let e as BLEError {
            guard await client.shouldRediscover(after: e) else { throw e }
            log("\(peer): \(e); rediscovering and trying once more")
            return try await body(client)
        }
    }

    private nonisolated func require(_ property: GATTProperties, _ name: String, of r: ResolvedCharacteristic) throws {
        guard !options.allowUnsupportedProperties, !r.characteristic.properties.contains(property) else { return }
        throw BLEError.unsupportedProperty(characteristic: r.characteristic.uuid, property: name)
    }

    /// The GATT client of a ready link, waiting for `ready` while connecting or reconnecting.
    private func readyClient() async throws -> GATTClient {
        while true {
            switch state {
            case .ready:
                if let gatt { return gatt }
                try await waitForReady()
            case .failed(let e):
                throw e
            case .disconnected:
                throw BLEError.disconnected(lastReason ?? .localHostTerminated)
            case .connecting, .connected, .discovering, .reconnecting:
                try await waitForReady()
            }
        }
    }

    private func waitForReady() async throws {
        nextID += 1
        let id = nextID
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                if Task.isCancelled {
                    c.resume(throwing: BLEError.cancelled)
                } else {
                    readyWaiters[id] = c
                }
            }
        } onCancel: {
            Task { await self.cancelReadyWaiter(id) }
        }
    }

    private func cancelReadyWaiter(_ id: UInt64) {
        readyWaiters.removeValue(forKey: id)?.resume(throwing: BLEError.cancelled)
    }

    private func failReadyWaiters(_ error: BLEError) {
        let waiters = readyWaiters
        readyWaiters = [:]
        for (_, w) in waiters { w.resume(throwing: error) }
    }

    private func failSubscriptions(_ error: BLEError) {
        for (key, sub) in subscriptions {
            router.finish(key, error: error)
            for (_, w) in sub.waiters { w.resume(throwing: error) }
        }
        subscriptions = [:]
    }

    private func publish(_ value: ConnectionState) {
        guard states.current != value else { return }
        states.publish(value)
    }

    static func bleError(_ error: any Error) -> BLEError {
        if let e = error as? BLEError { return e }
        if error is CancellationError { return .cancelled }
        return .adapterFailure("\(error)")
    }
}

/// Hands a link from a connect that runs under a deadline to the session that asked for it, so that a
/// link finished just as the deadline won is disconnected rather than leaked (whichever side comes last
/// drops it).
final class LinkHandoff: Sendable {
    private let state = Mutex<(link: (any Link)?, abandoned: Bool)>((nil, false))

    /// The connect side: false when the session has given up (the caller must drop the link).
    func deliver(_ link: any Link) -> Bool {
        state.withLock { s in
            guard !s.abandoned else { return false }
            s.link = link
            return true
        }
    }

    /// The session side, after the attempt failed: a link that was delivered anyway, to drop.
    func abandon() -> (any Link)? {
        state.withLock { s in
            s.abandoned = true
            defer { s.link = nil }
            return s.link
        }
    }
}
