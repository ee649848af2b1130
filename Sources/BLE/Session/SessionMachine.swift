/// Identifies a subscription across links: never a handle, which may change after a reconnect.
typealias SubscriptionKey = CharacteristicPath

/// A session's decisions as a value: what its callers ask (connect, wait for ready, subscribe, leave,
/// disconnect) and what happens to its links (a link up, prepared, restored, lost; a deadline) in;
/// states to publish, links to make, drop or close, waits to end and deadlines to arm out. No clock,
/// no I/O, no tasks: `Session` executes the actions (the `Central`, ATT and GATT clients, `Timeouts`,
/// the callers' continuations, the notification router) and feeds back what happened.
///
/// - **Connection states** follow the current attempt: `connecting` (or `reconnecting(n)`) until the
///   link is up, `connected` while it is secured and its MTU exchanged, `discovering` while the active
///   subscriptions are restored, then `ready`. A failed first connect is `failed(error)`.
/// - **Reconnect** only after an unexpected loss of a ready link, never after `disconnect`: up to the
///   policy's attempts, each after its backoff; an attempt that fails anywhere (the link, securing, the
///   MTU, the restore, the connect deadline) is a failed attempt; after the last the session is
///   `failed(error)`, every waiter fails with it and every notification stream ends with it. The
///   attempts count again from 1 after each `ready`.
/// - **Link generations**: each link that comes up gets a new number; what is reported about an older
///   link (lost, prepared, an enable, Service Changed) changes nothing, and a link that arrives for an
///   attempt that was given up (deadline, disconnect) is dropped, never adopted.
/// - **Every pending operation ends at once** when a link is lost or closed: its ATT client fails with
///   `disconnected(reason)`. Callers waiting for `ready` keep waiting through a reconnect (within their
///   own deadlines) and fail with its error.
/// - **Subscriptions** are keyed by (service, characteristic). The first consumer enables it (the others
///   wait for that), the last one out disables it; each link restores every active one before `ready`.
/// - **Security**: every link is secured before `ready` at the level wanted, which `secure` and
///   upgrades raise for later links; `upgrade(after:)` decides whether a refusal may secure the link.
struct SessionMachine: Sendable {
    /// A link's number over the session's life.
    typealias Generation = UInt64
    typealias AttemptID = UInt64
    /// A caller waiting (for `ready`, for a subscription's enable) or a notification consumer.
    typealias WaiterID = UInt64

    struct Configuration: Sendable {
        /// Names the peer in errors and log lines.
        var peer: BluetoothAddress
        /// Each attempt's deadline: the link, securing, the MTU and the restore together.
        var connectTimeout: Duration
        var reconnect: ReconnectPolicy
        /// What every link is secured with before `ready` (nil: nothing, until `secure` asks).
        var security: SecurityRequest?
        /// What a refusal for insufficient security may do (nil: nothing).
        var upgrade: SecurityRequest?

        init(peer: BluetoothAddress, connectTimeout: Duration, reconnect: ReconnectPolicy,
             security: SecurityRequest? = nil, upgrade: SecurityRequest? = nil) {
            self.peer = peer
            self.connectTimeout = connectTimeout
            self.reconnect = reconnect
            self.security = security
            self.upgrade = upgrade
        }
    }

    /// The handles a subscription is bound to on one link.
    struct Handles: Sendable, Hashable {
        var value: UInt16
        var cccd: UInt16?
    }

    /// A subscription to restore or find again: its key and whether it indicates.
    struct Restore: Sendable, Hashable {
        var key: SubscriptionKey
        var indicate: Bool
    }

    enum Deadline: Sendable, Hashable {
        /// An attempt's connect deadline.
        case attempt(AttemptID)
        /// The wait before a reconnect attempt.
        case backoff(AttemptID)
        /// A `connect()` that joined a connection already being made.
        case connectWait(WaiterID)
    }

    enum Event: Sendable, Equatable {
        /// A caller's `connect()`: answered by `resume` once ready (or failed).
        case connect(WaiterID)
        /// The attempt's `Central.connect` returned a link.
        case linkUp(AttemptID)
        /// The attempt's `Central.connect` failed.
        case connectFailed(AttemptID, BLEError)
        /// The link is secured (as `prepare` asked) and its MTU exchanged.
        case prepared(Generation)
        /// A subscription is enabled on the link again, on these handles (a restore, or after Service Changed).
        case rebound(SubscriptionKey, Generation, Handles)
        /// Every subscription `restore` named is enabled on the link.
        case restored(Generation)
        /// Securing, the MTU exchange or the restore failed.
        case establishFailed(Generation, BLEError)
        /// The link went down.
        case linkLost(Generation, DisconnectReason)
        case deadline(Deadline)
        /// A caller's `disconnect()`.
        case disconnect
        /// A caller needs the ready link: answered by `resume(id, .success(generation))` or a failure.
        case awaitReady(WaiterID)
        /// A waiting caller gave up (cancelled): it is answered `cancelled`.
        case cancelWait(WaiterID)
        /// A consumer wants notifications of `key`, on the ready link it was given.
        case subscribe(WaiterID, SubscriptionKey, indicate: Bool, on: Generation)
        /// The consumer that was told `enable` did it: the CCCD is written, on these handles. Answered by
        /// `resume` (also to the consumers that waited for it).
        case enabled(WaiterID, SubscriptionKey, Generation, Handles)
        case enableFailed(WaiterID, SubscriptionKey, Generation, BLEError)
        /// A consumer left (its stream ended or was dropped).
        case leave(SubscriptionKey, WaiterID)
        /// The server indicated Service Changed on a link.
        case serviceChanged(Generation)
        /// A link was secured with `outcome`; `keep`: later links get at least this request.
        case secured(Generation, SecurityOutcome, keep: SecurityRequest?)
    }

    enum Action: Sendable, Equatable {
        case publish(ConnectionState)
        /// Start the attempt: `Central.connect` asking for `security`, then report `linkUp` or `connectFailed`.
        case connect(AttemptID, security: SecurityRequest?)
        /// The link of the attempt becomes the session's link `generation`: make its ATT and GATT clients,
        /// watch it go down (`linkLost`).
        case adopt(AttemptID, Generation)
        /// A link that arrived for an attempt given up belongs to nobody: disconnect it.
        case dropLink(AttemptID)
        /// Secure the link with `security` (when not nil), exchange the MTU; report `prepared` or `establishFailed`.
        case prepare(AttemptID, Generation, security: SecurityRequest?)
        /// Enable these subscriptions on the new link (`rebound` each), then report `restored` (or `establishFailed`).
        case restore(AttemptID, Generation, [Restore])
        /// Stop whatever still runs for the attempt.
        case cancelAttempt(AttemptID)
        /// Every pending operation on the link ends with `error`; the link is disconnected (if still up).
        case closeLink(Generation, BLEError)
        case arm(Deadline, Duration)
        case disarm(Deadline)
        /// A waiting caller's answer: the ready link's generation, or why there is none.
        case resume(WaiterID, Result<Generation, BLEError>)
        /// The consumer enables the subscription itself (resolve, bind, CCCD) and reports `enabled`/`enableFailed`.
        case enable(WaiterID, SubscriptionKey, indicate: Bool, Generation)
        /// The last consumer left an enabled subscription: write its CCCD off.
        case disable(SubscriptionKey, cccd: UInt16, Generation)
        /// Forget the subscription's handle binding on the link.
        case unbind(SubscriptionKey)
        /// The notification streams of these subscriptions end (normally when `error` is nil).
        case endStreams([SubscriptionKey], BLEError?)
        /// Service Changed: the link forgets its layout and finds these subscriptions again (`rebound` each).
        case rediscover(Generation, [Restore])
        case log(String)
    }

    private enum Stage: Sendable, Equatable {
        /// Waiting out the delay before a reconnect attempt.
        case backoff
        case connecting
        /// The link is up: securing, MTU.
        case preparing
        case restoring
    }

    private struct Attempt: Sendable, Equatable {
        var id: AttemptID
        var stage: Stage
        var link: Generation?
        /// Why it was given up (deadline, loss of its link, its last caller gone). Its work is cancelled;
        /// it fails with this once that work has reported back, so nothing it made outlives it.
        var givenUp: BLEError?

        init(id: AttemptID, stage: Stage) {
            self.id = id
            self.stage = stage
        }
    }

    private enum Phase: Sendable, Equatable {
        case disconnected
        case failed(BLEError)
        /// The first connect (from `disconnected` or `failed`).
        case connecting(Attempt)
        /// After an unexpected loss: attempt `n` of the policy.
        case reconnecting(Int, Attempt)
        case ready(Generation)
    }

    private struct Subscription: Sendable {
        var indicate: Bool
        var consumers: [WaiterID]
        /// The consumer enabling it (nil once enabled).
        var enabler: WaiterID?
        /// Consumers waiting for the enabler.
        var joiners: [WaiterID] = []
        /// Where it is bound on the current link (nil until enabled there).
        var handles: Handles?
        var active: Bool { enabler == nil }
    }

    let configuration: Configuration
    private var phase = Phase.disconnected
    private var published = ConnectionState.disconnected
    private var lastGeneration: Generation = 0
    private var lastAttempt: AttemptID = 0
    /// Why the last link went down.
    private(set) var lastReason: DisconnectReason?
    /// Callers waiting for `ready`, in the order they came.
    private var readyWaiters: [WaiterID] = []
    /// Those of them that joined a connection already being made (with their own deadline).
    private var connectWaits: Set<WaiterID> = []
    private var subscriptions: [SubscriptionKey: Subscription] = [:]
    /// Subscription keys in the order they were made (restores go in this order).
    private var order: [SubscriptionKey] = []
    /// What later links are secured with before `ready`.
    private(set) var securityWanted: SecurityRequest?
    /// The current link's protection.
    private(set) var linkSecurity = LinkSecurity.none
    /// What securing the session's links achieved so far.
    private(set) var security: SecurityOutcome?

    init(_ configuration: Configuration) {
        self.configuration = configuration
        self.securityWanted = configuration.security
    }

    /// The state last published.
    var state: ConnectionState { published }

    /// The current link, whether ready or still being prepared.
    var currentLink: Generation? {
        switch phase {
        case .ready(let g): return g
        case .connecting(let a), .reconnecting(_, let a): return a.link
        case .disconnected, .failed: return nil
        }
    }

    mutating func handle(_ event: Event) -> [Action] {
        var actions: [Action] = []
        switch event {
        case .connect(let id):
            connect(id, &actions)
        case .linkUp(let attempt):
            linkUp(attempt, &actions)
        case .connectFailed(let id, let error):
            guard let a = attempt(id), a.stage == .connecting else { return [] }
            if let reason = a.givenUp {
                attemptFailed(reason, &actions)
            } else {
                actions.append(.disarm(.attempt(a.id)))
                attemptFailed(error, &actions)
            }
        case .prepared(let g):
            guard var a = attempt(linkedTo: g), a.stage == .preparing else { return [] }
            if let reason = a.givenUp {
                attemptFailed(reason, &actions)
                return actions
            }
            let active = restoreList()
            if active.isEmpty {
                becomeReady(a, &actions)
            } else {
                a.stage = .restoring
                setAttempt(a)
                publish(&actions)
                actions.append(.restore(a.id, g, active))
            }
        case .rebound(let key, let g, let handles):
            guard currentLink == g else { return [] }
            subscriptions[key]?.handles = handles
        case .restored(let g):
            guard let a = attempt(linkedTo: g), a.stage == .restoring else { return [] }
            if let reason = a.givenUp {
                attemptFailed(reason, &actions)
            } else {
                becomeReady(a, &actions)
            }
        case .establishFailed(let g, let error):
            guard let a = attempt(linkedTo: g) else { return [] }
            if let reason = a.givenUp {
                attemptFailed(reason, &actions)
            } else {
                actions.append(.disarm(.attempt(a.id)))
                actions.append(.closeLink(g, .disconnected(.localHostTerminated)))
                attemptFailed(error, &actions)
            }
        case .linkLost(let g, let reason):
            linkLost(g, reason, &actions)
        case .deadline(let d):
            deadline(d, &actions)
        case .disconnect:
            disconnect(&actions)
        case .awaitReady(let id):
            switch phase {
            case .ready(let g): actions.append(.resume(id, .success(g)))
            case .failed(let e): actions.append(.resume(id, .failure(e)))
            case .disconnected: actions.append(.resume(id, .failure(.disconnected(lastReason ?? .localHostTerminated))))
            case .connecting, .reconnecting: readyWaiters.append(id)
            }
        case .cancelWait(let id):
            cancelWait(id, &actions)
        case .subscribe(let id, let key, let indicate, let g):
            subscribe(id, key, indicate: indicate, on: g, &actions)
        case .enabled(let id, let key, let g, let handles):
            guard var sub = subscriptions[key], sub.enabler == id else {
                // The subscription ended meanwhile (disconnect, failed reconnect).
                actions.append(.resume(id, .failure(endedError)))
                return actions
            }
            guard case .ready(g) = phase else {
                // The link it was enabled on is gone: like every operation on it, the subscribe fails.
                removeSubscription(key, &actions)
                let error = BLEError.disconnected(lastReason ?? .bearerClosed)
                for w in [id] + sub.joiners { actions.append(.resume(w, .failure(error))) }
                return actions
            }
            sub.enabler = nil
            sub.handles = handles
            let joiners = sub.joiners
            sub.joiners = []
            subscriptions[key] = sub
            for w in [id] + joiners { actions.append(.resume(w, .success(g))) }
        case .enableFailed(let id, let key, _, let error):
            if let sub = subscriptions[key], sub.enabler == id {
                removeSubscription(key, &actions)
                for w in sub.joiners { actions.append(.resume(w, .failure(error))) }
            }
            actions.append(.resume(id, .failure(error)))
        case .leave(let key, let id):
            leave(key, id, &actions)
        case .serviceChanged(let g):
            guard currentLink == g else { return [] }
            let active = restoreList()
            for r in active { subscriptions[r.key]?.handles = nil }
            actions.append(.log("\(configuration.peer): Service Changed indicated; rediscovering"))
            actions.append(.rediscover(g, active))
        case .secured(let g, let outcome, let keep):
            if currentLink == nil || currentLink == g { linkSecurity = outcome.security }
            security = security.map { $0.followed(by: outcome) } ?? outcome
            if var kept = keep {
                kept.pairAgain = false
                if kept.level >= (securityWanted?.level ?? .none) { securityWanted = kept }
            }
        }
        return actions
    }

    // MARK: - Connecting

    private var connectTimeoutError: BLEError {
        .timeout(operation: "connect \(configuration.peer)", limit: configuration.connectTimeout)
    }

    private mutating func connect(_ id: WaiterID, _ actions: inout [Action]) {
        switch phase {
        case .ready(let g):
            actions.append(.resume(id, .success(g)))
        case .connecting, .reconnecting:
            // Joins the connection being made, within its own connect deadline.
            readyWaiters.append(id)
            connectWaits.insert(id)
            actions.append(.arm(.connectWait(id), configuration.connectTimeout))
        case .disconnected, .failed:
            readyWaiters.append(id)
            lastAttempt += 1
            phase = .connecting(Attempt(id: lastAttempt, stage: .connecting))
            startAttempt(&actions)
        }
    }

    /// The current attempt (first connect or reconnect) connects, within its deadline.
    private mutating func startAttempt(_ actions: inout [Action]) {
        guard var a = currentAttempt else { return }
        a.stage = .connecting
        a.link = nil
        setAttempt(a)
        publish(&actions)
        actions.append(.arm(.attempt(a.id), configuration.connectTimeout))
        actions.append(.connect(a.id, security: securityWanted ?? configuration.upgrade))
    }

    private mutating func linkUp(_ id: AttemptID, _ actions: inout [Action]) {
        guard var a = attempt(id), a.stage == .connecting, a.givenUp == nil else {
            // Nobody's link: the attempt was given up (or is long over).
            actions.append(.dropLink(id))
            if let a = attempt(id), a.stage == .connecting, let reason = a.givenUp { attemptFailed(reason, &actions) }
            return
        }
        lastGeneration += 1
        let g = lastGeneration
        a.link = g
        a.stage = .preparing
        setAttempt(a)
        linkSecurity = .none
        for key in order { subscriptions[key]?.handles = nil }
        actions.append(.adopt(id, g))
        publish(&actions)
        let secure = securityWanted.flatMap { $0.level > .none ? $0 : nil }
        actions.append(.prepare(id, g, security: secure))
    }

    private mutating func becomeReady(_ a: Attempt, _ actions: inout [Action]) {
        guard let g = a.link else { return }
        actions.append(.disarm(.attempt(a.id)))
        phase = .ready(g)
        publish(&actions)
        let waiters = readyWaiters
        readyWaiters = []
        for id in waiters { resumeWaiter(id, .success(g), &actions) }
    }

    /// The current attempt failed with `error`: the next attempt, or the session fails.
    private mutating func attemptFailed(_ error: BLEError, _ actions: inout [Action]) {
        switch phase {
        case .connecting:
            phase = .failed(error)
            publish(&actions)
            let waiters = readyWaiters
            readyWaiters = []
            for id in waiters { resumeWaiter(id, .failure(error), &actions) }
        case .reconnecting(let n, _):
            actions.append(.log("reconnect attempt \(n) to \(configuration.peer) failed: \(error)"))
            if n < maxAttempts {
                reconnect(attempt: n + 1, &actions)
            } else {
                fail(error, &actions)
            }
        case .disconnected, .failed, .ready:
            break
        }
    }

    private var maxAttempts: Int {
        if case .limited(let n, _) = configuration.reconnect { return n }
        return 0
    }

    /// Attempt `n` of a reconnect: its backoff, then the attempt.
    private mutating func reconnect(attempt n: Int, _ actions: inout [Action]) {
        lastAttempt += 1
        phase = .reconnecting(n, Attempt(id: lastAttempt, stage: .backoff))
        publish(&actions)
        let delay = configuration.reconnect.delay(before: n)
        if delay > .zero {
            actions.append(.arm(.backoff(lastAttempt), delay))
        } else {
            startAttempt(&actions)
        }
    }

    private mutating func linkLost(_ g: Generation, _ reason: DisconnectReason, _ actions: inout [Action]) {
        guard currentLink == g else { return }
        lastReason = reason
        let error = BLEError.disconnected(reason)
        if let a = currentAttempt {
            // Lost while an attempt was preparing or restoring it: the attempt failed (unless it was
            // already given up, and its link closed).
            guard a.givenUp == nil else { return }
            actions.append(.closeLink(g, error))
            giveUp(a, error, closing: false, &actions)
            return
        }
        actions.append(.closeLink(g, error))
        if maxAttempts > 0 {
            reconnect(attempt: 1, &actions)
        } else {
            phase = .disconnected
            publish(&actions)
            endSubscriptions(error, &actions)
        }
    }

    /// The attempt failed before its work ended: that work is cancelled (its link closed), and the
    /// attempt fails with `error` when it reports back.
    private mutating func giveUp(_ attempt: Attempt, _ error: BLEError, closing: Bool = true, _ actions: inout [Action]) {
        var a = attempt
        a.givenUp = error
        setAttempt(a)
        actions.append(.cancelAttempt(a.id))
        if error != connectTimeoutError { actions.append(.disarm(.attempt(a.id))) }
        if closing, let g = a.link { actions.append(.closeLink(g, .disconnected(.localHostTerminated))) }
    }

    private mutating func deadline(_ d: Deadline, _ actions: inout [Action]) {
        switch d {
        case .attempt(let id):
            guard let a = attempt(id), a.stage != .backoff, a.givenUp == nil else { return }
            giveUp(a, connectTimeoutError, &actions)
        case .backoff(let id):
            guard let a = attempt(id), a.stage == .backoff else { return }
            startAttempt(&actions)
        case .connectWait(let id):
            guard connectWaits.remove(id) != nil, let i = readyWaiters.firstIndex(of: id) else { return }
            readyWaiters.remove(at: i)
            actions.append(.resume(id, .failure(connectTimeoutError)))
        }
    }

    /// A manual disconnect: no reconnect follows; every wait ends with `disconnected`, streams end normally.
    private mutating func disconnect(_ actions: inout [Action]) {
        let reason = DisconnectReason.localHostTerminated
        let error = BLEError.disconnected(reason)
        if let a = currentAttempt {
            actions.append(.cancelAttempt(a.id))
            actions.append(.disarm(a.stage == .backoff ? .backoff(a.id) : .attempt(a.id)))
        }
        if let g = currentLink { actions.append(.closeLink(g, error)) }
        lastReason = reason
        phase = .disconnected
        publish(&actions)
        let waiters = readyWaiters
        readyWaiters = []
        for id in waiters { resumeWaiter(id, .failure(error), &actions) }
        endStreams(nil, failingJoinersWith: error, &actions)
    }

    /// Reconnect gave up (or is disabled): the session fails, with every wait and stream.
    private mutating func fail(_ error: BLEError, _ actions: inout [Action]) {
        phase = .failed(error)
        publish(&actions)
        endSubscriptions(error, &actions)
    }

    /// Every waiter fails with `error`; every subscription ends with it.
    private mutating func endSubscriptions(_ error: BLEError, _ actions: inout [Action]) {
        let waiters = readyWaiters
        readyWaiters = []
        for id in waiters { resumeWaiter(id, .failure(error), &actions) }
        endStreams(error, failingJoinersWith: error, &actions)
    }

    /// Every subscription ends: its streams (with `error`, or normally), the consumers waiting for its
    /// enable (with `joinerError`). An enabler still at work is answered when it reports.
    private mutating func endStreams(_ error: BLEError?, failingJoinersWith joinerError: BLEError, _ actions: inout [Action]) {
        let keys = order
        if !keys.isEmpty { actions.append(.endStreams(keys, error)) }
        for key in keys {
            for id in subscriptions[key]?.joiners ?? [] { actions.append(.resume(id, .failure(joinerError))) }
        }
        subscriptions = [:]
        order = []
    }

    /// Why a subscription that ended meanwhile is not there.
    private var endedError: BLEError {
        if case .failed(let e) = phase { return e }
        return .disconnected(lastReason ?? .bearerClosed)
    }

    private mutating func resumeWaiter(_ id: WaiterID, _ result: Result<Generation, BLEError>, _ actions: inout [Action]) {
        if connectWaits.remove(id) != nil { actions.append(.disarm(.connectWait(id))) }
        actions.append(.resume(id, result))
    }

    private mutating func cancelWait(_ id: WaiterID, _ actions: inout [Action]) {
        if let i = readyWaiters.firstIndex(of: id) {
            // The last one waiting for the first connect gave up: so does the attempt, and the caller is
            // answered when the attempt's work has ended (a reconnect goes on whoever waits).
            if readyWaiters.count == 1, case .connecting(let a) = phase {
                if a.givenUp == nil { giveUp(a, .cancelled, &actions) }
                return
            }
            readyWaiters.remove(at: i)
            resumeWaiter(id, .failure(.cancelled), &actions)
            return
        }
        for key in order {
            guard let i = subscriptions[key]?.joiners.firstIndex(of: id) else { continue }
            subscriptions[key]?.joiners.remove(at: i)
            actions.append(.resume(id, .failure(.cancelled)))
            return
        }
    }

    // MARK: - Subscriptions

    private mutating func subscribe(_ id: WaiterID, _ key: SubscriptionKey, indicate: Bool, on g: Generation,
                                    _ actions: inout [Action]) {
        guard case .ready(g) = phase else {
            actions.append(.resume(id, .failure(.disconnected(lastReason ?? .bearerClosed))))
            return
        }
        guard var sub = subscriptions[key] else {
            subscriptions[key] = Subscription(indicate: indicate, consumers: [id], enabler: id)
            order.append(key)
            actions.append(.enable(id, key, indicate: indicate, g))
            return
        }
        sub.consumers.append(id)
        if sub.active {
            actions.append(.resume(id, .success(g)))
        } else {
            // Another consumer is enabling it: wait for that.
            sub.joiners.append(id)
        }
        subscriptions[key] = sub
    }

    private mutating func leave(_ key: SubscriptionKey, _ id: WaiterID, _ actions: inout [Action]) {
        guard var sub = subscriptions[key], let i = sub.consumers.firstIndex(of: id) else { return }
        sub.consumers.remove(at: i)
        if let j = sub.joiners.firstIndex(of: id) {
            sub.joiners.remove(at: j)
            actions.append(.resume(id, .failure(.cancelled)))
        }
        guard sub.consumers.isEmpty else {
            subscriptions[key] = sub
            return
        }
        removeSubscription(key, &actions)
        if sub.active, case .ready(let g) = phase, let cccd = sub.handles?.cccd {
            actions.append(.disable(key, cccd: cccd, g))
        }
    }

    private mutating func removeSubscription(_ key: SubscriptionKey, _ actions: inout [Action]) {
        subscriptions[key] = nil
        order.removeAll { $0 == key }
        actions.append(.unbind(key))
    }

    /// The active subscriptions, in the order they were made.
    private func restoreList() -> [Restore] {
        order.compactMap { key in
            guard let sub = subscriptions[key], sub.active else { return nil }
            return Restore(key: key, indicate: sub.indicate)
        }
    }

    // MARK: - Security

    /// When `error` is a refusal for insufficient security and the session may upgrade: the request to
    /// secure the link with (once), after which the caller repeats its request. Insufficient Encryption
    /// asks for encryption; Insufficient Authentication for MITM protection (encryption first on a plain
    /// link when this side has no passkey or OOB data); Insufficient Encryption Key Size for a new
    /// pairing (a longer key).
    func upgrade(after error: BLEError) -> SecurityRequest? {
        guard case .att(let refusal) = error, let allowed = configuration.upgrade, currentLink != nil else { return nil }
        let level = linkSecurity.level
        var request = allowed
        switch refusal.code {
        case .insufficientEncryption:
            guard level == .none else { return nil }
            request.level = max(allowed.level, .encrypted)
        case .insufficientAuthentication:
            guard level < .authenticated else { return nil }
            request.level = level >= .encrypted || allowed.achievableLevel == .authenticated ? .authenticated : .encrypted
        case .insufficientEncryptionKeySize:
            request.level = max(level, allowed.level, .encrypted)
            request.pairAgain = true
        default:
            return nil
        }
        return request
    }

    // MARK: - Helpers

    private var currentAttempt: Attempt? {
        switch phase {
        case .connecting(let a), .reconnecting(_, let a): return a
        case .disconnected, .failed, .ready: return nil
        }
    }

    private func attempt(_ id: AttemptID) -> Attempt? {
        currentAttempt.flatMap { $0.id == id ? $0 : nil }
    }

    private func attempt(linkedTo g: Generation) -> Attempt? {
        currentAttempt.flatMap { $0.link == g ? $0 : nil }
    }

    private mutating func setAttempt(_ a: Attempt) {
        switch phase {
        case .connecting: phase = .connecting(a)
        case .reconnecting(let n, _): phase = .reconnecting(n, a)
        case .disconnected, .failed, .ready: break
        }
    }

    /// The state the phase shows.
    private var derivedState: ConnectionState {
        switch phase {
        case .disconnected: return .disconnected
        case .failed(let e): return .failed(e)
        case .ready: return .ready
        case .connecting(let a): return Self.state(of: a.stage, waiting: .connecting)
        case .reconnecting(let n, let a): return Self.state(of: a.stage, waiting: .reconnecting(attempt: n))
        }
    }

    private static func state(of stage: Stage, waiting: ConnectionState) -> ConnectionState {
        switch stage {
        case .backoff, .connecting: return waiting
        case .preparing: return .connected
        case .restoring: return .discovering
        }
    }

    private mutating func publish(_ actions: inout [Action]) {
        let s = derivedState
        guard s != published else { return }
        published = s
        actions.append(.publish(s))
    }
}
