import EngineTestSupport
import Engine
import Foundation
import Testing
import Workflow
@testable import ProvisionCLI

/// `--group-by` and the HTML report's histograms: exact on integers (no stepping in Double), at most
/// 10 bins, every value in exactly one bin, whatever the values (near 2^63, the whole Int64 range,
/// ±1.7e308), in bounded time.
@Suite struct HistogramTests {
    static func integers(_ values: [Int64], signed: Bool = false) -> [TypedValue] { values.map { .integer($0, signed: signed) } }

    /// Every value in exactly one bin, bins in order and at most `bins` of them.
    static func expectPartition(_ bins: [Grouping.Bin], _ values: [TypedValue], max: Int = 10, _ comment: Comment) throws {
        #expect(!bins.isEmpty && bins.count <= max, comment)
        #expect(bins.map(\.count).reduce(0, +) == values.count, comment)
        for v in values {
            let holding = bins.enumerated().filter { i, b in
                let aboveFrom = (try? TypedValue.compare(v, .greaterOrEqual, b.from)) ?? false
                let last = i == bins.count - 1
                let integer = if case .integer = b.from { true } else { false }
                let belowTo = (try? TypedValue.compare(v, integer || last ? .lessOrEqual : .less, b.to)) ?? false
                return aboveFrom && belowTo
            }
            #expect(holding.count == 1, "\(comment): \(v) is in \(holding.count) bins")
        }
        for (a, b) in zip(bins, bins.dropFirst()) {
            #expect((try? TypedValue.compare(a.to, .lessOrEqual, b.from)) == true, comment)
        }
    }

    @Test func integersCloseTogetherNear2To63AreBinnedExactly() throws {
        // An uptime in nanoseconds, `as: uint64le`: values a few apart near the top of Int64. Stepping in
        // Double (spacing 2048 there) never advanced: the loop allocated until it died.
        let top = Int64.max
        let values = Self.integers([top, top - 1, top - 2, top - 3, top - 5, top - 8, top - 13])
        let bins = Grouping.histogram(values, bins: 10)
        try Self.expectPartition(bins, values, "near 2^63")
        #expect(bins.count == 7, "14 integers, 2 to a bin")
        #expect(bins.first?.from == .integer(top - 13, signed: false))
        #expect(bins.last?.to == .integer(top, signed: false))
        // Integer-wide bins: a span of 14 integers in at most 10 bins → 2 each; labels exact.
        #expect(bins.map(Grouping.label).first == "9223372036854775794–9223372036854775795")
    }

    @Test func theWholeInt64RangeFitsInTenBins() throws {
        let values = Self.integers([.min, -1, 0, 1, .max, .max - 1, .min + 1], signed: true)
        let bins = Grouping.histogram(values, bins: 10)
        try Self.expectPartition(bins, values, "Int64.min…Int64.max")
        #expect(bins.count == 10)
        #expect(bins.first?.from == .integer(.min, signed: true))
        #expect(bins.last?.to == .integer(.max, signed: true))
    }

    @Test func smallIntegerRangesGetOneBinPerValue() throws {
        let values = Self.integers([3, 4, 4, 5, 7])
        let bins = Grouping.histogram(values, bins: 10)
        #expect(bins.map(Grouping.label) == ["3", "4", "5", "6", "7"])
        #expect(bins.map(\.count) == [1, 2, 1, 0, 1])
        #expect(Grouping.histogram(Self.integers([9, 9]), bins: 10).map(\.count) == [2])
        // 0…100: 11-wide bins, as before.
        let hundred = Self.integers(Array(0...100))
        let wide = Grouping.histogram(hundred, bins: 10)
        try Self.expectPartition(wide, hundred, "0…100")
        #expect(wide.map(Grouping.label).prefix(2) == ["0–10", "11–21"])
    }

    @Test func realsAtTheEndsOfTheDoubleRangeNeverOverflow() throws {
        let huge = Double.greatestFiniteMagnitude
        for values in [[-1.7e308, 1.7e308], [-huge, huge, 0], [0, Double.leastNonzeroMagnitude], [1, 1 + Double.ulpOfOne, 1 + 2 * Double.ulpOfOne],
                       [-huge, -huge / 2], [.infinity, 1, 2, -.infinity]] {
            let typed = values.map { TypedValue.real($0) }
            let bins = Grouping.histogram(typed, bins: 10)
            try Self.expectPartition(bins, typed.filter { if case .real(let d) = $0 { d.isFinite } else { true } }, "\(values)")
        }
    }

    @Test func groupingReportsNearestRankMedianAndBoundedBins() throws {
        // 24 durations: p50 is the 12th (nearest rank), not the 13th.
        let devices = (1...24).map { i in DeviceRecord(id: "SN-\(i)", address: nil, name: nil, outcome: .succeeded, durationMs: Double(i)) }
        let report = RunReport(run: RunInfo(id: "r", workflow: FileRef(path: "w", sha256: ""), inventory: FileRef(path: "i", sha256: ""), adapters: [],
                                            simulated: true, station: "s", toolVersion: "0", options: [:], started: wallTime("2026-01-05T08:00:00.000Z")),
                               summary: Summary.compute(devices, wall: .seconds(1)), devices: devices)
        let g = try Grouping(devices, by: "duration_ms", fields: ReportFields(report))
        #expect(g.statistics?.p50 == .real(12))
        #expect(report.summary.durationMs?.p50 == 12, "the summary's percentile is the same definition")
        #expect(g.histogram.count <= 10)
    }
}
