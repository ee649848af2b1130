/// What a session does after an unexpected link loss.
public enum ReconnectPolicy: Sendable, Equatable {
    /// The session ends (`disconnected`) and notification streams throw.
    case disabled
    /// Up to `maxAttempts` attempts; before attempt n the session waits `delays[n-1]` (the last delay
    /// repeats; an empty list means no delay). Never unbounded.
    case limited(maxAttempts: Int, delays: [Duration])

    /// The delay before attempt `attempt` (1-based).
    func delay(before attempt: Int) -> Duration {
        guard case .limited(_, let delays) = self, let last = delays.last else { return .zero }
        return attempt - 1 < delays.count ? delays[max(0, attempt - 1)] : last
    }
}

/// How a session connects, reconnects and discovers.
public struct SessionOptions: Sendable {
    /// Connection deadline and preferred ATT MTU.
    public var connect: ConnectOptions
    public var reconnect: ReconnectPolicy
    public var discovery: DiscoveryMode
    /// Accept notify/indicate/write on characteristics that do not declare it (firmware that lies).
    public var allowUnsupportedProperties: Bool
    /// The ATT transaction timeout (Vol 3 Part F 3.3.3).
    public var attTimeout: Duration
    /// Attribute layouts shared with the other sessions of a run (nil: every link discovers for itself).
    /// See `GATTCache` and docs/ble.md.
    public var gattCache: GATTCache?
    /// What kind of device this is (e.g. its model), for the cache's hints about servers without a
    /// Database Hash. Never used to pick a handle.
    public var gattCacheKey: String
    /// Diagnostics: dropped or stray PDUs, failed reconnect attempts, failed unsubscribes. Nil: silent.
    public var log: (@Sendable (String) -> Void)?
    /// The security every link of the session gets before it is `ready` (the first, and each
    /// reconnect's): a stored bond, else pairing. Nil: links are not secured unless `secure` is called.
    public var security: SecurityRequest?
    /// What a request refused for insufficient authentication, encryption or key size may do: secure
    /// the link once with this (its level raised to what the refusal asks) and repeat the request.
    /// Nil: never — a refusal fails the operation.
    public var upgrade: SecurityRequest?

    public init(connect: ConnectOptions = ConnectOptions(),
                reconnect: ReconnectPolicy = .limited(maxAttempts: 3, delays: [.seconds(1), .seconds(2), .seconds(5)]),
                discovery: DiscoveryMode = .targeted,
                allowUnsupportedProperties: Bool = false,
                attTimeout: Duration = .seconds(30),
                gattCache: GATTCache? = nil,
                gattCacheKey: String = "",
                log: (@Sendable (String) -> Void)? = nil,
                security: SecurityRequest? = nil,
                upgrade: SecurityRequest? = nil) {
        self.connect = connect
        self.reconnect = reconnect
        self.discovery = discovery
        self.allowUnsupportedProperties = allowUnsupportedProperties
        self.attTimeout = attTimeout
        self.gattCache = gattCache
        self.gattCacheKey = gattCacheKey
        self.log = log
        self.security = security
        self.upgrade = upgrade
    }
}

/// Where a session is. Published in order by `Session.connectionStates()`.
public enum ConnectionState: Sendable, Equatable, CustomStringConvertible {
    case disconnected
    case connecting
    case connected
    case discovering
    case ready
    case reconnecting(attempt: Int)
    case failed(BLEError)

    public var description: String {
        switch self {
        case .disconnected: return "disconnected"
        case .connecting: return "connecting"
        case .connected: return "connected"
        case .discovering: return "discovering"
        case .ready: return "ready"
        case .reconnecting(let n): return "reconnecting(attempt: \(n))"
        case .failed(let e): return "failed(\(e))"
        }
    }
}
