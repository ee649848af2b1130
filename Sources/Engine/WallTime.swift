import Foundation
import Support
#if canImport(Glibc)
import Glibc
#endif

/// A wall-clock instant as the journal, the report and the events keep it: whole milliseconds since
/// 1970 (UTC). Written as ISO 8601 with milliseconds (`2026-11-30T05:00:00.123Z`) only at the Codable
/// edge; in memory it is a number, so a time read back from a journal is the same instant, to the
/// millisecond, when it is written again (a `Date` made from that text is not: `…00.123Z` becomes
/// 0.12299990… s and prints as `…00.122Z`).
public struct WallTime: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    public var millisecondsSince1970: Int64

    public init(millisecondsSince1970: Int64) {
        self.millisecondsSince1970 = millisecondsSince1970
    }

    /// The instant of `date`, cut to the millisecond (as `ISO8601FormatStyle` prints it).
    public init(_ date: Date) {
        let ms = (date.timeIntervalSince1970 * 1000).rounded(.down)
        millisecondsSince1970 = ms.isFinite ? Int64(max(-62_135_596_800_000, min(253_402_300_799_999, ms))) : 0
    }

    /// Now (the system's real-time clock).
    public static func now() -> WallTime {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return WallTime(millisecondsSince1970: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
    }

    public var date: Date { Date(timeIntervalSince1970: Double(millisecondsSince1970) / 1000) }

    public static func < (a: WallTime, b: WallTime) -> Bool { a.millisecondsSince1970 < b.millisecondsSince1970 }

    /// The time from `earlier` to this one.
    public func since(_ earlier: WallTime) -> Duration { .milliseconds(millisecondsSince1970 - earlier.millisecondsSince1970) }

    public var description: String { iso }

    // MARK: ISO 8601

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC, proleptic Gregorian calendar).
    public var iso: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        appendISO(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the ISO text's bytes (for writers that build JSON over bytes).
    public func appendISO(to out: inout [UInt8]) {
        // Years 1...9999, as ISO 8601 writes them with four digits (a time outside is written at the edge).
        let ms = max(-62_135_596_800_000, min(253_402_300_799_999, millisecondsSince1970))
        let days = ms >= 0 ? ms / 86_400_000 : -((-ms - 1) / 86_400_000) - 1
        let inDay = ms - days * 86_400_000
        let (y, m, d) = CivilDate.date(days: days)
        func digits(_ v: Int64, _ n: Int) {
            var divisor: Int64 = 1
            for _ in 1..<n { divisor *= 10 }
            var v = v
            while divisor > 0 {
                out.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: v / divisor))
                v %= divisor
                divisor /= 10
            }
        }
        digits(y, 4)
        out.append(UInt8(ascii: "-"))
        digits(m, 2)
        out.append(UInt8(ascii: "-"))
        digits(d, 2)
        out.append(UInt8(ascii: "T"))
        digits(inDay / 3_600_000, 2)
        out.append(UInt8(ascii: ":"))
        digits(inDay / 60_000 % 60, 2)
        out.append(UInt8(ascii: ":"))
        digits(inDay / 1000 % 60, 2)
        out.append(UInt8(ascii: "."))
        digits(inDay % 1000, 3)
        out.append(UInt8(ascii: "Z"))
    }

    /// Reads `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; a fraction finer than milliseconds is cut.
    /// Nil for anything else (never traps on hostile text).
    public init?(iso text: String) {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 20 else { return nil }
        var i = 0
        func number(_ n: Int) -> Int64? {
            guard i + n <= utf8.count else { return nil }
            var v: Int64 = 0
            for k in i..<(i + n) {
                let c = utf8[k] &- UInt8(ascii: "0")
                guard c < 10 else { return nil }
                v = v * 10 + Int64(c)
            }
            i += n
            return v
        }
        func expect(_ c: Character) -> Bool {
            guard i < utf8.count, utf8[i] == c.asciiValue else { return false }
            i += 1
            return true
        }
        guard let y = number(4), expect("-"), let mo = number(2), expect("-"), let d = number(2), expect("T"),
              let h = number(2), expect(":"), let mi = number(2), expect(":"), let s = number(2),
              (1...12).contains(mo), (1...CivilDate.daysIn(month: mo, year: y)).contains(d), h < 24, mi < 60, s < 60 else { return nil }
        var fraction: Int64 = 0
        if i < utf8.count, utf8[i] == UInt8(ascii: ".") {
            i += 1
            var scale: Int64 = 100
            let start = i
            while i < utf8.count, utf8[i] &- UInt8(ascii: "0") < 10 {
                fraction += Int64(utf8[i] &- UInt8(ascii: "0")) * scale
                scale /= 10
                i += 1
            }
            guard i > start, i - start <= 9 else { return nil }
        }
        var offset: Int64 = 0
        if expect("Z") {
        } else if i < utf8.count, utf8[i] == UInt8(ascii: "+") || utf8[i] == UInt8(ascii: "-") {
            let sign: Int64 = utf8[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let oh = number(2), expect(":"), let om = number(2), oh < 24, om < 60 else { return nil }
            offset = sign * (oh * 60 + om) * 60_000
        } else {
            return nil
        }
        guard i == utf8.count else { return nil }
        let days = CivilDate.days(year: y, month: mo, day: d)
        millisecondsSince1970 = days * 86_400_000 + ((h * 60 + mi) * 60 + s) * 1000 + fraction - offset
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        let text = try c.decode(String.self)
        guard let t = WallTime(iso: text) else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "not an ISO 8601 time: \"\(text.prefix(40))\"")
        }
        self = t
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(iso)
    }
}
