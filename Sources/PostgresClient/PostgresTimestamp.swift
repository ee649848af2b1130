import Foundation
import Support

/// Timestamps in PostgreSQL's text format, to and from `Date`, with microsecond precision.
///
/// Parsing reads what the server sends with `DateStyle=ISO` (which every connection sets):
/// `2026-11-30 21:29:54.123456+00`, with an optional fraction and an offset of `+HH`, `+HH:MM` or
/// `+HH:MM:SS`; a `timestamp` without a zone is read as UTC. `infinity`, BC dates and anything else
/// return nil, never trap.
public enum PostgresTimestamp {
    /// `2026-11-30T21:29:54.123456Z`.
    public static func format(_ date: Date) -> String {
        let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        let perDay: Int64 = 86_400_000_000
        var days = micros / perDay
        var rest = micros % perDay
        if rest < 0 {
            rest += perDay
            days -= 1
        }
        let (y, m, d) = CivilDate.date(days: days)
        let seconds = rest / 1_000_000
        let fraction = rest % 1_000_000
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(seconds / 3600, 2)):\(pad(seconds / 60 % 60, 2)):\(pad(seconds % 60, 2)).\(pad(fraction, 6))Z"
    }

    /// The instant `text` names, or nil when it is not an ISO timestamp this reader understands.
    public static func parse(_ text: String) -> Date? {
        var r = Reader(Array(text.utf8))
        guard let year = r.digits(min: 4, max: 7), r.take("-"),
              let month = r.digits(min: 2, max: 2), r.take("-"),
              let day = r.digits(min: 2, max: 2), r.take(" ") || r.take("T"),
              let hour = r.digits(min: 2, max: 2), r.take(":"),
              let minute = r.digits(min: 2, max: 2), r.take(":"),
              let second = r.digits(min: 2, max: 2) else { return nil }
        var micros: Int64 = 0
        if r.take(".") {
            let start = r.index
            guard let f = r.digits(min: 1, max: 9) else { return nil }
            let count = r.index - start
            micros = count <= 6 ? f * pow10(6 - count) : f / pow10(count - 6)
        }
        var offset: Int64 = 0
        if r.take("Z") {
            offset = 0
        } else if let sign = r.sign() {
            guard let oh = r.digits(min: 2, max: 2) else { return nil }
            var om: Int64 = 0, os: Int64 = 0
            if r.take(":") {
                guard let v = r.digits(min: 2, max: 2) else { return nil }
                om = v
                if r.take(":") {
                    guard let s = r.digits(min: 2, max: 2) else { return nil }
                    os = s
                }
            }
            guard oh <= 15, om < 60, os < 60 else { return nil }
            offset = sign * (oh * 3600 + om * 60 + os)
        }
        guard r.atEnd, (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61,
              day <= CivilDate.daysIn(month: month, year: year) else { return nil }
        let days = CivilDate.days(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + Double(micros) / 1_000_000)
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        var atEnd: Bool { index == bytes.count }

        mutating func take(_ c: Unicode.Scalar) -> Bool {
            guard index < bytes.count, bytes[index] == UInt8(ascii: c) else { return false }
            index += 1
            return true
        }

        mutating func sign() -> Int64? {
            if take("+") { return 1 }
            if take("-") { return -1 }
            return nil
        }

        mutating func digits(min: Int, max: Int) -> Int64? {
            var value: Int64 = 0
            var n = 0
            while index < bytes.count, n < max, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                value = value * 10 + Int64(bytes[index] - 0x30)
                index += 1
                n += 1
            }
            return n >= min ? value : nil
        }
    }

    private static func pow10(_ n: Int) -> Int64 {
        var v: Int64 = 1
        for _ in 0..<n { v *= 10 }
        return v
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let s = String(value)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }
}
