import Testing
@testable import Support

@Suite struct SplitMix64Tests {
    @Test func seedZeroGivesThePublishedSequence() {
        // The reference outputs of splitmix64.c (Vigna) from state 0.
        var g = SplitMix64(seed: 0)
        #expect((0..<5).map { _ in g.next() }
                == [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F, 0xF88B_B8A8_724C_81EC, 0x1B39_896A_51A8_749B])
    }

    @Test func theSameSeedGivesTheSameSequenceAndAnotherSeedAnother() {
        var a = SplitMix64(seed: 0x5EED), b = SplitMix64(seed: 0x5EED), c = SplitMix64(seed: 0x5EEE)
        let xs = (0..<16).map { _ in a.next() }
        #expect(xs == (0..<16).map { _ in b.next() })
        #expect(xs != (0..<16).map { _ in c.next() })
    }

    @Test func eachOutputIsTheMixOfTheAdvancedState() {
        var g = SplitMix64(seed: 7)
        #expect(g.next() == SplitMix64.mix(7 &+ SplitMix64.increment))
        #expect(g.next() == SplitMix64.mix(7 &+ 2 &* SplitMix64.increment))
        #expect(SplitMix64.mix(0) == 0)
    }

    @Test func itDrivesTheStandardLibrarysRandomAPIs() {
        var a = SplitMix64(seed: 3), b = SplitMix64(seed: 3)
        let xs = (0..<32).map { _ in Int.random(in: 0..<10, using: &a) }
        #expect(xs == (0..<32).map { _ in Int.random(in: 0..<10, using: &b) })
        #expect(xs.allSatisfy { (0..<10).contains($0) })
    }
}
