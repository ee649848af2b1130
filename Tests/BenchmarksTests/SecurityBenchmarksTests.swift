import Benchmarks
import Testing

/// `provision bench security`'s pairings, counted.
@Suite struct SecurityBenchmarksTests {
    @Test func theBenchmarkPairsEveryExchangeAndCountsItsPDUs() throws {
        // The benchmark's central hands over no identity of its own.
        let expected: [SecurityBenchmarks.Exchange: (pdus: Int, turns: Int)] = [
            .secureConnectionsJustWorks: (11, 8), .secureConnectionsPasskeyEntry: (88, 86),
            .legacyJustWorks: (10, 6), .legacyPasskeyEntry: (10, 6),
        ]
        for exchange in SecurityBenchmarks.Exchange.allCases {
            let result = try SecurityBenchmarks.pairings(exchange, count: 2)
            #expect(result.pairings == 2)
            #expect(result.pdus == expected[exchange]?.pdus && result.turns == expected[exchange]?.turns, "\(exchange)")
            #expect(result.description.hasPrefix(exchange.rawValue), "\(result)")
        }
    }
}
