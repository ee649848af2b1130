import AsyncSupport
import Synchronization

/// One peripheral, over as many links as it takes: connects, exchanges the MTU, resolves characteristics
/// by UUID (lazily, cached per link), and keeps notification subscriptions alive across reconnects.
///
/// Every decision — connection states, the reconnect policy, which link is current, who waits for what,
/// which subscriptions a new link restores — is taken by `SessionMachine`, a value tested on its own.
/// The actor executes what it decides: it connects through the `Central`, makes each link's ATT and GATT
/// clients, runs the steps of an attempt (securing, the MTU, the restore), arms deadlines on the shared
/// `Timeouts` driver, wakes the callers waiting in its `WaiterQueue`, and feeds back what happened.
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
    public var state: ConnectionState { machine.state }
    /// What the session's current (or last) link got from the radio, where its adapter can tell.
    public var linkParameters: LinkParameters? {
        links.max(by: { $0.key < $1.key }).flatMap { $0.value.link.parameters } ?? lastLinkParameters
    }
    /// The parameters of the last link closed.
    private var lastLinkParameters: LinkParameters?
    /// What securing the session's links achieved so far (nil: no link was secured): the level of the
    /// latest, the method of the last pairing, whether a bond was made or used.
    public var security: SecurityOutcome? { machine.security }

    typealias Generation = SessionMachine.Generation
    typealias WaiterID = SessionMachine.WaiterID
    typealias Action = SessionMachine.Action

    /// One link of the session, with its clients.
    struct LinkEntry {
        var link: any Link
        var att: ATTClient
        var gatt: GATTClient
    }

    /// What a waiting caller is woken with.
    enum Wake: Sendable {
        /// The ready link (its generation), or why there is none.
        case ready(Result<Generation, BLEError>)
        /// The caller enables the subscription itself.
        case enable
    }

    var machine: SessionMachine
    let counter = RoundTripCounter()
    let states = StateBroadcaster()
    let router = NotificationRouter()
    let log: @Sendable (String) -> Void

    /// The session's links by generation: the current one, and one being closed.
    var links: [Generation: LinkEntry] = [:]
    /// Callers waiting for `ready`, or for a subscription's enable.
    private let waits = WaiterQueue<Void, Wake>()
    private var tickets: [WaiterID: WaitTicket] = [:]
    private var nextWaiter: WaiterID = 0
    private var timers: [SessionMachine.Deadline: Timeouts.Token] = [:]
    /// The task running the current attempt's step (connect, prepare, restore).
    private var attempt: (id: SessionMachine.AttemptID, task: Task<Void, Never>)?
    /// Links being closed now (`closeLink` suspends while it fails the ATT client and disconnects), and
    /// the waiting callers told meanwhile that there is no link: they wake once every such link is down,
    /// so that no link a call made outlives the call (events arriving during the close run on this actor).
    private var closing = 0
    private var heldWakes: [(WaiterID, Wake)] = []

    public init(central: any Central, peer: BluetoothAddress, options: SessionOptions = SessionOptions()) {
        self.central = central
        self.peer = peer
        self.options = options
        self.log = options.log ?? { _ in }
        self.machine = SessionMachine(SessionMachine.Configuration(
            peer: peer, connectTimeout: options.connect.timeout, reconnect: options.reconnect,
            security: options.security, upgrade: options.upgrade))
    }

    /// Connection states: each call returns a new stream that starts with the current state.
    public nonisolated func connectionStates() -> AsyncStream<ConnectionState> {
        states.stream()
    }

    // MARK: - Connect and disconnect

    /// Connects (within `options.connect.timeout`), exchanges the MTU, and becomes `ready`.
    /// Returns at once when already ready; waits (within its own connect deadline) when a connection is
    /// being made.
    public func connect() async throws {
        let id = newWaiter()
        // The caller's cancellation is answered by the machine: for the first connect, once the attempt's
        // work has ended (so no link it made outlives the call).
        _ = try await ready(id, after: machine.handle(.connect(id)), answeringCancellation: true)
    }

    /// Disconnects on purpose: no reconnect follows. Pending operations fail with `disconnected`;
    /// notification streams end.
    public func disconnect() async {
        await perform(machine.handle(.disconnect))
    }

    // MARK: - Waiting

    func newWaiter() -> WaiterID {
        nextWaiter &+= 1
        return nextWaiter
    }

    /// The GATT client of the ready link, waiting for `ready` while connecting or reconnecting.
    func readyClient() async throws -> (Generation, GATTClient) {
        let id = newWaiter()
        let g = try await ready(id, after: machine.handle(.awaitReady(id)))
        guard let entry = links[g] else { throw BLEError.disconnected(machine.lastReason ?? .bearerClosed) }
        return (g, entry.gatt)
    }

    /// Performs `actions` and returns the ready link they give `id`, waiting for it when they give none.
    func ready(_ id: WaiterID, after actions: [Action], answeringCancellation: Bool = false) async throws -> Generation {
        switch try await wake(id, after: actions, answeringCancellation: answeringCancellation) {
        case .ready(let result): return try result.get()
        case .enable: throw BLEError.protocolError("session waiter \(id) told to enable")
        }
    }

    /// Performs `actions`; returns what they address to `id`, or waits for it. A cancelled wait tells the
    /// machine (the caller gives up) and throws `cancelled`; with `answeringCancellation` the wait goes on
    /// until the machine answers the cancellation.
    func wake(_ id: WaiterID, after actions: [Action], answeringCancellation: Bool = false) async throws -> Wake {
        if let now = await perform(actions, caller: id) { return now }
        let ticket = waits.enqueue()
        tickets[id] = ticket
        let outcome: WaitOutcome<Wake>
        if answeringCancellation {
            outcome = await withTaskCancellationHandler {
                await waits.wait(ticket, cancellation: .isIgnored)
            } onCancel: {
                Task { await self.feed(.cancelWait(id)) }
            }
        } else {
            outcome = await waits.wait(ticket)
        }
        switch outcome {
        case .granted(let w):
            return w
        case .cancelled, .timedOut:
            tickets[id] = nil
            await perform(machine.handle(.cancelWait(id)))
            throw BLEError.cancelled
        }
    }

    /// Feeds one event to the machine and carries out what it decides.
    func feed(_ event: SessionMachine.Event) async {
        await perform(machine.handle(event))
    }

    // MARK: - The executor

    /// Carries out the machine's actions in order; returns what they address to `caller` while it is not
    /// waiting yet. `arrived` is the link a `linkUp` event brought (adopted or dropped).
    @discardableResult
    func perform(_ actions: [Action], caller: WaiterID? = nil, arrived: (any Link)? = nil) async -> Wake? {
        var mine: Wake?
        for action in actions {
            switch action {
            case .publish(let s):
                states.publish(s)
            case .connect(let id, let security):
                startConnect(id, security: security)
            case .adopt(_, let g):
                guard let link = arrived else { continue }
                await adopt(link, as: g)
            case .dropLink:
                // A link that arrived for an attempt given up belongs to nobody: the peripheral and the
                // adapter's slot are freed.
                await arrived?.disconnect()
            case .prepare(let id, let g, let security):
                run(id) { session in await session.prepare(g, security: security) }
            case .restore(let id, let g, let list):
                run(id) { session in await session.restore(list, on: g) }
            case .cancelAttempt(let id):
                if let a = attempt, a.id == id {
                    a.task.cancel()
                    attempt = nil
                }
            case .closeLink(let g, let error):
                guard let entry = links.removeValue(forKey: g) else { continue }
                lastLinkParameters = entry.link.parameters ?? lastLinkParameters
                closing += 1
                await entry.att.fail(error)
                await entry.link.disconnect()
                closing -= 1
                if closing == 0 {
                    let held = heldWakes
                    heldWakes = []
                    for (id, value) in held { wake(id, value, caller: nil, &mine) }
                }
            case .arm(let d, let limit):
                if let old = timers[d] { Timeouts.shared.cancel(old) }
                timers[d] = Timeouts.shared.schedule(after: limit) { [weak self] in
                    Task { await self?.expired(d) }
                }
            case .disarm(let d):
                if let t = timers.removeValue(forKey: d) { Timeouts.shared.cancel(t) }
            case .resume(let id, let result):
                wake(id, .ready(result), caller: caller, &mine)
            case .enable(let id, _, _, _):
                wake(id, .enable, caller: caller, &mine)
            case .disable(let key, let cccd, let g):
                await disable(key, cccd: cccd, on: g)
                await feed(.disabled(key))
            case .unbind(let key):
                router.unbind(key)
            case .endStreams(let keys, let error):
                for key in keys { router.finish(key, error: error) }
            case .rediscover(let g, let list):
                let session = self
                Task { await session.rediscover(list, on: g) }
            case .log(let line):
                log(line)
            }
        }
        return mine
    }

    private func wake(_ id: WaiterID, _ value: Wake, caller: WaiterID?, _ mine: inout Wake?) {
        if closing > 0, case .ready(.failure) = value, tickets[id] != nil {
            heldWakes.append((id, value))
            return
        }
        if let ticket = tickets.removeValue(forKey: id) {
            waits.withLock { _, waiters in _ = waiters.resume(ticket, value) }
        } else if id == caller {
            mine = value
        }
    }

    private func expired(_ d: SessionMachine.Deadline) async {
        // A deadline disarmed (or re-armed) meanwhile is stale.
        guard timers.removeValue(forKey: d) != nil else { return }
        await feed(.deadline(d))
    }

    /// Runs one step of attempt `id` in a task of its own (cancelled by `cancelAttempt`).
    private func run(_ id: SessionMachine.AttemptID, _ step: @escaping @Sendable (Session) async -> Void) {
        let task = Task { [weak self] in
            guard let self else { return }
            await step(self)
        }
        attempt = (id, task)
    }

    // MARK: - An attempt's steps

    private func startConnect(_ id: SessionMachine.AttemptID, security: SecurityRequest?) {
        var asked = options.connect
        asked.security = security
        let connectOptions = asked
        let central = self.central, peer = self.peer
        run(id) { session in
            do {
                let link = try await central.connect(to: peer, options: connectOptions)
                await session.linkArrived(link, for: id)
            } catch {
                await session.feed(.connectFailed(id, Session.bleError(error)))
            }
        }
    }

    private func linkArrived(_ link: any Link, for id: SessionMachine.AttemptID) async {
        await perform(machine.handle(.linkUp(id)), arrived: link)
    }

    /// The link becomes generation `g`: its ATT and GATT clients, its notifications routed, its loss watched.
    private func adopt(_ link: any Link, as g: Generation) async {
        router.reset(generation: g)
        let router = self.router
        let serviceChanged = ServiceChangedSlot()
        let att = ATTClient(bearer: link.bearer, transactionTimeout: options.attTimeout, counter: counter,
                            disconnectReason: { await link.waitForDisconnect() },
                            log: { [log, peer] in log("\(peer): \($0)") }) { [weak self] event in
            router.deliver(event, generation: g)
            if event.isIndication, let h = serviceChanged.valueHandle, event.handle == h {
                Task { await self?.feed(.serviceChanged(g)) }
            }
        }
        let gatt = GATTClient(att: att, discovery: options.discovery, cache: options.gattCache, cacheKey: options.gattCacheKey,
                              serviceChanged: serviceChanged, log: { [log, peer] in log("\(peer): \($0)") })
        links[g] = LinkEntry(link: link, att: att, gatt: gatt)
        Task { [weak self] in
            let reason = await link.waitForDisconnect()
            await self?.feed(.linkLost(g, reason))
        }
        await att.start()
    }

    /// Secures the new link (before anything else: a device may refuse even discovery on a plain link,
    /// and the restore may need it), then exchanges the MTU.
    private func prepare(_ g: Generation, security: SecurityRequest?) async {
        do {
            guard let entry = links[g] else { throw BLEError.disconnected(machine.lastReason ?? .bearerClosed) }
            if let security { _ = try await secureLink(g, security, keep: nil) }
            let exchanged = try await entry.att.exchangeMTU(preferred: options.connect.preferredMTU)
            if links[g] != nil { mtu = exchanged }
            await feed(.prepared(g))
        } catch {
            await feed(.establishFailed(g, Self.bleError(error)))
        }
    }

    /// Enables every active subscription on the new link, found again by UUID.
    private func restore(_ list: [SessionMachine.Restore], on g: Generation) async {
        do {
            guard let client = links[g]?.gatt else { throw BLEError.disconnected(machine.lastReason ?? .bearerClosed) }
            for r in list {
                let handles = try await enableRediscovering(r.key, indicate: r.indicate, on: client, generation: g)
                await feed(.rebound(r.key, g, handles))
            }
            await feed(.restored(g))
        } catch {
            await feed(.establishFailed(g, Self.bleError(error)))
        }
    }

    static func bleError(_ error: any Error) -> BLEError {
        if let e = error as? BLEError { return e }
        if error is CancellationError { return .cancelled }
        return .adapterFailure("\(error)")
    }
}
