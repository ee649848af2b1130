import Foundation
import Support
import Testing
@testable import Engine

/// The records' times: exact milliseconds in memory, ISO 8601 text only at the Codable edge.
@Suite struct WallTimeTests {
    @Test func itIsWrittenAsISO8601WithMilliseconds() {
        let cases: [(Int64, String)] = [
            (0, "1970-01-01T00:00:00.000Z"),
            (1_796_014_800_123, "2026-11-30T05:00:00.123Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (1_709_251_199_999, "2024-02-29T23:59:59.999Z"),
            (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
            (-62_135_596_800_000, "0001-01-01T00:00:00.000Z"),
        ]
        for (ms, text) in cases {
            #expect(WallTime(millisecondsSince1970: ms).iso == text)
            #expect(WallTime(iso: text)?.millisecondsSince1970 == ms, "\(text)")
        }
    }

    @Test func everyMillisecondReadsBackAsItself() {
        var g = SplitMix64(seed: 7)
        for _ in 0..<20_000 {
            let ms = Int64(bitPattern: g.next() % 253_402_300_800_000)
            let t = WallTime(millisecondsSince1970: ms)
            #expect(WallTime(iso: t.iso) == t, "\(ms)")
        }
    }

    @Test func aDateIsCutToTheMillisecondAsFoundationPrintsIt() {
        let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        var g = SplitMix64(seed: 3)
        for _ in 0..<2_000 {
            let date = Date(timeIntervalSince1970: Double(g.next() % 4_000_000_000_000) / 1000 + Double(g.next() % 1000) / 1e6)
            #expect(WallTime(date).iso == date.formatted(style), "\(date.timeIntervalSince1970)")
        }
    }

    @Test func otherFormsOfISO8601AreRead() {
        #expect(WallTime(iso: "2026-11-30T05:00:00Z")?.iso == "2026-11-30T05:00:00.000Z")
        #expect(WallTime(iso: "2026-11-30T05:00:00.1Z")?.iso == "2026-11-30T05:00:00.100Z")
        #expect(WallTime(iso: "2026-11-30T05:00:00.123456789Z")?.iso == "2026-11-30T05:00:00.123Z")
        #expect(WallTime(iso: "2026-11-30T07:00:00.123+02:00")?.iso == "2026-11-30T05:00:00.123Z")
        #expect(WallTime(iso: "2026-11-29T23:30:00.000-05:30")?.iso == "2026-11-30T05:00:00.000Z")
    }

    @Test func anythingElseIsRefusedWithoutTrapping() {
        let hostile = ["", "t", "2026", "2026-11-30", "2026-11-30T05:00:00", "2026-11-30 05:00:00Z", "2026-13-01T00:00:00Z",
                       "2026-02-29T00:00:00Z", "2026-11-31T00:00:00Z", "2026-11-30T24:00:00Z", "2026-11-30T05:60:00Z",
                       "2026-11-30T05:00:60Z", "2026-11-30T05:00:00.Z", "2026-11-30T05:00:00.1234567890Z", "2026-11-30T05:00:00.000Zx",
                       "2026-11-30T05:00:00.000+2:00", "2026-11-30T05:00:00.000+24:00", "２０２６-11-30T05:00:00Z", "+2026-11-30T05:00:00Z",
                       "-001-11-30T05:00:00Z", String(repeating: "9", count: 10_000), "2026-11-30T05:00:00\u{0}Z"]
        for text in hostile { #expect(WallTime(iso: text) == nil, "\(text.prefix(40))") }
    }

    @Test func aRecordWithATimeThatIsNoTimeIsAClearError() {
        let json = #"{"at":"yesterday","type":"started","device":"SN-1","attempt":1}"#
        #expect {
            _ = try EngineJSON.decoder().decode(JournalLine.self, from: Data(json.utf8))
        } throws: { error in
            "\(error)".contains("not an ISO 8601 time: \"yesterday\"")
        }
    }
}
