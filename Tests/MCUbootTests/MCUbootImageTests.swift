import Digests
import BLE
import Testing

@testable import MCUboot

@Suite struct MCUbootImageTests {
    /// A header written out field by field (little-endian), as imgtool writes it.
    static let headerHex = "3db8f396" + "00000000" + "2000" + "0000" + "08000000" + "00000000" + "01020300" + "07000000" + "00000000"

    @Test func theHeaderReadsAndWritesEveryField() throws {
        var r = ByteReader([UInt8](hex: Self.headerHex) ?? [])
        let h = try ImageHeader(from: &r)
        #expect(h == ImageHeader(headerSize: 32, imageSize: 8, version: ImageVersion(major: 1, minor: 2, revision: 3, build: 7)))
        var w = ByteWriter()
        h.encode(into: &w)
        #expect(w.bytes.hexString == Self.headerHex)
    }

    @Test func anImageBuiltAroundABodyVerifiesAndKnowsItsTwoDigests() throws {
        let body = Array("hello, device".utf8)
        let image = try MCUbootImage.build(body: body, version: ImageVersion(major: 2, minor: 0, revision: 1, build: 5), headerSize: 512)
        #expect(image.bytes.count == 512 + body.count + 4 + 36)
        #expect(image.header.headerSize == 512 && image.header.imageSize == UInt32(body.count))
        #expect(image.version.description == "2.0.1.5")
        // The hash TLV covers header and body; the upload's sha is the whole file.
        #expect(image.hash == SHA256.hash(Array(image.bytes[..<(512 + body.count)])))
        #expect(image.fileSHA256 == SHA256.hash(image.bytes))
        #expect(try MCUbootImage(bytes: image.bytes) == image)
    }

    @Test func protectedTLVsAreCoveredByTheHash() throws {
        let image = try MCUbootImage.build(body: [1, 2, 3], version: ImageVersion(major: 1, minor: 0, revision: 0),
                                           protectedTLVs: [ImageTLV(type: .securityCounter, value: [1, 0, 0, 0])],
                                           extraTLVs: [ImageTLV(type: ImageTLVType(rawValue: 0x48A0), value: [9])])
        #expect(image.header.protectedTLVSize == 12)
        #expect(image.protectedTLVs?.tlvs == [ImageTLV(type: .securityCounter, value: [1, 0, 0, 0])])
        #expect(image.tlvs.tlvs.map(\.type) == [.sha256, ImageTLVType(rawValue: 0x48A0)])
        #expect(image.hash == SHA256.hash(Array(image.bytes[..<(32 + 3 + 12)])))
        // A flipped bit in the protected area breaks the hash.
        var bytes = image.bytes
        bytes[32 + 3 + 8] ^= 1
        #expect(throws: ImageError.self) { try MCUbootImage(bytes: bytes) }
    }

    @Test func aDamagedImageIsRefusedWithBothDigests() throws {
        let image = try MCUbootImage.build(body: Array(repeating: 0xAB, count: 100), version: ImageVersion(major: 1, minor: 0, revision: 0))
        var bytes = image.bytes
        bytes[40] ^= 0xFF
        do {
            _ = try MCUbootImage(bytes: bytes)
            Issue.record("a damaged image was accepted")
        } catch let ImageError.hashMismatch(expected, computed) {
            #expect(expected == image.hash)
            #expect(computed == SHA256.hash(Array(bytes[..<132])))
        }
    }

    @Test func filesThatAreNotWholeMCUbootImagesAreRefused() throws {
        let good = try MCUbootImage.build(body: [1, 2, 3, 4], version: ImageVersion(major: 1, minor: 0, revision: 0)).bytes
        let cases: [(String, [UInt8], String)] = [
            ("empty", [], "not an MCUboot image: the file is too short for an MCUboot header"),
            ("text", Array("#!/bin/sh\necho firmware\n".utf8), "not an MCUboot image: its first bytes are not the MCUboot magic 3db8f396 (found 23212f62)"),
            ("short header", Array(good.prefix(20)), "not an MCUboot image: the file is too short"),
            ("no TLVs", Array(good.prefix(36)), "malformed MCUboot image: the TLV area is missing"),
            ("cut TLV", Array(good.dropLast(3)), "malformed MCUboot image: the TLV area at byte 36 claims 40 bytes; 37 are there"),
            ("trailing", good + [0], "malformed MCUboot image: 1 unexpected byte(s) after the TLV area"),
            ("body too long", Self.patch(good, at: 12, [0xFF, 0xFF, 0, 0]), "malformed MCUboot image: header and body take 65567 bytes"),
            ("header too small", Self.patch(good, at: 8, [4, 0]), "malformed MCUboot image: header size 4 is smaller"),
            ("wrong TLV magic", Self.patch(good, at: 36, [0x08, 0x69]), "malformed MCUboot image: the TLV area at byte 36 starts with 6908, not 6907"),
            ("TLV past the end", Self.patch(good, at: 42, [0xFF, 0]), "malformed MCUboot image: TLV SHA256 at byte 40 runs past the end"),
        ]
        for (name, bytes, message) in cases {
            do {
                _ = try MCUbootImage(bytes: bytes)
                Issue.record("\(name): accepted")
            } catch {
                #expect(error.description.hasPrefix(message), "\(name): \(error)")
            }
        }
        // No SHA-256 TLV at all.
        var noHash = Array(good.prefix(36))
        noHash += [0x07, 0x69, 0x09, 0x00, 0x50, 0x00, 0x01, 0x00, 0x01]
        #expect(throws: ImageError.noHash) { try MCUbootImage(bytes: noHash) }
    }

    @Test func versionsReadTheirSpellingsAndCompareAsMCUbootDoes() {
        #expect(ImageVersion("1.2.3") == ImageVersion(major: 1, minor: 2, revision: 3))
        #expect(ImageVersion("1.2.3.4") == ImageVersion(major: 1, minor: 2, revision: 3, build: 4))
        #expect(ImageVersion("1.2.3+4") == ImageVersion(major: 1, minor: 2, revision: 3, build: 4))
        #expect(ImageVersion("2") == ImageVersion(major: 2, minor: 0, revision: 0))
        #expect(ImageVersion("256.0.0") == nil && ImageVersion("1.x") == nil && ImageVersion("1.2.3.4+5") == nil && ImageVersion("") == nil)
        #expect(ImageVersion(major: 1, minor: 2, revision: 3, build: 9) < ImageVersion(major: 1, minor: 2, revision: 4))
        #expect(ImageVersion(major: 1, minor: 2, revision: 3, build: 1) < ImageVersion(major: 1, minor: 2, revision: 3, build: 2))
        #expect(ImageVersion(major: 1, minor: 3, revision: 0).isNewerIgnoringBuild(than: ImageVersion(major: 1, minor: 2, revision: 9, build: 99)))
        #expect(!ImageVersion(major: 1, minor: 2, revision: 3, build: 5).isNewerIgnoringBuild(than: ImageVersion(major: 1, minor: 2, revision: 3)))
        #expect(ImageVersion(major: 1, minor: 2, revision: 3).description == "1.2.3")
    }

    static func patch(_ bytes: [UInt8], at offset: Int, _ values: [UInt8]) -> [UInt8] {
        var b = bytes
        for (i, v) in values.enumerated() { b[offset + i] = v }
        return b
    }
}
