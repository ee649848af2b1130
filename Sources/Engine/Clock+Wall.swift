import Foundation

/// Wall-clock timestamps as text (ISO 8601 with milliseconds, UTC), for what is not a record: the line's
/// status, benchmarks. Records keep a `WallTime` and write it as this text.
package enum WallClock {
    package static func now() -> Date { Date() }

    package static func iso(_ date: Date) -> String { WallTime(date).iso }
}

extension Duration {
    /// Milliseconds as a Double (for reports).
    package var milliseconds: Double {
        let (s, a) = components
        return Double(s) * 1000 + Double(a) / 1e15
    }
}
