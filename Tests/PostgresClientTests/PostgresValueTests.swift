import Foundation
import PostgresClient
import Testing

@Suite struct PostgresValueTests {
    @Test func arrayLiteralsQuoteEveryElementAndKeepNULLs() {
        let v = PostgresValue.array([.text("a"), .text("b,c"), .text("{\"q\"}"), .text("back\\slash"), .null, .text("")])
        #expect(v.text == #"{"a","b,c","{\"q\"}","back\\slash",NULL,""}"#)
        #expect(PostgresValue.array([]).text == "{}")
    }

    @Test func scalarsHaveTheirPostgreSQLTextForms() {
        #expect(PostgresValue.int(-42).text == "-42")
        #expect(PostgresValue.bool(false).text == "false")
        #expect(PostgresValue.double(.nan).text == "NaN")
        #expect(PostgresValue.double(-.infinity).text == "-Infinity")
        #expect(PostgresValue.double(0.25).text == "0.25")
        #expect(PostgresValue.milliseconds(.seconds(30)).text == "30000")
        #expect(PostgresValue.milliseconds(.milliseconds(1500)).text == "1500")
        #expect(PostgresValue.int(nil as Int?) == .null)
    }

    @Test func timestampsAreWrittenInUTCWithMicroseconds() {
        #expect(PostgresValue.timestamp(Date(timeIntervalSince1970: 0)).text == "1970-01-01T00:00:00.000000Z")
        #expect(PostgresValue.timestamp(Date(timeIntervalSince1970: 1_796_072_994.123456)).text == "2026-11-30T21:09:54.123456Z")
        #expect(PostgresValue.timestamp(Date(timeIntervalSince1970: -1.5)).text == "1969-12-31T23:59:58.500000Z")
    }
}

@Suite struct PostgresTimestampTests {
    @Test func theServersISOFormIsRead() throws {
        let d = try #require(PostgresTimestamp.parse("2026-11-30 21:09:54.123456+00"))
        #expect(abs(d.timeIntervalSince1970 - 1_796_072_994.123456) < 0.000_001)
        #expect(PostgresTimestamp.parse("2026-11-30 23:09:54+02")?.timeIntervalSince1970 == 1_796_072_994)
        #expect(PostgresTimestamp.parse("2026-11-30 21:39:54+00:30")?.timeIntervalSince1970 == 1_796_072_994)
        #expect(PostgresTimestamp.parse("2026-11-30T21:09:54Z")?.timeIntervalSince1970 == 1_796_072_994)
        #expect(PostgresTimestamp.parse("2024-02-29 00:00:00")?.timeIntervalSince1970 == 1_709_164_800)
        #expect(PostgresTimestamp.parse("2026-11-30 21:09:54.5+00")?.timeIntervalSince1970 == 1_796_072_994.5)
    }

    @Test func formattingAndParsingRoundTrip() throws {
        for t in [0, 1_796_072_994.123456, 951_782_400, -86_400 * 365.25 * 30, 4_102_444_800] {
            let d = Date(timeIntervalSince1970: t)
            let back = try #require(PostgresTimestamp.parse(PostgresTimestamp.format(d)))
            #expect(abs(back.timeIntervalSince1970 - t) < 0.000_001)
        }
    }

    @Test func anythingElseIsNilNeverATrap() {
        for text in ["", "infinity", "-infinity", "2026-11-30", "2026-11-30 21:09", "2026-13-01 00:00:00+00", "2023-02-29 00:00:00",
                     "2026-11-30 24:00:00+00", "2026-11-30 21:09:54+", "2026-11-30 21:09:54+00 BC", "2026-11-30 21:09:54.+00",
                     "2026-11-30 21:09:54+99", "２０２６-11-30 21:09:54", "2026-11-30 21:09:54+00:xx", "99999999999-01-01 00:00:00"] {
            #expect(PostgresTimestamp.parse(text) == nil, "\(text)")
        }
    }
}
