/// How a station works a line (a store shared by several stations, `DeviceClaims`), as a value:
/// when to claim, how many, among which devices, when to try again, and when to stop. It has no
/// clock, no database and no task: the scheduler tells it what happened (`handle(_:at:stopping:)`,
/// with times as offsets from the loop's start and whether the run is stopping) and carries out
/// what it answers. Tested event by event in `ClaimLoopTests`.
///
/// The policy:
/// - Whenever slots are free, claim up to that many devices (at most `batch` at a time) — among
///   those this station's adapters hear, best heard first (`heardOnly`), else among the selection's
///   devices not finished here, or any unclaimed device of the run when the selection is the whole
///   inventory. Nothing is claimed ahead of a free slot, so a stop has nothing to give back.
/// - Devices claimed while the run began stopping, or that are not in this station's selection, are
///   given back at once.
/// - A full claim is followed by another at once while slots are free; otherwise the loop waits for
///   a device to end or for a tick, `retry` after the last attempt, doubling up to `maxRetry` (back
///   to `retry` after a successful claim).
/// - With nothing running and nothing claimed, the line's progress decides: every device finished or
///   under review → done; this station's own outcomes not on the line yet → wait for them (the idle
///   time starts again); nothing claimable for `idleLimit` → done, and why.
/// - A line that cannot be reached: said once (`store_unavailable`), and again when it is back
///   (`store_available`, the idle time starts again); unreachable for `idleLimit` with nothing
///   running → done.
/// - The loop ends when nothing runs and it is done or the run is stopping.
struct ClaimLoop: Sendable {
    enum Event: Sendable, Equatable {
        /// The loop starts.
        case begin
        /// The selection's devices the adapters heard lately, best first.
        case heard([String])
        /// A claim came back.
        case claimed([DeviceClaim])
        /// The line answered where the run stands.
        case progress(ClaimProgress)
        /// A claim (or the progress question) failed: the line cannot be reached.
        case unreachable(String)
        /// A device this station ran ended (`outcome` nil: it never started).
        case finished(String, outcome: DeviceOutcome?)
        /// The wait before trying again is over.
        case tick
    }

    enum Action: Sendable, Equatable {
        /// Ask the adapters which of the selection's devices they heard (answer `heard`).
        case hear
        /// Claim up to `limit` devices among `candidates` (nil: any of the run); answer `claimed` or `unreachable`.
        case claim(among: [String]?, limit: Int)
        /// Start the device.
        case launch(DeviceClaim)
        /// Give devices back (claimed while stopping, or not this station's).
        case release([String])
        /// Ask the line where the run stands over `selection` (nil: the whole run); answer `progress` or `unreachable`.
        case askProgress(selection: [String]?)
        case emit(RunEvent.Kind)
        /// Report `tick` after `delay`.
        case tick(after: Duration)
        /// Wait for a device to end or a tick.
        case waitForWake
        /// The loop is over (`note`: why it stopped claiming by itself, if it did).
        case finish(note: String?)
    }

    let policy: ClaimPolicy
    let concurrency: Int
    /// The selection's device ids, in order.
    let selection: [String]
    private let known: Set<String>
    /// The selection is the whole inventory: the line may hand out any unclaimed device.
    let whole: Bool

    private(set) var running = 0
    /// Devices this station finished (succeeded or failed): final on the line, never asked for again.
    private(set) var final: Set<String> = []
    /// The loop decided to end (complete or idle).
    private(set) var done = false
    private(set) var note: String?
    private var lastClaim: Duration = .zero
    private var retry: Duration
    private var unreachable = false
    private var ticking = false
    /// The size of the claim on its way.
    private var limit = 0

    init(policy: ClaimPolicy, concurrency: Int, selection: [String], whole: Bool) {
        self.policy = policy
        self.concurrency = max(1, concurrency)
        self.selection = selection
        self.known = Set(selection)
        self.whole = whole
        retry = policy.retry
    }

    mutating func handle(_ event: Event, at now: Duration, stopping: Bool) -> [Action] {
        switch event {
        case .begin:
            lastClaim = now
            return top(now, stopping)
        case .heard(let ids):
            return claim(among: ids.filter { !final.contains($0) }, now, stopping)
        case .claimed(let got):
            return claimed(got, now, stopping)
        case .progress(let p):
            if p.isComplete {
                done = true
            } else if p.unwrittenHere > 0 {
                // Devices of this station come back (or finish) once the line has its outcomes.
                lastClaim = now
            } else if let idle = policy.idleLimit, now - lastClaim >= idle {
                done = true
                note = "stopped claiming: nothing this station could claim for \(idle) (\(p.pending) device(s) pending that it cannot get"
                    + ", \(p.claimed) held by other stations)"
            }
            return bottom(claimedAll: false, now, stopping)
        case .unreachable(let error):
            var out: [Action] = []
            if !unreachable {
                unreachable = true
                out.append(.emit(.storeUnavailable(message: "cannot claim devices (\(error)); no new devices until the line is reachable again")))
            }
            if running == 0, let idle = policy.idleLimit, now - lastClaim >= idle {
                done = true
                note = "stopped claiming: the line was unreachable for \(idle)"
            }
            return out + bottom(claimedAll: false, now, stopping)
        case .finished(let id, let outcome):
            running -= 1
            if outcome == .succeeded || outcome == .failed { final.insert(id) }
            return top(now, stopping)
        case .tick:
            ticking = false
            return top(now, stopping)
        }
    }

    /// The top of the loop: claim when a slot is free.
    private mutating func top(_ now: Duration, _ stopping: Bool) -> [Action] {
        guard !done, !stopping, running < concurrency else { return bottom(claimedAll: false, now, stopping) }
        limit = min(concurrency - running, policy.batch)
        if policy.heardOnly { return [.hear] }
        return claim(among: whole ? nil : selection.filter { !final.contains($0) }, now, stopping)
    }

    private mutating func claim(among candidates: [String]?, _ now: Duration, _ stopping: Bool) -> [Action] {
        // Nothing to ask for: as if the line handed out nothing.
        if candidates?.isEmpty == true { return claimed([], now, stopping) }
        return [.claim(among: candidates, limit: limit)]
    }

    private mutating func claimed(_ got: [DeviceClaim], _ now: Duration, _ stopping: Bool) -> [Action] {
        var out: [Action] = []
        if unreachable {
            unreachable = false
            // Idle time counts while the line is reachable.
            lastClaim = now
            out.append(.emit(.storeAvailable(message: "the line is reachable again: claiming goes on")))
        }
        if stopping {
            // A stop came while the claim was on its way: give the devices back.
            if !got.isEmpty { out.append(.release(got.map(\.device))) }
        } else {
            var unknown: [String] = []
            for c in got {
                guard known.contains(c.device) else {
                    unknown.append(c.device)
                    continue
                }
                out.append(.launch(c))
                running += 1
            }
            if !unknown.isEmpty { out.append(.release(unknown)) }
        }
        if !got.isEmpty {
            lastClaim = now
            retry = policy.retry
            return out + bottom(claimedAll: got.count == limit, now, stopping)
        }
        if running == 0 { return out + [.askProgress(selection: whole ? nil : selection)] }
        return out + bottom(claimedAll: false, now, stopping)
    }

    /// The bottom of the loop: end, claim again at once, or wait (with a tick when claiming can go on).
    private mutating func bottom(claimedAll: Bool, _ now: Duration, _ stopping: Bool) -> [Action] {
        if running == 0, done || stopping { return [.finish(note: note)] }
        // More may be claimable at once (the claim was full).
        if claimedAll, running < concurrency { return top(now, stopping) }
        var out: [Action] = []
        if !ticking, !done, !stopping, running < concurrency {
            out.append(.tick(after: retry))
            ticking = true
            retry = min(retry * 2, policy.maxRetry)
        }
        out.append(.waitForWake)
        return out
    }
}
