import AsyncSupport
import BLE
import Workflow

extension RunScheduler {
    /// Scheduling on a line (a store shared by several stations, `DeviceClaims`): the `ClaimLoop`
    /// decides when to claim, how many and when to stop; this carries it out — asks the adapters what
    /// they hear, claims, starts each claimed device in its one task (its record comes back through the
    /// same queue as the ticks), gives devices back, asks the line's progress. A lease lost while a
    /// device is in flight cuts that device (its intent would be refused: no irreversible write goes
    /// out for it).
    ///
    /// - Parameters:
    ///   - selection: the devices this station may work (its `--limit`, else the inventory).
    ///   - whole: the selection is the whole inventory (the line may then pick any unclaimed device).
    func runClaiming(_ selection: [InventoryDevice], claims: any DeviceClaims, whole: Bool) async -> Result {
        let context = self.context
        let stopper = self.stopper
        var result = Result()
        var tally = Tally(threshold: maxFailures, maxConsecutive: maxConsecutiveFailures)
        let byID = Dictionary(selection.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let hearing = claims.claimPolicy.heardOnly ? Hearing(selection) : nil
        var loop = ClaimLoop(policy: claims.claimPolicy, concurrency: concurrency, selection: selection.map(\.id), whole: whole)
        let wakes = Wakes()
        let clock = ContinuousClock()
        let start = clock.now
        var tick: Timeouts.Token?

        await claims.keepLeases { lost in
            for id in lost where stopper.isInFlight(id) {
                let reason = "cut: this station lost its lease on the device (it was out of touch with the line longer than the lease); another station may work it now"
                context.noteCut(id, reason)
                context.events.emit(.leaseLost(device: id, message: reason))
                stopper.cut(id)
            }
        }

        var pending = loop.handle(.begin, at: .zero, stopping: stopper.isStopping)
        var next = 0
        func feed(_ event: ClaimLoop.Event) {
            pending += loop.handle(event, at: clock.now - start, stopping: stopper.isStopping)
        }
        actions: while next < pending.count {
            let action = pending[next]
            next += 1
            switch action {
            case .hear:
                feed(.heard(await context.adapters.heard(hearing ?? Hearing(selection))))
            case .claim(let candidates, let limit):
                do {
                    feed(.claimed(try await claims.claim(among: candidates, limit: limit)))
                } catch {
                    feed(.unreachable("\(error)"))
                }
            case .launch(let claim):
                guard let device = byID[claim.device] else { continue }
                // A device under review asked again: its step in doubt's confirm read comes first.
                let reconcile = claim.rechecking.flatMap(context.workflow.confirmableStep(named:))
                launch(device, attempt: claim.attempt, resumed: claim.attempt > 1, reconcile: reconcile, reportingTo: wakes)
            case .release(let ids):
                await claims.release(ids)
            case .askProgress(let ids):
                do {
                    feed(.progress(try await claims.progress(of: ids)))
                } catch {
                    feed(.unreachable("\(error)"))
                }
            case .emit(let kind):
                context.events.emit(kind)
            case .tick(let delay):
                tick = Timeouts.shared.schedule(after: delay) { wakes.tick() }
            case .waitForWake:
                switch await wakes.next() {
                case .tick:
                    feed(.tick)
                case .finished(let id, let record):
                    // Stopping the line only means something while devices may still be claimed.
                    finished(id, record, &tally, waiting: !loop.done)
                    feed(.finished(id, outcome: record?.outcome))
                }
            case .finish(let note):
                result.note = note
                break actions
            }
        }
        if let tick { Timeouts.shared.cancel(tick) }
        await claims.stopLeases()
        return result
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
