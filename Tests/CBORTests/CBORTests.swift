import Support
import Testing

@testable import CBOR

private func hex(_ text: String) -> [UInt8] {
    var out: [UInt8] = []
    var high: UInt8?
    for c in text.utf8 {
        let v: UInt8
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): v = c - UInt8(ascii: "a") + 10
        default: continue
        }
        if let h = high {
            out.append(h << 4 | v)
            high = nil
        } else {
            high = v
        }
    }
    return out
}

private func hexString(_ bytes: [UInt8]) -> String {
    bytes.map { b in
        let s = String(b, radix: 16)
        return s.count == 1 ? "0" + s : s
    }.joined()
}

@Suite struct CBORTests {
    /// RFC 8949 Appendix A: values and their preferred encodings, both ways.
    static let goldens: [(CBOR, String)] = [
        (0, "00"), (1, "01"), (10, "0a"), (23, "17"), (24, "1818"), (25, "1819"), (100, "1864"), (1000, "1903e8"),
        (1_000_000, "1a000f4240"), (1_000_000_000_000, "1b000000e8d4a51000"),
        (.unsigned(18_446_744_073_709_551_615), "1bffffffffffffffff"), (.negative(18_446_744_073_709_551_615), "3bffffffffffffffff"),
        (-1, "20"), (-10, "29"), (-100, "3863"), (-1000, "3903e7"),
        (false, "f4"), (true, "f5"), (.null, "f6"), (.undefined, "f7"),
        (.tagged(1, 1_363_896_240), "c11a514b67b0"), (.tagged(6, 0), "d80600"), (.tagged(20, 0), "d81400"), (.tagged(21, 0), "d500"), (.tagged(32, "http://www.example.com"), "d82076687474703a2f2f7777772e6578616d706c652e636f6d"),
        (.bytes([]), "40"), (.bytes([1, 2, 3, 4]), "4401020304"),
        ("", "60"), ("a", "6161"), ("IETF", "6449455446"), ("\"\\", "62225c"), ("\u{00fc}", "62c3bc"), ("\u{6c34}", "63e6b0b4"),
        ([], "80"), ([1, 2, 3], "83010203"), ([1, [2, 3], [4, 5]], "8301820203820405"),
        ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25],
         "98190102030405060708090a0b0c0d0e0f101112131415161718181819"),
        ([:], "a0"), ([1: 2, 3: 4], "a201020304"), (["a": 1, "b": [2, 3]], "a26161016162820203"),
        (["a", ["b": "c"]], "826161a161626163"),
        (.float(1.1), "fb3ff199999999999a"), (.float(-4.1), "fbc010666666666666"),
    ]

    @Test func rfc8949ExamplesEncodeToTheirPreferredBytes() {
        for (value, expected) in Self.goldens {
            #expect(hexString(value.encoded) == expected, "\(value)")
            #expect(value.encodedSize == value.encoded.count, "\(value)")
        }
    }

    @Test func rfc8949ExamplesDecodeToTheirValues() throws {
        for (value, bytes) in Self.goldens {
            #expect(try CBORDecoder().decode(hex(bytes)) == value, "\(bytes)")
        }
    }

    @Test func halfAndSinglePrecisionFloatsAndIndefiniteItemsDecode() throws {
        let d = CBORDecoder()
        #expect(try d.decode(hex("f93c00")) == .float(1.0))
        #expect(try d.decode(hex("f93e00")) == .float(1.5))
        #expect(try d.decode(hex("f97bff")) == .float(65504.0))
        #expect(try d.decode(hex("fa47c35000")) == .float(100000.0))
        #expect(try d.decode(hex("f97c00")) == .float(.infinity))
        #expect(try d.decode(hex("5f42010243030405ff")) == .bytes([1, 2, 3, 4, 5]))
        #expect(try d.decode(hex("7f657374726561646d696e67ff")) == "streaming")
        #expect(try d.decode(hex("9fff")) == [])
        #expect(try d.decode(hex("9f018202039f0405ffff")) == [1, [2, 3], [4, 5]])
        #expect(try d.decode(hex("83018202039f0405ff")) == [1, [2, 3], [4, 5]])
        #expect(try d.decode(hex("bf61610161629f0203ffff")) == ["a": 1, "b": [2, 3]])
        #expect(try d.decode(hex("bf6346756ef563416d7421ff")) == ["Fun": true, "Amt": -2])
    }

    @Test func mapsKeepTheirOrderAndTextKeysAreLookedUp() throws {
        let v = CBOR.textMap(["off": 0, "data": .bytes([0xAB]), "len": 4096])
        #expect(hexString(v.encoded) == "a3636f666600646461746141ab636c656e191000")
        let back = try CBORDecoder().decode(v.encoded)
        #expect(back == v)
        #expect(back["len"]?.unsignedValue == 4096)
        #expect(back["data"]?.bytesValue == [0xAB])
        #expect(back["missing"] == nil)
        #expect(CBOR.int(-5).intValue == -5)
        #expect(CBOR.negative(UInt64.max).intValue == nil)
    }

    @Test func diagnosticNotationShowsEveryKind() {
        let v: CBOR = ["d": .bytes([0, 0xff]), "n": -3, "t": .tagged(2, "x\n"), "f": .float(1.5), "z": [.null, .undefined, true]]
        #expect(v.description == #"{"d": h'00ff', "n": -3, "t": 2("x\n"), "f": 1.5, "z": [null, undefined, true]}"#)
    }

    // MARK: - Hostile documents

    private func failure(_ bytes: String, limits: CBORDecoder.Limits = .init()) -> CBORError? {
        do {
            _ = try CBORDecoder(limits: limits).decode(hex(bytes))
            return nil
        } catch {
            return error
        }
    }

    @Test func truncatedDocumentsAreRefusedWithTheirOffset() {
        #expect(failure("") == CBORError(.truncated, at: 0))
        #expect(failure("19") == CBORError(.truncated, at: 0))
        #expect(failure("1903") == CBORError(.truncated, at: 0))
        #expect(failure("44010203") == CBORError(.truncated, at: 0))
        #expect(failure("821903") == CBORError(.truncated, at: 1))
        #expect(failure("a16161") == CBORError(.truncated, at: 3))
        #expect(failure("9f01") == CBORError(.truncated, at: 2))
        #expect(failure("c1") == CBORError(.truncated, at: 1))
    }

    @Test func trailingBytesReservedBytesAndStrayBreaksAreRefused() {
        #expect(failure("0000") == CBORError(.trailingBytes(count: 1), at: 1))
        #expect(failure("1c") == CBORError(.malformed, at: 0))
        #expect(failure("f0") == CBORError(.malformed, at: 0))
        #expect(failure("f818") == CBORError(.malformed, at: 0))
        #expect(failure("ff") == CBORError(.unexpectedBreak, at: 0))
        #expect(failure("8201ff") == CBORError(.unexpectedBreak, at: 2))
        // Two items cannot follow in one byte: refused before the break is read.
        #expect(failure("82ff") == CBORError(.countExceedsInput(declared: 2), at: 1))
        #expect(failure("bf6161ff") == CBORError(.unexpectedBreak, at: 3))
    }

    @Test func indefiniteStringsHoldOnlyTheirOwnChunks() {
        #expect(failure("5f6161ff")?.kind == .badStringChunk)
        #expect(failure("5f01ff")?.kind == .badStringChunk)
        #expect(failure("5f5fffff")?.kind == .badStringChunk)
        #expect(failure("7f4161ff")?.kind == .badStringChunk)
        #expect(failure("7f61ff61ffff")?.kind == .invalidUTF8)
    }

    @Test func invalidUTF8AndDuplicateKeysAreRefused() {
        #expect(failure("62c328") == CBORError(.invalidUTF8, at: 0))
        #expect(failure("61ff") == CBORError(.invalidUTF8, at: 0))
        #expect(failure("a2616101616102") == CBORError(.duplicateKey, at: 4))
        #expect(failure("a201010100")?.kind == .duplicateKey)
    }

    @Test func aDeclaredCountLargerThanTheInputIsRefusedBeforeAnythingIsReserved() {
        #expect(failure("9affffffff00") == CBORError(.countExceedsInput(declared: 0xFFFF_FFFF), at: 5))
        #expect(failure("9bffffffffffffffff00")?.kind == .countExceedsInput(declared: UInt64.max))
        #expect(failure("bb7fffffffffffffff00")?.kind == .countExceedsInput(declared: UInt64(Int64.max)))
        #expect(failure("a30102")?.kind == .countExceedsInput(declared: 3))
        #expect(failure("5affffffff00") == CBORError(.truncated, at: 0))
    }

    @Test func depthItemsAndSizeAreBounded() {
        let deep = String(repeating: "81", count: 17) + "00"
        #expect(failure(deep) == CBORError(.tooDeep(limit: 16), at: 16))
        #expect(failure(String(repeating: "81", count: 16) + "00") == nil)
        let tags = String(repeating: "c1", count: 40) + "00"
        #expect(failure(tags)?.kind == .tooDeep(limit: 16))
        let many = "98ff" + String(repeating: "00", count: 255)
        #expect(failure(many, limits: .init(maxItems: 100))?.kind == .tooManyItems(limit: 100))
        #expect(failure("00", limits: .init(maxBytes: 0)) == CBORError(.tooLarge(size: 1, limit: 0), at: 0))
        // A million nested indefinite arrays: refused at the depth limit, without recursion.
        let million = [UInt8](repeating: 0x9F, count: 1_000_000)
        #expect(throws: CBORError(.tooDeep(limit: 16), at: 16)) { try CBORDecoder(limits: .init(maxBytes: 2 << 20)).decode(million) }
    }

    @Test func randomValuesRoundTrip() throws {
        var g = SplitMix64(seed: 0xCB0B)
        for _ in 0..<2_000 {
            let v = Self.randomValue(&g, depth: 0)
            #expect(try CBORDecoder().decode(v.encoded) == v, "\(v)")
        }
    }

    /// 100,000 hostile documents, random and mutated from valid ones: each is decoded or refused with a
    /// `CBORError`; none traps, and the whole run is bounded by the limits (no hang).
    @Test func hundredThousandHostileDocumentsNeverTrap() {
        var g = SplitMix64(seed: 0x0BAD_CB0B)
        let seeds = Self.goldens.map { $0.0.encoded } + [hex("bf61610161629f0203ffff"), hex("5f42010243030405ff")]
        var decoded = 0, refused = 0
        for i in 0..<100_000 {
            var bytes: [UInt8]
            if i % 3 == 0 {
                bytes = (0..<Int(g.next() % 40)).map { _ in UInt8(truncatingIfNeeded: g.next()) }
            } else {
                bytes = i % 3 == 1 ? seeds[Int(g.next() % UInt64(seeds.count))] : Self.randomValue(&g, depth: 0).encoded
                for _ in 0..<(1 + Int(g.next() % 4)) where !bytes.isEmpty {
                    let at = Int(g.next() % UInt64(bytes.count))
                    switch g.next() % 4 {
                    case 0: bytes[at] = UInt8(truncatingIfNeeded: g.next())
                    case 1: bytes.removeSubrange(at...)
                    case 2: bytes.insert(UInt8(truncatingIfNeeded: g.next()), at: at)
                    default: bytes[at] ^= 1 << UInt8(g.next() % 8)
                    }
                }
            }
            do {
                let v = try CBORDecoder(limits: .init(maxBytes: 4096, maxDepth: 8, maxItems: 512)).decode(bytes)
                // What decodes re-encodes and decodes to itself.
                #expect(try CBORDecoder().decode(v.encoded).encoded == v.encoded)
                decoded += 1
            } catch {
                refused += 1
            }
        }
        #expect(decoded + refused == 100_000)
        #expect(decoded > 1_000 && refused > 1_000)
    }

    static func randomValue(_ g: inout SplitMix64, depth: Int) -> CBOR {
        let pick = g.next() % (depth >= 3 ? 7 : 10)
        switch pick {
        case 0: return .unsigned(g.next() >> (g.next() % 64))
        case 1: return .negative(g.next() >> (g.next() % 64))
        case 2: return .bytes((0..<Int(g.next() % 20)).map { _ in UInt8(truncatingIfNeeded: g.next()) })
        case 3: return .text(String(decoding: (0..<Int(g.next() % 12)).map { _ in UInt8(0x61 + g.next() % 26) }, as: UTF8.self) + (g.next() % 4 == 0 ? "é水" : ""))
        case 4: return .bool(g.next() % 2 == 0)
        case 5: return g.next() % 2 == 0 ? .null : .undefined
        case 6: return .float(Double(Int64(truncatingIfNeeded: g.next() % 100_000)) / 8)
        case 7: return .array((0..<Int(g.next() % 5)).map { _ in randomValue(&g, depth: depth + 1) })
        case 8:
            var pairs: [CBOR.Pair] = []
            var keys = Set<CBOR>()
            for k in 0..<Int(g.next() % 5) {
                let key: CBOR = g.next() % 2 == 0 ? .text("k\(k)") : .unsigned(UInt64(k))
                if keys.insert(key).inserted { pairs.append(CBOR.Pair(key, randomValue(&g, depth: depth + 1))) }
            }
            return .map(pairs)
        default: return .tagged(g.next() % 1000, randomValue(&g, depth: depth + 1))
        }
    }
}
