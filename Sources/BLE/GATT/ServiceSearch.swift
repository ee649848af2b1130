/// How a client looks for a primary service by UUID (Vol 3 Part G 4.4), as a value that picks the next
/// request from the outcome of the last one, so the order is tested without a bearer.
///
/// A UUID with a 16-bit form is asked for with Find By Type Value in that form, then in its 128-bit form
/// (a server may declare a SIG UUID either way, and most servers compare the value bytes as sent), then by
/// discovering every primary service, whose UUIDs are compared in 128-bit form; only then is it absent.
/// A 128-bit UUID skips the 16-bit step. A server that answers Find By Type Value with Request Not
/// Supported goes straight to full discovery, and so does `.all` mode.
///
/// `longFormFirst` (learned from an earlier device of the same kind) tries the 128-bit form before the
/// 16-bit one; `findByValueUnsupported` (likewise learned) skips Find By Type Value. Both only reorder or
/// shorten the same search: a wrong hint costs a round trip, never a wrong answer.
struct ServiceSearch: Sendable, Equatable {
    /// A request to send.
    enum Request: Sendable, Equatable {
        /// Find By Type Value on «Primary Service» with these value bytes (the UUID as declared).
        case findByValue([UInt8])
        /// Read By Group Type over every primary service.
        case discoverAll
    }

    /// What the last request found.
    enum Outcome: Sendable, Equatable {
        case found
        case notFound
        /// Find By Type Value answered Request Not Supported.
        case notSupported
    }

    private var plan: [Request]
    private var position = 0

    init(uuid: BluetoothUUID, mode: DiscoveryMode = .targeted, longFormFirst: Bool = false,
         findByValueUnsupported: Bool = false) {
        var byValue: [Request] = []
        if mode == .targeted && !findByValueUnsupported {
            let long = Request.findByValue(uuid.uuid128.reversed())
            if uuid.value16 != nil {
                let short = Request.findByValue(uuid.wireBytes)
                byValue = longFormFirst ? [long, short] : [short, long]
            } else {
                byValue = [long]
            }
        }
        plan = byValue + [.discoverAll]
    }

    /// The first request (`outcome` nil), or the one after the last request's outcome; nil when the
    /// search is over (found, or absent everywhere).
    mutating func next(after outcome: Outcome?) -> Request? {
        guard let outcome else { return position < plan.count ? plan[position] : nil }
        switch outcome {
        case .found:
            position = plan.count
            return nil
        case .notFound:
            position += 1
        case .notSupported:
            // No more Find By Type Value: on to full discovery (unless that was the last request).
            let wasAll = position < plan.count && plan[position] == .discoverAll
            position = wasAll ? plan.count : plan.count - 1
        }
        return position < plan.count ? plan[position] : nil
    }
}
