import Foundation

/// Wall-clock timestamps for reports and the journal: ISO 8601 with milliseconds, UTC.
package enum WallClock {
    package static func now() -> Date { Date() }

    private static let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    package static func iso(_ date: Date) -> String {
        date.formatted(style)
    }
}

extension Duration {
    /// Milliseconds as a Double (for reports).
    package var milliseconds: Double {
        let (s, a) = components
        return Double(s) * 1000 + Double(a) / 1e15
    }
}
