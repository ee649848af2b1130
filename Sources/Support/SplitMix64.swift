/// SplitMix64 (Steele, Lea, Flood 2014): a small, fast, deterministic pseudo-random generator.
///
/// The one generator behind every seeded choice: the supervisor's retry jitter (seeded per device),
/// the simulator's faults and latencies (`SimulatorRandom`), and the tests' fuzzers. The same seed
/// gives the same sequence on every machine and in every process; the first output for seed 0 is
/// `0xE220A8397B1DCDAF`.
package struct SplitMix64: RandomNumberGenerator, Sendable {
    /// The golden-ratio increment added to the state before each output.
    package static let increment: UInt64 = 0x9E37_79B9_7F4A_7C15

    private var state: UInt64

    package init(seed: UInt64) {
        state = seed
    }

    package mutating func next() -> UInt64 {
        state &+= Self.increment
        return Self.mix(state)
    }

    /// The SplitMix64 finaliser: a bijective mix of 64 bits (also a good hash of an integer).
    package static func mix(_ x: UInt64) -> UInt64 {
        var z = x
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
