import BLE
import Workflow

extension RunScheduler {
    /// What wakes the claiming loop: a device ended, or it is time to try claiming again.
    private enum Wake: Sendable {
        case finished(String, DeviceRecord?)
        case tick
    }

    /// Scheduling on a line (a store shared by several stations, `DeviceClaims`): whenever slots are
    /// free, claim up to that many devices — among those this station's adapters hear, best first, or
    /// any unclaimed one of the run — and start them at once; nothing is claimed ahead of a free slot,
    /// so a stop has nothing to give back. When nothing can be claimed, try again after a short wait
    /// (doubling up to the policy's limit). The station ends when its devices are all finished or under
    /// review on the line, when it could claim nothing for the policy's idle limit, or when it is
    /// stopped; a lease lost while a device is in flight cuts that device (its intent would be refused:
    /// no irreversible write goes out for it).
    ///
    /// - Parameters:
    ///   - selection: the devices this station may work (its `--limit`, else the inventory).
    ///   - whole: the selection is the whole inventory (the line may then pick any unclaimed device).
    func runClaiming(_ selection: [InventoryDevice], claims: any DeviceClaims, whole: Bool) async -> Result {
        let policy = claims.claimPolicy
        let context = self.context
        let stopper = self.stopper
        var result = Result()
        var tally = Tally(threshold: maxFailures, maxConsecutive: maxConsecutiveFailures)
        let byID = Dictionary(selection.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let hearing = policy.heardOnly ? Hearing(selection) : nil
        let ids = selection.map(\.id)
        // Devices this station finished (succeeded or failed): final on the line, never asked for again.
        var final = Set<String>()
        let clock = ContinuousClock()
        var lastClaim = clock.now
        var retry = policy.retry
        var unreachable = false
        var done = false

        await claims.keepLeases { lost in
            for id in lost where stopper.isInFlight(id) {
                let reason = "cut: this station lost its lease on the device (it was out of touch with the line longer than the lease); another station may work it now"
                context.noteCut(id, reason)
                context.events.emit(RunEvent(.leaseLost, device: id, message: reason))
                stopper.cut(id)
            }
        }

        await withTaskGroup(of: Wake.self) { group in
            var running = 0
            var ticking = false
            while true {
                var claimedAll = false
                if !done, !stopper.isStopping, running < concurrency {
                    let limit = min(concurrency - running, policy.batch)
                    let candidates: [String]?
                    if let hearing {
                        candidates = await context.adapters.heard(hearing).filter { !final.contains($0) }
                    } else {
                        candidates = whole ? nil : ids.filter { !final.contains($0) }
                    }
                    do {
                        let got = candidates?.isEmpty == true ? [] : try await claims.claim(among: candidates, limit: limit)
                        if unreachable {
                            unreachable = false
                            // Idle time counts while the line is reachable.
                            lastClaim = clock.now
                            context.events.emit(RunEvent(.storeAvailable, message: "the line is reachable again: claiming goes on"))
                        }
                        if stopper.isStopping {
                            // A stop came while the claim was on its way: give the devices back.
                            await claims.release(got.map(\.device))
                        } else {
                            var unknown: [String] = []
                            for claim in got {
                                guard let device = byID[claim.device] else {
                                    unknown.append(claim.device)
                                    continue
                                }
                                let task = launch(device, attempt: claim.attempt, resumed: claim.attempt > 1)
                                result.started.append(device.id)
                                group.addTask { .finished(device.id, await task.value) }
                                running += 1
                            }
                            if !unknown.isEmpty { await claims.release(unknown) }
                        }
                        if !got.isEmpty {
                            lastClaim = clock.now
                            retry = policy.retry
                            claimedAll = got.count == limit
                        } else if running == 0 {
                            switch try await ending(claims, selection: whole ? nil : ids, idleFor: clock.now - lastClaim, policy: policy) {
                            case .waitForOwnOutcomes:
                                // Devices of this station come back (or finish) once the line has its outcomes.
                                lastClaim = clock.now
                            case .goOn: break
                            case .complete: done = true
                            case .idle(let why):
                                done = true
                                result.note = why
                            }
                        }
                    } catch {
                        if !unreachable {
                            unreachable = true
                            context.events.emit(RunEvent(.storeUnavailable, message: "cannot claim devices (\(error)); no new devices until the line is reachable again"))
                        }
                        if running == 0, let limit = policy.idleLimit, clock.now - lastClaim >= limit {
                            done = true
                            result.note = "stopped claiming: the line was unreachable for \(limit)"
                        }
                    }
                }
                if running == 0, done || stopper.isStopping { break }
                // More may be claimable at once (the claim was full); else wait for a device to end or a tick.
                if claimedAll, running < concurrency { continue }
                if !ticking, !done, !stopper.isStopping, running < concurrency {
                    let wait = retry
                    group.addTask {
                        try? await Task.sleep(for: wait)
                        return .tick
                    }
                    ticking = true
                    retry = min(retry * 2, policy.maxRetry)
                }
                guard let wake = await group.next() else { break }
                switch wake {
                case .tick:
                    ticking = false
                case .finished(let id, let record):
                    running -= 1
                    if let record, record.outcome == .succeeded || record.outcome == .failed { final.insert(id) }
                    finished(id, record, &result, &tally, waiting: !done)
                }
            }
        }
        await claims.stopLeases()
        return result
    }

    private enum Ending {
        case goOn
        /// This station's own outcomes are not on the line yet: wait for them before judging.
        case waitForOwnOutcomes
        /// Every device of the selection is finished or under review on the line.
        case complete
        /// Nothing could be claimed for the idle limit; why, in words.
        case idle(String)
    }

    /// Whether the station ends now that it holds nothing and could claim nothing.
    private func ending(_ claims: any DeviceClaims, selection: [String]?, idleFor: Duration, policy: ClaimPolicy) async throws -> Ending {
        let progress = try await claims.progress(of: selection)
        if progress.isComplete { return .complete }
        if progress.unwrittenHere > 0 { return .waitForOwnOutcomes }
        guard let limit = policy.idleLimit, idleFor >= limit else { return .goOn }
        return .idle("stopped claiming: nothing this station could claim for \(limit) (\(progress.pending) device(s) pending that it cannot get"
            + ", \(progress.claimed) held by other stations)")
    }
}

/// The selection's devices by what an advertisement shows of them: address, else name.
struct Hearing: Sendable {
    let byAddress: [UInt64: String]
    let byName: [String: String]

    init(_ devices: [InventoryDevice]) {
        var byAddress: [UInt64: String] = [:]
        var byName: [String: String] = [:]
        for d in devices {
            if let a = d.address {
                byAddress[a.value] = byAddress[a.value] ?? d.id
            } else if let n = d.name {
                byName[n] = byName[n] ?? d.id
            }
        }
        self.byAddress = byAddress
        self.byName = byName
    }

    /// The device an advertisement comes from, if it is one of the selection.
    func device(of ad: Advertisement) -> String? {
        if let id = byAddress[ad.address.value] { return id }
        if let name = ad.name { return byName[name] }
        return nil
    }
}
