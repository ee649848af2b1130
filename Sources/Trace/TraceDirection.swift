import Foundation

/// Which way a traced packet went, seen from this host (the central): `sent` to the controller or
/// device, `received` from it.
public enum TraceDirection: String, Sendable, Hashable, Codable, CaseIterable {
    case sent
    case received
}

/// Wall-clock time for trace records, in microseconds since the Unix epoch (1970-01-01T00:00:00Z).
public enum TraceTime {
    /// Now.
    public static func nowMicroseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1_000
    }

    /// `2026-05-01T12:00:00.123456Z`: ISO 8601 UTC with microseconds.
    public static func iso8601(microseconds: Int64) -> String {
        let (secondsPart, micro) = microseconds.quotientAndRemainder(dividingBy: 1_000_000)
        var seconds = secondsPart
        var fraction = micro
        if fraction < 0 {
            seconds -= 1
            fraction += 1_000_000
        }
        var t = time_t(seconds)
        var parts = tm()
        guard gmtime_r(&t, &parts) != nil else { return "\(microseconds)us" }
        func pad(_ n: Int32, _ width: Int) -> String {
            let s = String(n)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        let fractionText = pad(Int32(fraction), 6)
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(fractionText)Z"
    }
}
