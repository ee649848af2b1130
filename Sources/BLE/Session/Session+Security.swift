/// Securing the session's links: on request (`secure`), before `ready` on every new link (the level the
/// machine keeps), and once after a refusal for insufficient security (`SessionMachine.upgrade(after:)`).
extension Session {
    /// Secures the ready link as `request` asks (a stored bond, else pairing; see `Link.secure`) within
    /// `timeout`, and keeps the request for every later link (reconnects are secured before `ready`).
    /// Throws `BLEError.security` when pairing or encryption fails; after a Security Manager timeout the
    /// link is dropped (no pairing on it until it is reconnected, Vol 3 Part H 3.4).
    public func secure(_ request: SecurityRequest, timeout: Duration) async throws -> SecurityOutcome {
        try await withDeadline(timeout, operation: "secure \(peer) (\(request.level))") {
            let (g, _) = try await self.readyClient()
            return try await self.secureLink(g, request, keep: request)
        }
    }

    /// One link secured: a device that lost its bond is paired again when the request says so; a
    /// Security Manager timeout drops the link. `keep`: later links get at least this.
    func secureLink(_ g: Generation, _ request: SecurityRequest, keep: SecurityRequest?) async throws -> SecurityOutcome {
        guard let target = links[g]?.link else { throw BLEError.disconnected(machine.lastReason ?? .localHostTerminated) }
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
        await feed(.secured(g, outcome, keep: keep))
        return outcome
    }

    /// When the machine says `error` may upgrade the link, secures it once as the refusal asks and
    /// returns true: the caller repeats its request.
    func upgrade(after error: BLEError) async throws -> Bool {
        guard let request = machine.upgrade(after: error), let g = machine.currentLink else { return false }
        guard case .att(let refusal) = error else { return false }
        log("\(peer): \(refusal.code.name); securing the link (\(request.level)) and repeating the request")
        _ = try await secureLink(g, request, keep: request)
        return true
    }

    /// Runs `body`, and once more after an upgrade when it was refused for insufficient security.
    func upgrading<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let e as BLEError {
            guard try await upgrade(after: e) else { throw e }
            return try await body()
        }
    }
}
