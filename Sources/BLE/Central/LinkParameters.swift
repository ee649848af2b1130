/// An LE PHY (Core v5.4 Vol 6 Part A 2): how fast a link's (or an advertisement's) bits go over the air.
public enum LinkPHY: String, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    /// LE 1M, 1 Mbit/s: every LE device has it.
    case le1M = "1M"
    /// LE 2M, 2 Mbit/s (Data Length Extension's airtime halves).
    case le2M = "2M"
    /// LE Coded (S=2 or S=8): long range, 500 or 125 kbit/s.
    case leCoded = "coded"

    public var description: String { rawValue }
}

/// What a link should get from the radio, as a workflow's `connect` step asks for it
/// (`connect: { interval: 7.5ms..15ms, phy: 2M, data_length: 251 }`). Nil members keep the adapter's
/// defaults. Ranges are those of Core v5.4 Vol 6 Part B 4.5.1 (interval, latency, supervision timeout)
/// and 4.5.10 (data length); `LinkPreferences.validate` says what is out of them.
public struct LinkPreferences: Sendable, Hashable {
    /// Connection interval bounds (7.5 ms – 4 s, in steps of 1.25 ms).
    public var interval: ClosedRange<Duration>?
    /// Peripheral latency: connection events the peripheral may skip (0–499).
    public var latency: Int?
    /// Supervision timeout (100 ms – 32 s); raised to more than twice the longest interval.
    public var supervisionTimeout: Duration?
    /// The PHY both directions should use.
    public var phy: LinkPHY?
    /// Largest LL payload per packet, in octets (27–251): Data Length Extension.
    public var dataLength: Int?

    public init(interval: ClosedRange<Duration>? = nil, latency: Int? = nil, supervisionTimeout: Duration? = nil,
                phy: LinkPHY? = nil, dataLength: Int? = nil) {
        self.interval = interval
        self.latency = latency
        self.supervisionTimeout = supervisionTimeout
        self.phy = phy
        self.dataLength = dataLength
    }

    /// Nothing asked for.
    public var isEmpty: Bool { interval == nil && latency == nil && supervisionTimeout == nil && phy == nil && dataLength == nil }

    public static let intervalRange: ClosedRange<Duration> = .microseconds(7500) ... .seconds(4)
    public static let latencyRange: ClosedRange<Int> = 0...499
    public static let supervisionTimeoutRange: ClosedRange<Duration> = .milliseconds(100) ... .seconds(32)
    public static let dataLengthRange: ClosedRange<Int> = 27...251

    /// What is out of range, in words (empty when every member is valid).
    public var problems: [String] {
        var out: [String] = []
        if let i = interval, !(Self.intervalRange.contains(i.lowerBound) && Self.intervalRange.contains(i.upperBound)) {
            out.append("the interval must be from 7.5ms to 4s")
        }
        if let l = latency, !Self.latencyRange.contains(l) { out.append("the latency must be from 0 to 499 connection events") }
        if let t = supervisionTimeout, !Self.supervisionTimeoutRange.contains(t) { out.append("the supervision timeout must be from 100ms to 32s") }
        if let d = dataLength, !Self.dataLengthRange.contains(d) { out.append("the data length must be from 27 to 251 octets") }
        return out
    }
}

/// What a link got, as its controller reported it (LE Connection Complete, LE Connection Update
/// Complete, LE Data Length Change, LE PHY Update Complete).
public struct LinkParameters: Sendable, Hashable {
    /// Connection interval.
    public var interval: Duration
    /// Peripheral latency, in connection events.
    public var latency: Int
    public var supervisionTimeout: Duration
    public var txPHY: LinkPHY
    public var rxPHY: LinkPHY
    /// Largest LL payload each way, in octets (27 until Data Length Extension changes it).
    public var txOctets: Int
    public var rxOctets: Int

    public init(interval: Duration, latency: Int, supervisionTimeout: Duration, txPHY: LinkPHY = .le1M, rxPHY: LinkPHY = .le1M,
                txOctets: Int = 27, rxOctets: Int = 27) {
        self.interval = interval
        self.latency = latency
        self.supervisionTimeout = supervisionTimeout
        self.txPHY = txPHY
        self.rxPHY = rxPHY
        self.txOctets = txOctets
        self.rxOctets = rxOctets
    }
}
