/// What a run store shared by several stations offers the scheduler (a line database, docs/line.md):
/// a station claims a device before it connects to it, so that two stations never work one device,
/// and holds it under a lease that it renews while it works.
///
/// The scheduler uses it only when the store offers it (`RunStore.claims`, which a store shared by
/// stations answers with itself); a file journal does not,
/// and a run on one keeps scheduling the plan's devices in order. Everything else (the agents, the
/// intents before irreversible writes, the outcomes, the report) goes through `RunStore` as usual.
///
/// The contract:
/// - `claim` hands out devices no station holds and none has finished, each with its attempt number
///   (the lease's fencing token, counted over every station); a device is handed to one station only.
/// - A claimed device must be started or given back (`release`); a started one ends with an outcome
///   recorded through `RunStore.record`, which also gives up its lease.
/// - `keepLeases` renews this station's leases until `stopLeases`; a lease lost (the station was cut
///   off longer than the lease, and the device was swept or taken over) is reported to `lost`: the
///   device may be someone else's now, and no irreversible write of it will be recorded (the store
///   refuses its intent), so the scheduler cuts it.
public protocol DeviceClaims: Sendable {
    /// The run every station of the line works on (fixed before `open`, shared by the stations).
    var runID: String { get }
    /// How this station claims.
    var claimPolicy: ClaimPolicy { get }
    /// Claims up to `limit` devices, in one transaction: among `candidates` (ids, most wanted first), or
    /// when `candidates` is nil any unclaimed device of the run, in inventory order.
    func claim(among candidates: [String]?, limit: Int) async throws -> [DeviceClaim]
    /// Gives back devices this station claimed and did not start (best effort: an unreleased claim
    /// expires with its lease).
    func release(_ devices: [String]) async
    /// Where the shared run stands, over `devices` (nil: every device of the run).
    func progress(of devices: [String]?) async throws -> ClaimProgress
    /// Starts renewing this station's leases; `lost` hears of devices whose lease was lost.
    func keepLeases(lost: @escaping @Sendable ([String]) -> Void) async
    /// Stops renewing (the leases still held expire, or are given up by the outcomes recorded).
    func stopLeases() async
}

/// A device handed to this station.
public struct DeviceClaim: Sendable, Equatable {
    public var device: String
    /// How many times the device was claimed in this run, this claim included (by any station).
    public var attempt: Int
    /// A device under review claimed to be asked again: the irreversible step in doubt, by name (its
    /// `confirm` read comes before anything is sent, as on a resume of a journal).
    public var rechecking: String?

    public init(device: String, attempt: Int, rechecking: String? = nil) {
        self.device = device
        self.attempt = attempt
        self.rechecking = rechecking
    }
}

/// How many devices of a shared run a station may still get.
public struct ClaimProgress: Sendable, Equatable {
    /// Devices no station holds, which a station may claim.
    public var pending: Int
    /// Devices a station holds now (a lease that expires sends its device back to pending).
    public var claimed: Int
    /// Of those, devices this station holds whose outcomes have not reached the line yet (it was away):
    /// they are finished, or come back to pending, once it has written them.
    public var unwrittenHere: Int

    public init(pending: Int, claimed: Int, unwrittenHere: Int = 0) {
        self.pending = pending
        self.claimed = claimed
        self.unwrittenHere = unwrittenHere
    }

    /// Nothing left to claim now or later: every device is finished or needs review.
    public var isComplete: Bool { pending == 0 && claimed == 0 }
}

/// How a station claims devices on a line.
public struct ClaimPolicy: Sendable, Equatable {
    /// Claim only devices this station's adapters hear, best heard first (true, the default), or any
    /// unclaimed device in inventory order (for stations that reach every device).
    public var heardOnly: Bool
    /// Devices per claim at most (a claim is one round trip).
    public var batch: Int
    /// The wait before claiming again when nothing could be claimed; it doubles up to `maxRetry`.
    public var retry: Duration
    public var maxRetry: Duration
    /// A station that claimed nothing for this long, while devices it cannot get remain (unheard, or
    /// held by others), stops; nil: it stays until the run is complete or it is stopped.
    public var idleLimit: Duration?

    public init(heardOnly: Bool = true, batch: Int = 8, retry: Duration = .milliseconds(100), maxRetry: Duration = .seconds(1),
                idleLimit: Duration? = .seconds(60)) {
        self.heardOnly = heardOnly
        self.batch = max(1, batch)
        self.retry = retry
        self.maxRetry = max(retry, maxRetry)
        self.idleLimit = idleLimit
    }
}
