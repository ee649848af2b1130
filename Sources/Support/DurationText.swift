/// Durations as written in files and on the command line: always with a unit (`250ms`, `10s`, `1.5s`,
/// `2m`, `1h`): workflows, simulator models, options.
public enum DurationText {
    /// Why a duration could not be read.
    public enum ParseError: Error, Sendable, Equatable {
        case missingUnit
        case unknownUnit(String)
        case malformed
        case negative
    }

    /// Parses `250ms`, `10s`, `1.5s`, `2m`, `1h`, `500us`. A bare number is an error (`missingUnit`).
    public static func parse(_ text: String) -> Result<Duration, ParseError> {
        let t = text.trimmingSpaces
        guard !t.isEmpty else { return .failure(.malformed) }
        if t.hasPrefix("-") { return .failure(.negative) }
        let numberEnd = t.firstIndex { !($0.isASCII && ($0.isNumber || $0 == ".")) } ?? t.endIndex
        let number = t[t.startIndex..<numberEnd]
        let unit = t[numberEnd...].trimmingSpaces
        guard !number.isEmpty, number.filter({ $0 == "." }).count <= 1, number != ".",
              number.count <= 12
        else { return .failure(.malformed) }
        if unit.isEmpty { return .failure(.missingUnit) }
        let nanosPerUnit: Double
        switch unit {
        case "ns": nanosPerUnit = 1
        case "us", "µs": nanosPerUnit = 1_000
        case "ms": nanosPerUnit = 1_000_000
        case "s": nanosPerUnit = 1_000_000_000
        case "m", "min": nanosPerUnit = 60_000_000_000
        case "h": nanosPerUnit = 3_600_000_000_000
        default: return .failure(.unknownUnit(unit))
        }
        guard let value = Double(number), value.isFinite else { return .failure(.malformed) }
        let nanos = value * nanosPerUnit
        guard nanos < 1e17 else { return .failure(.malformed) }
        return .success(.nanoseconds(Int64(nanos.rounded())))
    }

    /// Formats a duration the way a user writes it: `250ms`, `10s`, `1.5s`, `2m`.
    public static func format(_ d: Duration) -> String {
        let nanos = d.nanoseconds
        if nanos == 0 { return "0s" }
        if nanos % 3_600_000_000_000 == 0 { return "\(nanos / 3_600_000_000_000)h" }
        if nanos % 60_000_000_000 == 0 { return "\(nanos / 60_000_000_000)m" }
        if nanos % 1_000_000_000 == 0 { return "\(nanos / 1_000_000_000)s" }
        if nanos % 1_000_000 == 0 {
            let ms = nanos / 1_000_000
            return ms >= 1000 ? "\(Double(ms) / 1000)s" : "\(ms)ms"
        }
        if nanos % 1_000 == 0 { return "\(nanos / 1_000)us" }
        return "\(nanos)ns"
    }
}

extension Duration {
    /// Whole nanoseconds (saturating at Int64.max).
    public var nanoseconds: Int64 {
        let (seconds, attos) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return whole &+ attos / 1_000_000_000
    }

    /// Seconds as a Double.
    public var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs.
    public var trimmingSpaces: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
