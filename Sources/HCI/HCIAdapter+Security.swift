import BLE
import BLESecurity

// The executor's side of link security: each link's Security Manager is attached when the link comes
// up (the stored bond looked up under the station's identity address), callers' `secure` requests
// wait here, and new bonds go to the bond store before the caller hears "bond made". The decisions are
// `HCISecurity`'s (inside `HCIHost`).

/// Callers waiting for a link's security, what each pending connect asked for, and the resolvable
/// private addresses bonded devices were last heard at.
struct SecurityWaiters {
    var waiting: [UInt64: (link: UInt64, continuation: CheckedContinuation<SecurityOutcome, any Error>)] = [:]
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
        let id = makeToken()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<SecurityOutcome, any Error>) in
                if Task.isCancelled {
                    c.resume(throwing: BLEError.cancelled)
                    return
                }
                security.waiting[id] = (linkID, c)
                feed(.secure(linkID, id, request))
            }
        } onCancel: {
            Task { await self.cancelSecure(linkID: linkID, id: id) }
        }
    }

    private func cancelSecure(linkID: UInt64, id: UInt64) {
        guard let waiter = security.waiting.removeValue(forKey: id) else { return }
        feed(.cancelSecure(linkID, id))
        waiter.continuation.resume(throwing: BLEError.cancelled)
    }

    /// A procedure ended well: a new bond is stored first (the caller hears "bond made" once it is on
    /// disk), then the caller resumes.
    func securityCompleted(_ linkID: UInt64, _ request: UInt64?, _ outcome: SMPOutcome) {
        let waiter = request.flatMap { security.waiting.removeValue(forKey: $0) }
        guard let bond = outcome.bond, let store = options.bonds, let own = info?.ownAddress else {
            waiter?.continuation.resume(returning: outcome.securityOutcome)
            return
        }
        let adapterID = id
        let log = options.log
        Task {
            do {
                try await store.save(bond, station: own)
                waiter?.continuation.resume(returning: outcome.securityOutcome)
            } catch {
                log("\(adapterID): \(bond) could not be stored: \(error)")
                waiter?.continuation.resume(throwing: BLEError.adapterFailure("the new bond could not be stored: \(error)"))
            }
        }
    }

    func securityFailed(_ linkID: UInt64, _ request: UInt64?, _ failure: SMPFailure) {
        if request == nil { options.log("\(id): link \(linkID): \(failure)") }
        guard let id = request, let waiter = security.waiting.removeValue(forKey: id) else { return }
        waiter.continuation.resume(throwing: BLEError.security(failure.securityFailure))
    }

    /// Fails the waiters of one link (nil: of every link).
    func failSecureWaiters(of linkID: UInt64?, _ error: any Error) {
        for (id, waiter) in security.waiting where linkID == nil || waiter.link == linkID {
            security.waiting[id] = nil
            waiter.continuation.resume(throwing: error)
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
