import Testing
@testable import Support

@Suite struct PercentileTests {
    @Test func theMedianOfAnEvenCountIsTheLowerMiddleValue() {
        let values = Array(1...24)
        #expect(Percentile.of(values, percent: 50) == 12, "nearest rank: ⌈0.5·24⌉ = 12")
        #expect(Percentile.of(Array(1...25), percent: 50) == 13)
    }

    @Test func ranksAreTheNearestRankDefinition() {
        let twenty = Array(1...20)
        #expect(Percentile.of(twenty, percent: 95) == 19)
        #expect(Percentile.of(twenty, percent: 100) == 20)
        #expect(Percentile.of(twenty, percent: 0) == 1)
        #expect(Percentile.of(twenty, percent: 5) == 1)
        #expect(Percentile.of(twenty, percent: 6) == 2)
        #expect(Percentile.of([7], percent: 50) == 7)
        #expect(Percentile.of([Int](), percent: 50) == nil)
        // Every rank for every small count: ⌈p·N/100⌉, checked in exact arithmetic against a plain loop.
        for n in 1...60 {
            for p in 0...100 {
                var rank = 1
                while rank * 100 < p * n { rank += 1 }
                #expect(Percentile.index(percent: p, count: n) == rank - 1, "p\(p) of \(n)")
            }
        }
    }

    @Test func hugeCountsDoNotOverflow() {
        #expect(Percentile.index(percent: 50, count: Int.max) == Int.max / 2)
        #expect(Percentile.index(percent: 100, count: Int.max) == Int.max - 1)
        #expect(Percentile.index(percent: 1, count: Int.max) != nil)
    }
}
