/// The one definition of a percentile, for every percentile the tool prints or writes (the report's
/// `summary.duration_ms`, `provision report --group-by`, the HTML report, the benchmarks): the
/// **nearest rank**. The p-th percentile of N sorted values is the value at rank ⌈p·N/100⌉ (1-based),
/// rank 1 for p = 0: p50 of 24 values is the 12th, p95 of 20 the 19th, p100 the largest.
///
/// Always one of the values (never an interpolation), and computed in integers, so no rounding of
/// `0.95 * N` can move it.
package enum Percentile {
    /// The 0-based index of the p-th percentile (0...100) among `count` sorted values; nil when there
    /// are none.
    package static func index(percent: Int, count: Int) -> Int? {
        guard count > 0 else { return nil }
        let p = min(100, max(0, percent))
        // ⌈p·N/100⌉ with N = 100a + b: a·p + ⌈b·p/100⌉, which cannot overflow (p ≤ 100).
        let rank = count / 100 * p + (count % 100 * p + 99) / 100
        return min(count, max(1, rank)) - 1
    }

    /// The p-th percentile of values already sorted in ascending order; nil when there are none.
    package static func of<C: RandomAccessCollection>(_ sorted: C, percent: Int) -> C.Element? {
        guard let i = index(percent: percent, count: sorted.count) else { return nil }
        return sorted[sorted.index(sorted.startIndex, offsetBy: i)]
    }
}
