import Support

/// The simulator's deterministic pseudo-random generator: `SplitMix64` (Support) with the draws a
/// virtual device needs.
///
/// Every random choice of a virtual device comes from one of these, seeded from the run seed, the
/// device id and a stream number (the connection number, or a scan round), so the same seed gives the
/// same faults in the same places on every machine. Never `SystemRandomNumberGenerator`, never `Hasher`
/// (randomly seeded per process).
public struct SimulatorRandom: RandomNumberGenerator, Sendable {
    private var base: SplitMix64

    public init(seed: UInt64) {
        base = SplitMix64(seed: seed)
    }

    /// A generator for one stream of one device: (run seed, device id, stream).
    public init(seed: UInt64, device id: String, stream: UInt64) {
        var s = SimulatorRandom(seed: seed ^ 0x5EED_0F_DE71CE)
        let h = s.next() ^ StableHash.fnv1a(id)
        base = SplitMix64(seed: SplitMix64.mix(h &+ stream &* SplitMix64.increment))
    }

    public mutating func next() -> UInt64 {
        base.next()
    }

    /// True with probability `p` (a draw is always taken, so the stream stays aligned).
    public mutating func chance(_ p: Double) -> Bool {
        let u = Double(next() >> 11) * 0x1.0p-53
        return u < p
    }

    /// A duration uniformly in `range`.
    public mutating func duration(in range: LatencyRange) -> Duration {
        let lo = range.lower.nanoseconds
        let hi = range.upper.nanoseconds
        guard hi > lo else { return range.lower }
        let span = UInt64(hi - lo)
        return .nanoseconds(lo + Int64(next() % (span + 1)))
    }

    /// An integer uniformly in `lo...hi`.
    public mutating func int(in lo: Int, _ hi: Int) -> Int {
        guard hi > lo else { return lo }
        return lo + Int(next() % UInt64(hi - lo + 1))
    }
}

extension Duration {
    /// Whole nanoseconds (saturating; simulator latencies are far below the limit).
    var nanoseconds: Int64 {
        let (s, atto) = components
        return s &* 1_000_000_000 &+ atto / 1_000_000_000
    }

    /// Scaled by a factor (latency scale, slow-device multiplier).
    func scaled(_ factor: Double) -> Duration {
        guard factor > 0 else { return .zero }
        return .nanoseconds(Int64((Double(nanoseconds) * factor).rounded()))
    }
}
