import AsyncSupport
import BLE
import BLESecurity
import Digests

// The executor's side of link security: each link's Security Manager is attached when the link comes
// up (the stored bond looked up under the station's identity address), callers' `secure` requests
// wait here, and new bonds go to the bond store before the caller hears "bond made". The decisions are
// `HCISecurity`'s (inside `HCIHost`).

/// Callers waiting for a link's security, what each pending connect asked for, and the resolvable
/// private addresses bonded devices were last heard at.
struct SecurityWaiters {
    /// Callers of `secure`; a ticket's id is the request id the host knows.
    let queue = WaiterQueue<Void, Result<SecurityOutcome, any Error>>()
    /// The link of each waiting request.
    var waiting: [UInt64: UInt64] = [:]
    /// Per connect request: the security the session will ask for (`ConnectOptions.security`).
    var connects: [UInt64: SecurityRequest?] = [:]
    /// Per identity address: the resolvable private address last heard from it, and when.
    var heard: [UInt64: (address: BluetoothAddress, at: ContinuousClock.Instant)] = [:]
}

extension HCIAdapter {
    /// A station identity derived from a controller's BD_ADDR: a static random address (Vol 6 Part B
    /// 1.3.2.1), so that the same controller is the same station on every run (devices keep their bonds
    /// under it). Nil when the controller reports no BD_ADDR (all zeros): see `StationIdentity.choose`.
    public static func stationAddress(for bdAddress: BluetoothAddress) -> BluetoothAddress? {
        StationIdentity.derived(from: bdAddress)
    }


    /// Gives a new link its Security Manager: this station's address, the peer's, the bond kept for the
    /// peer (by identity, or by a stored IRK for a resolvable private address), and the policy that
    /// follows from what its session will ask.
    func attachSecurity(_ link: HCILink, asked request: SecurityRequest??) {
        guard let own = info?.ownAddress else { return }
        let bond = options.bonds?.resolve(station: own, address: link.peer)
        var configuration = SMPCentralConfiguration(localAddress: own, peerAddress: link.peer, request: request ?? nil, storedBond: bond)
        // A controller that gave its identity root (Zephyr) gives the station an IRK that is the same on
        // every run: hand it over with the identity address when bonding.
        if let irk = info?.identity.irk { configuration.localIdentity = SMPLocalIdentity(irk: irk, address: own) }
        feed(.attachSecurity(link.linkID, configuration))
    }

    /// Secures a link (see `HCILink.secure`).
    func secure(linkID: UInt64, request: SecurityRequest) async throws -> SecurityOutcome {
        if let failure = failureReason { throw failure }
        guard let link = links[linkID] else { throw BLEError.disconnected(.remoteUserTerminated) }
        if let reason = link.disconnectReason { throw BLEError.disconnected(reason) }
        if Task.isCancelled { throw BLEError.cancelled }
        let ticket = security.queue.enqueue()
        security.waiting[ticket.id] = linkID
        feed(.secure(linkID, ticket.id, request))
        switch await security.queue.wait(ticket) {
        case .granted(let result):
            return try result.get()
        case .cancelled, .timedOut:
            if security.waiting.removeValue(forKey: ticket.id) != nil { feed(.cancelSecure(linkID, ticket.id)) }
            throw BLEError.cancelled
        }
    }

    /// Ends the wait of request `id` (if it still waits) with `result`.
    private func answerSecure(_ id: UInt64, _ result: Result<SecurityOutcome, any Error>) {
        security.queue.withLock { _, w in _ = w.resume(WaitTicket(id: id), result) }
    }

    /// A procedure ended well: a new bond is stored first (the caller hears "bond made" once it is on
    /// disk), then the caller resumes.
    func securityCompleted(_ linkID: UInt64, _ request: UInt64?, _ outcome: SMPOutcome) {
        let waiter = request.flatMap { security.waiting.removeValue(forKey: $0) != nil ? $0 : nil }
        guard let bond = outcome.bond, let store = options.bonds, let own = info?.ownAddress else {
            if let waiter { answerSecure(waiter, .success(outcome.securityOutcome)) }
            return
        }
        let adapterID = id
        let log = options.log
        let queue = security.queue
        Task {
            let result: Result<SecurityOutcome, any Error>
            do {
                try await store.save(bond, station: own)
                result = .success(outcome.securityOutcome)
            } catch {
                log("\(adapterID): \(bond) could not be stored: \(error)")
                result = .failure(BLEError.adapterFailure("the new bond could not be stored: \(error)"))
            }
            if let waiter { queue.withLock { _, w in _ = w.resume(WaitTicket(id: waiter), result) } }
        }
    }

    func securityFailed(_ linkID: UInt64, _ request: UInt64?, _ failure: SMPFailure) {
        if request == nil { options.log("\(id): link \(linkID): \(failure)") }
        guard let id = request, security.waiting.removeValue(forKey: id) != nil else { return }
        answerSecure(id, .failure(BLEError.security(failure.securityFailure)))
    }

    /// Fails the waiters of one link (nil: of every link).
    func failSecureWaiters(of linkID: UInt64?, _ error: any Error) {
        for (id, link) in security.waiting where linkID == nil || link == linkID {
            security.waiting[id] = nil
            answerSecure(id, .failure(error))
        }
    }
}

// MARK: - Resolvable private addresses

extension HCIAdapter {
    /// How long a resolvable private address heard from a device is taken as its current one (devices
    /// change it every few minutes; Vol 3 Part C 10.7.2 suggests 15).
    static let privateAddressFreshness: Duration = .seconds(60)

    /// The identity behind a resolvable private address, when a stored bond's IRK resolves it (the bond
    /// store caches the answer); remembered as the device's current address for connecting.
    func identity(of address: BluetoothAddress) -> BluetoothAddress? {
        guard address.isResolvablePrivate, let own = info?.ownAddress,
              let bond = options.bonds?.resolve(station: own, address: address) else { return nil }
        security.heard[bond.peer.value] = (address, .now)
        return bond.peer
    }

    /// The address to initiate a connection to for `peer`, and what is left of `timeout`: for a bonded
    /// device that uses privacy (it bonded from a resolvable private address, and handed over its IRK),
    /// the private address it advertises with now — heard recently, or listened for until it advertises
    /// (its identity address, if that is what it uses then) — else `peer` itself. The controller's
    /// resolving list is not used: the host resolves, so the Filter Accept List and the connection
    /// machines see plain addresses.
    func connectionTarget(for peer: BluetoothAddress, within timeout: Duration) async -> (BluetoothAddress, Duration) {
        guard !peer.isResolvablePrivate, let own = info?.ownAddress,
              let bond = options.bonds?.bond(station: own, peer: peer), bond.usesPrivateAddress, bond.peerIRK != nil else {
            return (peer, timeout)
        }
        if let heard = security.heard[peer.value], ContinuousClock.now - heard.at < Self.privateAddressFreshness {
            return (heard.address, timeout)
        }
        let start = ContinuousClock.now
        let stream = scan(ScanFilter(addresses: [peer], allowDuplicates: false))
        let found = try? await withDeadline(timeout, operation: "hearing \(peer) advertise") {
            for try await ad in stream where ad.isFrom(peer) { return ad.address }
            return nil as BluetoothAddress?
        }
        let left = max(.zero, timeout - (ContinuousClock.now - start))
        if let address = found ?? nil {
            if address != peer { options.log("\(id): \(peer) advertises as \(address) (resolved with its IRK); connecting there") }
            return (address, left)
        }
        return (peer, left)
    }
}
