import BLE

/// What each link should get from the radio, and how to answer a peer that asks for other connection
/// parameters: pure rules over wire units, with no state of their own (`HCIHost` keeps each link's
/// target and what the controller reported).
///
/// - A link's **target** is the workflow's `connect` settings (`LinkPreferences`) over the adapter's
///   defaults (`conn-interval`, `supervision-timeout`, `data-length`, `phy`), limited to what the
///   controller can do.
/// - When a link comes up the host asks for its data length (LE Set Data Length) and PHY (LE Set PHY),
///   and for its interval (LE Connection Update) when the connection did not get one in range.
/// - A peer's request — L2CAP Connection Parameter Update Request (Vol 3 Part A 4.20) or the LL
///   Connection Parameters Request procedure (LE Remote Connection Parameter Request, Vol 4 Part E
///   7.7.65.6) — is **accepted within the link's limits**: valid by Vol 6 Part B 4.5.1/4.5.2, with an
///   interval range that meets the link's target range; the link then runs at the overlap, with at
///   most the latency the station allows. A request that does not meet the range is refused (a
///   provisioning link that slows down is a line that slows down).
public enum LinkTuning {
    /// The station's wishes for one link, in wire units.
    public struct Target: Sendable, Equatable {
        /// Connection interval bounds, 1.25 ms units.
        public var intervalMin: UInt16
        public var intervalMax: UInt16
        /// Peripheral latency the station allows, in connection events.
        public var latency: UInt16
        /// 10 ms units.
        public var supervisionTimeout: UInt16
        /// LL payload to ask for (LE Set Data Length); nil: none.
        public var dataLength: UInt16?
        /// PHY to ask for (LE Set PHY); nil: none (links start on LE 1M).
        public var phy: LinkPHY?

        public init(intervalMin: UInt16, intervalMax: UInt16, latency: UInt16, supervisionTimeout: UInt16,
                    dataLength: UInt16? = nil, phy: LinkPHY? = nil) {
            self.intervalMin = intervalMin
            self.intervalMax = intervalMax
            self.latency = latency
            self.supervisionTimeout = supervisionTimeout
            self.dataLength = dataLength
            self.phy = phy
        }
    }

    /// What the controller allows, for `target(...)`.
    public struct Abilities: Sendable, Equatable {
        public var dataLength: Bool
        public var twoMegabitPHY: Bool
        public var codedPHY: Bool

        public init(dataLength: Bool, twoMegabitPHY: Bool, codedPHY: Bool = false) {
            self.dataLength = dataLength
            self.twoMegabitPHY = twoMegabitPHY
            self.codedPHY = codedPHY
        }
    }

    /// A link's target: `preferences` over the adapter's `defaults` (LE Create Connection's values;
    /// `defaultDataLength` and `defaultPHY` nil when the adapter asks for none), within `abilities`.
    public static func target(defaults: ConnectionInitiator.Parameters, defaultDataLength: UInt16?, defaultPHY: LinkPHY?,
                              abilities: Abilities, preferences: LinkPreferences?) -> Target {
        var t = Target(intervalMin: defaults.intervalMin, intervalMax: defaults.intervalMax, latency: defaults.latency,
                       supervisionTimeout: defaults.supervisionTimeout, dataLength: defaultDataLength, phy: defaultPHY)
        if let p = preferences {
            if let i = p.interval {
                t.intervalMin = units(i.lowerBound, of: 1.25, in: 0x0006...0x0C80)
                t.intervalMax = max(t.intervalMin, units(i.upperBound, of: 1.25, in: 0x0006...0x0C80))
            }
            if let l = p.latency { t.latency = UInt16(clamping: min(max(l, 0), 499)) }
            if let s = p.supervisionTimeout { t.supervisionTimeout = units(s, of: 10, in: 0x000A...0x0C80) }
            if let d = p.dataLength { t.dataLength = UInt16(clamping: min(max(d, 27), 251)) }
            if let phy = p.phy { t.phy = phy }
        }
        t.supervisionTimeout = max(t.supervisionTimeout, minimumTimeout(intervalMax: t.intervalMax, latency: t.latency))
        if !abilities.dataLength { t.dataLength = nil }
        switch t.phy {
        case .le2M? where !abilities.twoMegabitPHY, .leCoded? where !abilities.codedPHY, .le1M?: t.phy = nil
        default: break
        }
        return t
    }

    /// The shortest valid supervision timeout (10 ms units) for an interval and latency: more than
    /// (1 + latency) × interval × 2 (Vol 6 Part B 4.5.2), at least 100 ms.
    public static func minimumTimeout(intervalMax: UInt16, latency: UInt16) -> UInt16 {
        // timeout × 10 ms > (1 + latency) × intervalMax × 1.25 ms × 2  ⇔  timeout × 4 > (1 + latency) × intervalMax
        let needed = (1 + Int(latency)) * Int(intervalMax) / 4 + 1
        return UInt16(clamping: min(3200, max(10, needed)))
    }

    /// Whether a connection's interval and latency are what the target asks.
    public static func inRange(interval: UInt16, latency: UInt16, _ t: Target) -> Bool {
        interval >= t.intervalMin && interval <= t.intervalMax && latency <= t.latency
    }

    /// The parameters to run a link at when its peer asks for `request` (either procedure): the overlap
    /// of the peer's interval range with the target's, at most the latency both allow, the peer's
    /// timeout (raised to a valid one); nil when the request is invalid or its range misses the target's.
    public static func answer(_ request: ConnectionParameterUpdateRequest, target t: Target) -> ConnectionParameterUpdateRequest? {
        guard request.isAcceptable else { return nil }
        let low = max(request.intervalMin, t.intervalMin)
        let high = min(request.intervalMax, t.intervalMax)
        guard low <= high else { return nil }
        let latency = min(request.latency, t.latency)
        let timeout = max(request.timeout, minimumTimeout(intervalMax: high, latency: latency))
        let answer = ConnectionParameterUpdateRequest(intervalMin: low, intervalMax: high, latency: latency, timeout: timeout)
        return answer.isAcceptable ? answer : nil
    }

    /// `d` in units of `milliseconds`, rounded and clamped to `range`.
    public static func units(_ d: Duration, of milliseconds: Double, in range: ClosedRange<UInt16>) -> UInt16 {
        let ms = Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
        let n = (ms / milliseconds).rounded()
        return UInt16(max(Double(range.lowerBound), min(Double(range.upperBound), n)))
    }

    /// What a connection reported, as `LinkParameters` (interval in 1.25 ms units, timeout in 10 ms).
    public static func parameters(interval: UInt16, latency: UInt16, timeout: UInt16) -> LinkParameters {
        LinkParameters(interval: .microseconds(Int64(interval) * 1250), latency: Int(latency),
                       supervisionTimeout: .milliseconds(Int64(timeout) * 10))
    }
}
