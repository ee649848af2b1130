import BLE
@testable import BLESecurity
import Foundation
import Testing

/// A fresh directory for one test, removed afterwards.
final class ScratchDirectory {
    let path: String
    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("bonds-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
    func file(_ name: String) -> String { path + "/" + name }
}

@Suite struct BondStoreTests {
    static let station = BluetoothAddress("00:1A:7D:DA:71:13", kind: .public) ?? BluetoothAddress(value: 1)
    static let otherStation = BluetoothAddress("00:1A:7D:DA:71:14", kind: .public) ?? BluetoothAddress(value: 2)
    static let ltkHex = "c0ffee00112233445566778899aabbcc"
    static let created = Date(timeIntervalSince1970: 1_790_000_000)

    static func scBond() throws -> Bond {
        Bond(peer: try #require(BluetoothAddress("D4:CA:6E:01:02:03", kind: .random)), ltk: Key128(try u128(ltkHex)),
             keySize: 16, authenticated: true, secureConnections: true,
             peerIRK: Key128(try u128("ec0234a3 57c8ad05 341010a6 0a397d9b")), created: created)
    }

    static func legacyBond() throws -> Bond {
        Bond(peer: try #require(BluetoothAddress("00:1B:DC:07:31:AE", kind: .public)), ltk: Key128(0x1234), ediv: 0xBEEF,
             rand: 0x0102_0304_0506_0708, keySize: 7, authenticated: false, secureConnections: false,
             peerCSRK: Key128(0x99), created: nil)
    }

    @Test func savedBondsComeBackWhenTheStoreIsOpenedAgain() async throws {
        let dir = try ScratchDirectory()
        let store = try BondStore(path: dir.file("bonds.json"))
        let sc = try Self.scBond(), legacy = try Self.legacyBond()
        try await store.save(sc, station: Self.station)
        try await store.save(legacy, station: Self.station, now: Self.created)
        try await store.save(sc, station: Self.otherStation)
        let reopened = try BondStore(path: dir.file("bonds.json"))
        #expect(reopened.bond(station: Self.station, peer: sc.peer) == sc)
        var stamped = legacy
        stamped.created = Self.created
        #expect(reopened.bond(station: Self.station, peer: legacy.peer) == stamped)
        #expect(reopened.bonds(station: Self.station) == [stamped, sc])
        #expect(reopened.bonds(station: Self.otherStation) == [sc])
        #expect(reopened.bond(station: try #require(BluetoothAddress("00:00:00:00:00:01")), peer: sc.peer) == nil)
    }

    @Test func theFileIsPrivateJSONWithKeysMostSignificantOctetFirst() async throws {
        let dir = try ScratchDirectory()
        let path = dir.file("bonds.json")
        let store = try BondStore(path: path)
        try await store.save(try Self.scBond(), station: Self.station)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["bonds.json", "bonds.json.lock"])
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains("\"format\" : \"provision-bonds\""))
        #expect(text.contains("\"station\" : \"00:1A:7D:DA:71:13\""))
        #expect(text.contains("\"ltk\" : \"\(Self.ltkHex)\""))
        #expect(text.contains("\"irk\" : \"ec0234a357c8ad05341010a60a397d9b\""))
        #expect(text.contains("\"rand\" : \"0000000000000000\""))
        #expect(text.contains("\"created\" : \"2026-09-21T"))
        #expect(!text.contains("csrk"))
    }

    @Test func aMissingFileIsAnEmptyStoreAndAMissingDirectoryAnError() async throws {
        let dir = try ScratchDirectory()
        let store = try BondStore(path: dir.file("none.json"))
        #expect(store.bonds(station: Self.station).isEmpty)
        let nowhere = try BondStore(path: dir.file("missing/bonds.json"))
        await #expect(throws: BondStoreError.self) { try await nowhere.save(try Self.scBond(), station: Self.station) }
        #expect(nowhere.bonds(station: Self.station).isEmpty)
    }

    @Test func aFileOthersCanReadIsRefusedWithTheFix() throws {
        let dir = try ScratchDirectory()
        let path = dir.file("bonds.json")
        try Data("{}".utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        do {
            _ = try BondStore(path: path)
            Issue.record("a world-readable bonds file was accepted")
        } catch {
            #expect(error.kind == .permissions)
            #expect(error.description.contains("mode 644") && error.description.contains("chmod 600 \(path)"))
        }
    }

    static let damaged: [(String, String)] = [
        ("not json", "not valid JSON"),
        (#"{"format": "other", "version": 1, "stations": []}"#, "format is \"other\""),
        (#"{"format": "provision-bonds", "version": 2, "stations": []}"#, "version 2 is not supported"),
        (#"{"format": "provision-bonds", "version": 1}"#, "missing \"stations\""),
        (#"{"format": "provision-bonds", "version": 1, "stations": [{"station": "00:1A:7D:DA:71:13", "station_type": "public", "bonds": [{"peer": "00:1B:DC:07:31:AE", "peer_type": "public", "ediv": 0, "rand": "0000000000000000", "key_size": 16, "authenticated": true, "secure_connections": true}]}]}"#,
         "stations[0].bonds[0]: missing \"ltk\""),
        (#"{"format": "provision-bonds", "version": 1, "stations": [{"station": "00:1A:7D:DA:71:13", "station_type": "public", "bonds": [{"peer": "00:1B:DC:07:31:AE", "peer_type": "public", "ltk": "123", "ediv": 0, "rand": "0000000000000000", "key_size": 16, "authenticated": true, "secure_connections": true}]}]}"#,
         "stations[0].bonds[0].ltk: not 32 hex digits"),
        (#"{"format": "provision-bonds", "version": 1, "stations": [{"station": "00:1A:7D:DA:71:13", "station_type": "public", "bonds": [{"peer": "00:1B:DC:07:31:AE", "peer_type": "public", "ltk": "c0ffee00112233445566778899aabbcc", "ediv": 0, "rand": "0000000000000000", "key_size": 3, "authenticated": true, "secure_connections": true}]}]}"#,
         "stations[0].bonds[0].key_size: 3 is not 7 to 16"),
        (#"{"format": "provision-bonds", "version": 1, "stations": [{"station": "00:1A:7D:DA:71:13", "station_type": "sideways", "bonds": []}]}"#,
         "stations[0]: station \"00:1A:7D:DA:71:13\" (sideways) is not an address"),
        (#"{"format": "provision-bonds", "version": 1, "stations": [{"station": "00:1A:7D:DA:71:13", "station_type": "public", "bonds": [{"peer": "00:1B:DC:07:31:AE", "peer_type": "public", "ltk": "c0ffee00112233445566778899aabbcc", "ediv": "x", "rand": "0000000000000000", "key_size": 16, "authenticated": true, "secure_connections": true}]}]}"#,
         "stations[0].bonds[0].ediv is not a number"),
        // EDIV is 16 bits: -1 and 70000 are out of range, not "not valid JSON".
        (#"{"format": "provision-bonds", "version": 1, "stations": [{"station": "00:1A:7D:DA:71:13", "station_type": "public", "bonds": [{"peer": "00:1B:DC:07:31:AE", "peer_type": "public", "ltk": "c0ffee00112233445566778899aabbcc", "ediv": -1, "rand": "0000000000000000", "key_size": 16, "authenticated": true, "secure_connections": true}]}]}"#,
         "stations[0].bonds[0].ediv: -1 is not 0 to 65535"),
        (#"{"format": "provision-bonds", "version": 1, "stations": [{"station": "00:1A:7D:DA:71:13", "station_type": "public", "bonds": [{"peer": "00:1B:DC:07:31:AE", "peer_type": "public", "ltk": "c0ffee00112233445566778899aabbcc", "ediv": 70000, "rand": "0000000000000000", "key_size": 16, "authenticated": true, "secure_connections": true}]}]}"#,
         "stations[0].bonds[0].ediv: 70000 is not 0 to 65535"),
        // The top level, in words.
        ("null", "the file holds null, not a bonds store"),
        ("[]", "the file holds a list, not a bonds store"),
        ("7", "the file holds a number, not a bonds store"),
        (#"{"format": "provision-bonds", "version": 1, "stations": null}"#, "stations is null, not a list"),
        (#"{"format": "provision-bonds", "version": 1, "stations": {}}"#, "stations is not a list"),
    ]

    @Test(arguments: damaged)
    func aDamagedFileIsAClearError(_ content: String, _ expected: String) throws {
        let dir = try ScratchDirectory()
        let path = dir.file("bonds.json")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(content.utf8), attributes: [.posixPermissions: 0o600]))
        do {
            _ = try BondStore(path: path)
            Issue.record("damaged file accepted: \(content)")
        } catch {
            #expect(error.kind == .damaged)
            #expect(error.description.hasPrefix("bonds file \(path) is damaged: "))
            #expect(error.description.contains(expected), "\(error)")
        }
    }

    @Test func aDamagedFileIsNotOverwrittenBySave() async throws {
        let dir = try ScratchDirectory()
        let path = dir.file("bonds.json")
        let store = try BondStore(path: path)
        #expect(FileManager.default.createFile(atPath: path, contents: Data("garbage".utf8), attributes: [.posixPermissions: 0o600]))
        await #expect(throws: BondStoreError.self) { try await store.save(try Self.scBond(), station: Self.station) }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "garbage")
    }

    @Test func twoStoresOnOneFileKeepEachOthersBonds() async throws {
        let dir = try ScratchDirectory()
        let path = dir.file("bonds.json")
        let first = try BondStore(path: path), second = try BondStore(path: path)
        try await first.save(try Self.scBond(), station: Self.station)
        try await second.save(try Self.legacyBond(), station: Self.station, now: Self.created)
        let reopened = try BondStore(path: path)
        #expect(reopened.bonds(station: Self.station).count == 2)
        #expect(second.bonds(station: Self.station).count == 2)
    }

    @Test func manyDevicesBondingAtOnceAreAllKept() async throws {
        let dir = try ScratchDirectory()
        let store = try BondStore(path: dir.file("bonds.json"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<50 {
                group.addTask {
                    let bond = Bond(peer: BluetoothAddress(value: 0xC0_0000_0000_00 + UInt64(i), kind: .random), ltk: Key128(UInt128(i)),
                                    keySize: 16, authenticated: false, secureConnections: true)
                    try await store.save(bond, station: Self.station)
                }
            }
            try await group.waitForAll()
        }
        #expect(store.bonds(station: Self.station).count == 50)
        let reopened = try BondStore(path: dir.file("bonds.json"))
        #expect(Set(reopened.bonds(station: Self.station).map(\.ltk.value)) == Set((0..<50).map { UInt128($0) }))
    }

    @Test func aPeerThatUsesPrivateAddressesIsRememberedAsSuch() async throws {
        let dir = try ScratchDirectory()
        let store = try BondStore(path: dir.file("bonds.json"))
        var privateBond = try Self.scBond()
        privateBond.usesPrivateAddress = true
        try await store.save(privateBond, station: Self.station)
        try await store.save(try Self.legacyBond(), station: Self.station)
        let text = try String(contentsOfFile: dir.file("bonds.json"), encoding: .utf8)
        // Written only for the peer that uses them.
        #expect(text.components(separatedBy: "\"private_address\" : true").count == 2)
        let reopened = try BondStore(path: dir.file("bonds.json"))
        #expect(reopened.bond(station: Self.station, peer: privateBond.peer)?.usesPrivateAddress == true)
        #expect(reopened.bond(station: Self.station, peer: try Self.legacyBond().peer)?.usesPrivateAddress == false)
    }

    @Test func removingABondForgetsIt() async throws {
        let dir = try ScratchDirectory()
        let store = try BondStore(path: dir.file("bonds.json"))
        let bond = try Self.scBond()
        try await store.save(bond, station: Self.station)
        try await store.remove(station: Self.station, peer: bond.peer)
        #expect(store.bond(station: Self.station, peer: bond.peer) == nil)
        #expect(try BondStore(path: dir.file("bonds.json")).bonds(station: Self.station).isEmpty)
    }

    @Test func aResolvablePrivateAddressIsResolvedWithTheStoredIRK() async throws {
        let dir = try ScratchDirectory()
        let store = try BondStore(path: dir.file("bonds.json"))
        let bond = try Self.scBond()
        try await store.save(bond, station: Self.station)
        // Vol 3 Part H D.7: IRK ec0234a3…, prand 0x708194 → hash 0x0dfbaa.
        let rpa = try #require(BluetoothAddress("70:81:94:0D:FB:AA", kind: .random))
        #expect(rpa.isResolvablePrivate && !rpa.isIdentity)
        #expect(store.resolve(station: Self.station, address: rpa) == bond)
        #expect(store.resolve(station: Self.station, address: rpa) == bond) // cached
        #expect(store.resolve(station: Self.station, address: bond.peer) == bond)
        let other = try BluetoothAddress.resolvablePrivate(irk: Key128(1), prand: 0x123456)
        #expect(other.isResolvablePrivate && store.resolve(station: Self.station, address: other) == nil)
        #expect(store.resolve(station: Self.otherStation, address: rpa) == nil)
        let staticRandom = try #require(BluetoothAddress("F0:01:02:03:04:05", kind: .random))
        #expect(staticRandom.isStaticRandom && store.resolve(station: Self.station, address: staticRandom) == nil)
        // A removed bond no longer resolves, cache or not.
        try await store.remove(station: Self.station, peer: bond.peer)
        #expect(store.resolve(station: Self.station, address: rpa) == nil)
    }

    @Test func anAddressMadeFromAnIRKResolvesWithIt() throws {
        let irk = Key128(0x0F0E_0D0C_0B0A_0908_0706_0504_0302_0100)
        let rpa = try BluetoothAddress.resolvablePrivate(irk: irk, prand: 0xFF_FFFF)
        #expect(rpa.isResolvablePrivate)
        #expect(try rpa.isResolved(by: irk))
        #expect(try !rpa.isResolved(by: Key128(irk.value ^ 1)))
    }

    @Test func printingABondOrTheStoreShowsNoKeyBytes() async throws {
        let dir = try ScratchDirectory()
        let store = try BondStore(path: dir.file("bonds.json"))
        let bond = try Self.scBond()
        try await store.save(bond, station: Self.station)
        var dumped = ""
        dump(bond, to: &dumped)
        let texts = ["\(bond)", String(reflecting: bond), dumped, "\(store)", "\([bond])", "\(Optional(bond) as Any)",
                     "\(bond.encryptionKey)", String(reflecting: bond.encryptionKey), "\(bond.ltk)"]
        for text in texts {
            #expect(!text.lowercased().contains("c0ffee") && !text.contains("\(bond.ltk.value)"), "\(text)")
            #expect(!text.lowercased().contains("ec0234a3"), "\(text)")
        }
        #expect("\(bond)" == "Bond(D4:CA:6E:01:02:03 random, authenticated, LE Secure Connections, 16-octet key, IRK, keys redacted)")
        #expect("\(store)" == "BondStore(\(dir.file("bonds.json")), 1 bond)")
    }
}
