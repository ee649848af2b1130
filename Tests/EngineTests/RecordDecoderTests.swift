import Foundation
import Support
import Testing
@testable import Engine
import Workflow

/// The engine's reader (`RecordDecoder` over a `JSONTape`) reads every record as `JSONDecoder` with the
/// engine's settings reads it, refuses every number out of range with its place, and never traps on
/// hostile text.
@Suite struct RecordDecoderTests {
    static func decodeBoth<T: Codable & Equatable>(_ value: T, pretty: Bool = false) throws -> (mine: T, foundation: T) {
        let bytes = pretty ? RecordEncoder.pretty(value) : RecordEncoder.compact(value)
        let mine = try RecordDecoder().decode(T.self, from: bytes)
        let foundation = try EngineJSON.decoder().decode(T.self, from: Data(bytes))
        return (mine, foundation)
    }

    @Test func everyRecordReadsBackAsJSONDecoderReadsIt() throws {
        for r in RecordEncoderTests.records() {
            for pretty in [false, true] {
                let (mine, foundation) = try Self.decodeBoth(r, pretty: pretty)
                #expect(mine == foundation)
                #expect(mine == r)
            }
        }
        for line in RecordEncoderTests.lines() {
            let (mine, foundation) = try Self.decodeBoth(line)
            #expect(mine == foundation)
        }
        for report in RecordEncoderTests.reports() {
            let (mine, foundation) = try Self.decodeBoth(report, pretty: true)
            #expect(mine == foundation)
            #expect(mine == report)
        }
    }

    /// One decoder reads many records (its name cache is shared), as the report reader does.
    @Test func oneDecoderReadsManyRecords() throws {
        let decoder = RecordDecoder()
        let records = RecordEncoderTests.records()
        for _ in 0..<3 {
            for r in records { #expect(try decoder.decode(DeviceRecord.self, from: RecordEncoder.compact(r)) == r) }
        }
    }

    static func error<T: Decodable>(_ text: String, as type: T.Type = DeviceRecord.self) -> RecordDecodingError? {
        do {
            _ = try RecordDecoder().decode(type, from: Array(text.utf8))
            return nil
        } catch {
            return error
        }
    }

    static let minimal = #"{"attempts":1,"captured":{},"id":"SN-1","outcome":"succeeded","steps":[]"#

    @Test func numbersOutOfRangeAreErrorsAtTheirPlace() throws {
        let cases: [(String, String, String)] = [
            (Self.minimal + #","duration_ms":1e400}"#, "duration_ms", "1e400 is out of range"),
            (Self.minimal + #","duration_ms":1e-400}"#, "duration_ms", "1e-400 is out of range"),
            (Self.minimal + #","rssi":9223372036854775808}"#, "rssi", "9223372036854775808 is out of range"),
            (Self.minimal + #","rssi":1.5}"#, "rssi", "1.5 is not a whole number"),
            (Self.minimal + #","rssi":"-40"}"#, "rssi", "is text, not a whole number"),
            (Self.minimal.replacingOccurrences(of: #""captured":{}"#, with: #""captured":{"up":18446744073709551615}"#) + "}",
             "captured.up", "18446744073709551615 is out of range for an integer"),
            (Self.minimal.replacingOccurrences(of: #""outcome":"succeeded""#, with: #""outcome":"exploded""#) + "}",
             "outcome", "\"exploded\" is not a value this version of provision knows"),
            (Self.minimal.replacingOccurrences(of: #""id":"SN-1","#, with: "") + "}", "", "`id` is missing"),
            (Self.minimal.replacingOccurrences(of: #""steps":[]"#, with: #""steps":null"#) + "}", "steps", "is null"),
            (Self.minimal.replacingOccurrences(of: #""steps":[]"#, with: #""steps":[7]"#) + "}", "steps[0]", "is a number, not an object"),
        ]
        for (text, path, message) in cases {
            let e = try #require(Self.error(text), "\(text)")
            #expect(e.pathText == path, "\(text): \(e)")
            #expect(e.message.contains(message), "\(text): \(e)")
            // The offset is where the offending value (or, for a missing member, its object) is written.
            let bytes = Array(text.utf8)
            #expect(e.offset >= 0 && e.offset < bytes.count, "\(text): \(e)")
            if !path.isEmpty, let last = path.split(separator: ".").last?.split(separator: "[").first {
                let before = String(decoding: bytes[..<e.offset], as: UTF8.self)
                #expect(before.hasSuffix("\"\(last)\":") || before.hasSuffix("["), "\(text): offset \(e.offset) after `\(before.suffix(20))`")
            }
        }
    }

    @Test func integersWrittenWithAFractionOrExponentReadAsFoundationReadsThem() throws {
        let text = Self.minimal.replacingOccurrences(of: #""attempts":1"#, with: #""attempts":2.0"#) + #","rssi":-4e1}"#
        let mine = try RecordDecoder().decode(DeviceRecord.self, from: Array(text.utf8))
        let foundation = try EngineJSON.decoder().decode(DeviceRecord.self, from: Data(text.utf8))
        #expect(mine == foundation)
        #expect(mine.attempts == 2 && mine.rssi == -40)
    }

    @Test func hostileTextIsAnErrorWithAnOffsetNeverATrap() {
        let texts = [
            "", " ", "{", "}", "[", "{\"id\":", "{\"id\":\"SN", "{\"id\":\"a\\q\"}", "{\"id\":\"a\\u12\"}", "{\"id\":\"\\ud800\"}",
            "{\"id\":\"a\u{01}b\"}", "{\"id\":1,}", "[1,2,]", "{\"a\" 1}", "{\"a\":01}", "{\"a\":-}", "{\"a\":1.}", "{\"a\":1e}",
            "{\"a\":tru}", "{\"a\":nul}", "{} {}", "\u{FEFF}{}", "{\"a\":[" + String(repeating: "[", count: 10_000) + "]}",
            "{\"id\":\"\u{FF}\"}".replacingOccurrences(of: "\u{FF}", with: "x"),
        ]
        for text in texts {
            let e = Self.error(text)
            #expect(e != nil, "\(text.prefix(40)) decoded")
            if let e { #expect(e.offset >= 0 && e.offset <= text.utf8.count, "\(text.prefix(40)): \(e)") }
        }
        // Invalid UTF-8 inside a string.
        var bytes = Array(Self.minimal.utf8) + Array("}".utf8)
        if let i = bytes.firstIndex(of: UInt8(ascii: "S")) { bytes[i] = 0xFF }
        #expect(throws: RecordDecodingError.self) { try RecordDecoder().decode(DeviceRecord.self, from: bytes) }
    }

    /// 20,000 mutations of real records: each decodes or is an error in range; never a trap.
    @Test func mutatedRecordsNeverTrap() {
        var rng = SplitMix64(seed: 17)
        let sources = RecordEncoderTests.records().map { RecordEncoder.compact($0) }
        let alphabet = Array("{}[]\",:0123456789-+.eE\\u tfn".utf8)
        var decoded = 0
        for n in 0..<20_000 {
            var bytes = sources[n % sources.count]
            for _ in 0...(Int(rng.next() % 4)) {
                guard !bytes.isEmpty else { break }
                let i = Int(rng.next() % UInt64(bytes.count))
                switch rng.next() % 3 {
                case 0: bytes[i] = alphabet[Int(rng.next() % UInt64(alphabet.count))]
                case 1: bytes.remove(at: i)
                default: bytes.insert(alphabet[Int(rng.next() % UInt64(alphabet.count))], at: i)
                }
            }
            do {
                _ = try RecordDecoder().decode(DeviceRecord.self, from: bytes)
                decoded += 1
            } catch {
                #expect(error.offset >= 0 && error.offset <= bytes.count)
            }
        }
        #expect(decoded > 0, "some mutations leave a valid record")
    }
}

@Suite struct JSONTapeTests {
    @Test func tokensSkipAndLocate() throws {
        let tape = try JSONTape(Array(#" {"a": [1, {"b": "x\ny"}, [], {}], "c": true, "d": null, "a": 2 } "#.utf8))
        #expect(tape.tokens[0].kind == .object && tape.tokens[0].count == 4)
        let a = try #require(tape.locate([.key("a")]))
        #expect(tape.numberText(a) == "2", "the last member of a name written twice")
        let b = try #require(tape.locate([.key("c")]))
        #expect(tape.tokens[b].kind == .true)
        let first = try #require(tape.members(of: 0).first?.value)
        #expect(tape.tokens[first].kind == .array && tape.tokens[first].count == 4)
        let inner = try #require(tape.locate([.index(1), .key("b")], from: first))
        #expect(try tape.string(inner) == "x\ny")
        #expect(tape.elements(of: first).count == 4)
        #expect(tape.locate([.key("zz")]) == nil)
        #expect(tape.locate([.key("a"), .index(9)]) == nil)
    }

    @Test func numbersAreReadExactlyOrRefused() throws {
        let tape = try JSONTape(Array("[0, -0, 9223372036854775807, -9223372036854775808, 9223372036854775808, 1e2, 1.5, 1e400, 1e-400, 0e-400, 4.9e-324]".utf8))
        let e = tape.elements(of: 0)
        #expect(tape.int64(e[0]) == 0)
        #expect(tape.int64(e[2]) == .max)
        #expect(tape.int64(e[3]) == .min)
        #expect(tape.int64(e[4]) == nil)
        #expect(tape.int64(e[5]) == 100)
        #expect(tape.int64(e[6]) == nil)
        #expect(tape.double(e[6]) == 1.5)
        #expect(tape.double(e[7]) == nil, "overflow")
        #expect(tape.double(e[8]) == nil, "underflow to zero")
        #expect(tape.double(e[9]) == 0, "zero written as zero")
        #expect(tape.double(e[10]) == Double.leastNonzeroMagnitude)
        #expect(tape.double(e[1]) == 0)
    }

    @Test func escapesAndSurrogatePairsAreResolved() throws {
        let tape = try JSONTape(Array(#"["\u00e9\ud83d\udca1\"\\\/\b\f\n\r\t"]"#.utf8))
        #expect(try tape.string(1) == "é💡\"\\/\u{08}\u{0C}\n\r\t")
    }

    @Test func positionsCountLinesAndCharacters() {
        let bytes = Array("{\n  \"é\": x".utf8)
        #expect(JSONTape.position(of: bytes.count - 1, in: bytes) == (2, 8))
    }
}
