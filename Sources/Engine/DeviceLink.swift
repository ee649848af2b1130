import BLE

/// The live objects of one device's link, as the link steps leave them: the session, a link a scan
/// made for the connect step, and the subscriptions `await` steps read. What they mean (which adapter,
/// which slot) is the `LinkLease` in the device's machine; this only holds and closes them.
final class DeviceLink {
    var session: Session?
    /// A link a `scan` step made by connecting to a known address, for the `connect` step to take.
    var heldLink: (any Link)?
    /// Subscriptions by id, each buffering its values from the moment of subscribing.
    var subscriptions: [String: Mailbox] = [:]

    /// Closes everything (subscriptions, the held link, the session) and says what the session's links
    /// reached, how many ATT round trips they made, and what the last link got from the radio.
    func close() async -> (security: SecurityOutcome?, roundTrips: Int, link: LinkRecord?) {
        for (_, m) in subscriptions { await m.close() }
        subscriptions = [:]
        if let link = heldLink {
            heldLink = nil
            await link.disconnect()
        }
        guard let s = session else { return (nil, 0, nil) }
        session = nil
        let trips = await s.roundTrips
        let security = await s.security
        let link = await Self.linkRecord(s)
        await s.disconnect()
        return (security, trips, link)
    }

    /// What the session's link got from the radio, for the report.
    private static func linkRecord(_ s: Session) async -> LinkRecord? {
        guard let p = await s.linkParameters else { return nil }
        let mtu = await s.mtu
        return LinkRecord(phy: p.txPHY.rawValue, rxPhy: p.rxPHY == p.txPHY ? nil : p.rxPHY.rawValue, dataLength: p.txOctets,
                          intervalMs: p.interval.milliseconds.rounded(toPlaces: 3), latency: p.latency,
                          supervisionTimeoutMs: p.supervisionTimeout.milliseconds.rounded(toPlaces: 3), mtu: mtu)
    }

    /// True when the session's own reconnect gave up (there is one, and it failed or dropped).
    var isLost: Bool {
        get async {
            guard let s = session else { return false }
            switch await s.state {
            case .failed, .disconnected: return true
            default: return false
            }
        }
    }
}
