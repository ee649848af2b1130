import AsyncSupport
import BLE
import Foundation
import Synchronization
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// Why the bond store could not be read or written: the file, and what is wrong with it.
public struct BondStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// The file is not a bond store this version can read (bad JSON, a missing or bad field).
        case damaged
        /// The file can be read by other users: keys must be private (mode 0600).
        case permissions
        /// A system call failed (open, read, write, fsync, rename, lock), with its errno.
        case io(errno: Int32)
    }

    public var kind: Kind
    public var path: String
    public var detail: String

    public init(_ kind: Kind, path: String, detail: String) {
        self.kind = kind
        self.path = path
        self.detail = detail
    }

    public var description: String {
        switch kind {
        case .damaged: return "bonds file \(path) is damaged: \(detail)"
        case .permissions: return "bonds file \(path) \(detail)"
        case .io: return "bonds file \(path): \(detail)"
        }
    }
}

/// The bonds of this station, for `--bonds PATH`: what lets a later run encrypt with a device without
/// pairing again, and recognise it behind a resolvable private address.
///
/// One JSON file (docs/security.md describes it), mode 0600, keyed by the station's identity address
/// (the adapter's address the bonds were made with) and then by each peer's identity address. Every
/// change is written atomically (`AtomicFile`: a temporary file, fsync, rename, fsync of the
/// directory) under an exclusive lock on `FILE.lock`, after re-reading the file, so two runs on one
/// station sharing the file lose nothing. A `PATH` that is a symbolic link is followed: the file it
/// points to is replaced (the link stays) and the lock sits beside that file, so stations reaching one
/// shared store through different links lock the same lock. A damaged file is an error naming the field, never silently replaced. Keys are
/// never printed: neither the store nor a `Bond` shows one.
///
/// Lookups are in memory and cheap. `save` and `remove` write the file on a dedicated queue, by group
/// commit: changes that arrive while a write is under way go to disk together in the next one, so many
/// devices bonding at once share one write and its fsyncs.
public final class BondStore: Sendable, CustomStringConvertible {
    public let path: String
    /// The file itself (symbolic links followed), where it is replaced and locked.
    private let target: String
    private let contents: Mutex<Contents>
    private let writer: Mutex<Writer>
    private let io = DispatchQueue(label: "provision.bonds")
    /// Callers of `save` and `remove`, each granted the result of the write that carried its change.
    private let waiters = WaiterQueue<Void, Result<Void, BondStoreError>>()

    /// Changes waiting for the next write, and the identity of the file this store wrote last.
    private struct Writer: Sendable {
        var pending: [Pending] = []
        var written: FileStamp?
    }

    private struct Pending: Sendable {
        let edit: @Sendable (inout Book) -> Void
        let ticket: WaitTicket
    }

    /// Where the lock of the store is: beside the file itself.
    public var lockPath: String { target + ".lock" }

    /// Which version of the file is on disk: every write renames a new file over it, so another
    /// writer's version has another inode, size or time.
    private struct FileStamp: Sendable, Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var seconds: Int
        var nanoseconds: Int
    }

    /// What the file holds: bonds by station, and the station identity generated for each adapter that
    /// has no address of its own (`adapters`, by the adapter's name).
    private struct Book: Sendable {
        var stations: [UInt64: Station] = [:]
        var adapters: [String: BluetoothAddress] = [:]
    }

    /// Bonds by station, then by peer; addresses compared by their 48 bits (the type is in the bond).
    private struct Contents: Sendable {
        var stations: [UInt64: Station] = [:]
        var adapters: [String: BluetoothAddress] = [:]
        /// Resolvable private addresses already resolved (or not) per station; cleared on every change.
        var resolved: [Pair: UInt64?] = [:]

        struct Pair: Hashable { var station: UInt64; var address: UInt64 }
    }

    private struct Station: Sendable {
        var address: BluetoothAddress
        var bonds: [UInt64: Bond] = [:]
    }

    /// Opens the store at `path`: reads the file if it exists (a missing file is an empty store).
    public init(path: String) throws(BondStoreError) {
        self.path = path
        do throws(FileError) {
            target = try OutputPath.target(of: path)
        } catch {
            throw BondStoreError(.io(errno: error.errno), path: path, detail: "\(error)")
        }
        let file = try Self.read(path: path)
        contents = Mutex(Contents(stations: file?.book.stations ?? [:], adapters: file?.book.adapters ?? [:]))
        writer = Mutex(Writer(written: file?.stamp))
    }

    public var description: String {
        let count = contents.withLock { $0.stations.values.reduce(0) { $0 + $1.bonds.count } }
        return "BondStore(\(path), \(count) bond\(count == 1 ? "" : "s"))"
    }

    /// The bond `station` holds for `peer` (an identity address), if any.
    public func bond(station: BluetoothAddress, peer: BluetoothAddress) -> Bond? {
        contents.withLock { $0.stations[station.value]?.bonds[peer.value] }
    }

    /// Every bond `station` holds, ordered by peer address.
    public func bonds(station: BluetoothAddress) -> [Bond] {
        contents.withLock { c in (c.stations[station.value]?.bonds.values).map { $0.sorted { $0.peer < $1.peer } } ?? [] }
    }

    /// The bond of the device behind `address`: its identity address, or a resolvable private address
    /// that one of the stored IRKs resolves (ah, Vol 3 Part H 2.2.2). Results are cached until the
    /// store changes, so a scan seeing the same address again costs no AES.
    public func resolve(station: BluetoothAddress, address: BluetoothAddress) -> Bond? {
        contents.withLock { c -> Bond? in
            guard let entry = c.stations[station.value] else { return nil }
            if let bond = entry.bonds[address.value] { return bond }
            guard address.isResolvablePrivate else { return nil }
            let key = Contents.Pair(station: station.value, address: address.value)
            if let known = c.resolved[key] { return known.flatMap { entry.bonds[$0] } }
            let found = entry.bonds.values.first { bond in
                guard let irk = bond.peerIRK else { return false }
                return (try? address.isResolved(by: irk)) ?? false
            }
            if c.resolved.count >= 4096 { c.resolved.removeAll(keepingCapacity: true) }
            c.resolved[key] = .some(found?.peer.value)
            return found
        }
    }

    /// Stores `bond` for `station` (replacing one for the same peer), stamping `created` if unset,
    /// and writes the file.
    public func save(_ bond: Bond, station: BluetoothAddress, now: Date = Date()) async throws(BondStoreError) {
        var dated = bond
        if dated.created == nil { dated.created = now }
        let stamped = dated
        try await change { book in
            book.stations[station.value, default: Station(address: station)].bonds[stamped.peer.value] = stamped
        }
    }

    /// The station identity kept for `adapter` (an adapter without an address of its own), if any.
    public func stationIdentity(adapter: String) -> BluetoothAddress? {
        contents.withLock { $0.adapters[adapter] }
    }

    /// Keeps `identity` as the station identity of `adapter` (replacing one kept before) and writes the
    /// file: the next run on that adapter connects from the same address, and devices know it.
    public func saveStationIdentity(_ identity: BluetoothAddress, adapter: String) async throws(BondStoreError) {
        try await change { book in book.adapters[adapter] = identity }
    }

    /// Forgets the bond `station` holds for `peer` (if any) and writes the file.
    public func remove(station: BluetoothAddress, peer: BluetoothAddress) async throws(BondStoreError) {
        try await change { book in
            book.stations[station.value]?.bonds[peer.value] = nil
            if book.stations[station.value]?.bonds.isEmpty == true { book.stations[station.value] = nil }
        }
    }

    // MARK: - Writing

    private func change(_ edit: @escaping @Sendable (inout Book) -> Void) async throws(BondStoreError) {
        let ticket = waiters.enqueue()
        let first = writer.withLock { w in
            w.pending.append(Pending(edit: edit, ticket: ticket))
            return w.pending.count == 1
        }
        if first { io.async { self.writePending() } }
        // The change is written whatever happens to the caller: it waits to learn how that went.
        guard case .granted(let result) = await waiters.wait(ticket, cancellation: .isIgnored) else {
            throw BondStoreError(.io(errno: ECANCELED), path: path, detail: "the write was abandoned")
        }
        try result.get()
    }

    /// On the io queue: every change waiting goes to disk in one write, under the lock file, on top of
    /// the file as it is now (re-read unless it is still the version this store wrote last).
    private func writePending() {
        let (batch, written) = writer.withLock { w in
            defer { w.pending.removeAll() }
            return (w.pending, w.written)
        }
        guard !batch.isEmpty else { return }
        let result = Result { () throws(BondStoreError) in
            let lockPath = self.lockPath
            let lock = try Self.openFile(lockPath, O_RDWR | O_CREAT, path: path)
            defer { _ = Glibc.close(lock) }
            while flock(lock, LOCK_EX) != 0 {
                if errno == EINTR { continue }
                throw Self.ioError("locking \(lockPath)", path)
            }
            var book: Book
            if let written, try Self.stamp(path: path) == written {
                book = contents.withLock { Book(stations: $0.stations, adapters: $0.adapters) }
            } else {
                book = try Self.read(path: path)?.book ?? Book()
            }
            for change in batch { change.edit(&book) }
            try Self.writeAtomically(Self.encode(book, path: path), to: target, path: path)
            let stamp = try Self.stamp(path: path)
            writer.withLock { $0.written = stamp }
            contents.withLock { c in
                c.stations = book.stations
                c.adapters = book.adapters
                c.resolved.removeAll()
            }
        }
        waiters.withLock { _, w in for change in batch { w.resume(change.ticket, result) } }
    }

    /// The file replaced by the output-path rule, readable by its owner only.
    private static func writeAtomically(_ data: [UInt8], to target: String, path: String) throws(BondStoreError) {
        do throws(FileError) {
            try AtomicFile.write(data, to: target, mode: 0o600)
        } catch {
            throw BondStoreError(.io(errno: error.errno), path: path, detail: "\(error)")
        }
    }

    // MARK: - Reading

    /// What the file holds and its stamp, or nil when there is no file.
    private static func read(path: String) throws(BondStoreError) -> (book: Book, stamp: FileStamp)? {
        var fd: Int32
        repeat { fd = Glibc.open(path, O_RDONLY | O_CLOEXEC) } while fd < 0 && errno == EINTR
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw ioError("opening", path)
        }
        defer { _ = Glibc.close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw ioError("stat", path) }
        if info.st_mode & 0o077 != 0 {
            throw BondStoreError(.permissions, path: path,
                                 detail: "can be read by other users (mode \(String(info.st_mode & 0o777, radix: 8))); it holds keys: run chmod 600 \(path)")
        }
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw ioError("reading", path)
            }
            if n == 0 { break }
            data += buffer[0..<n]
        }
        return (try decode(data, path: path), stamp(info))
    }

    /// The stamp of the file at `path` now, or nil when there is none.
    private static func stamp(path: String) throws(BondStoreError) -> FileStamp? {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { return nil }
            throw ioError("stat", path)
        }
        return stamp(info)
    }

    private static func stamp(_ info: stat) -> FileStamp {
        FileStamp(device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
                  seconds: Int(info.st_mtim.tv_sec), nanoseconds: Int(info.st_mtim.tv_nsec))
    }

    private static func openFile(_ file: String, _ flags: Int32, path: String) throws(BondStoreError) -> Int32 {
        do throws(FileError) {
            return try FileIO.open(file, flags, mode: 0o600)
        } catch {
            throw BondStoreError(.io(errno: error.errno), path: path, detail: "opening \(file): \(String(cString: strerror(error.errno)))")
        }
    }

    private static func ioError(_ what: String, _ path: String) -> BondStoreError {
        let code = errno
        return BondStoreError(.io(errno: code), path: path, detail: "\(what): \(String(cString: strerror(code)))")
    }

    // MARK: - The file format

    /// The file: `{"format": "provision-bonds", "version": 1, "stations": [...], "adapters": [...]}`
    /// (`adapters` only when an identity was generated for one).
    private struct FileImage: Codable {
        var format: String
        var version: Int
        var stations: [StationImage]
        var adapters: [AdapterImage]?
    }

    /// The station identity generated for an adapter that has no address of its own.
    private struct AdapterImage: Codable {
        var adapter: String
        var station: String
    }

    private struct StationImage: Codable {
        var station: String
        var stationType: String
        var bonds: [BondImage]

        enum CodingKeys: String, CodingKey {
            case station, bonds
            case stationType = "station_type"
        }
    }

    /// One bond; keys are hex, most significant octet first (as the specification prints them).
    private struct BondImage: Codable {
        var peer: String
        var peerType: String
        var ltk: String
        /// Read as a wide integer and range-checked: a UInt16 out of range was "not valid JSON".
        var ediv: Int
        var rand: String
        var keySize: Int
        var authenticated: Bool
        var secureConnections: Bool
        var irk: String?
        var csrk: String?
        var created: Date?
        /// Present (true) only for a peer that uses resolvable private addresses.
        var privateAddress: Bool?

        enum CodingKeys: String, CodingKey {
            case peer, ltk, ediv, rand, authenticated, irk, csrk, created
            case privateAddress = "private_address"
            case peerType = "peer_type"
            case keySize = "key_size"
            case secureConnections = "secure_connections"
        }
    }

    static let format = "provision-bonds"
    static let version = 1

    private static func encode(_ book: Book, path: String) throws(BondStoreError) -> [UInt8] {
        let adapters = book.adapters.sorted { $0.key < $1.key }.map { AdapterImage(adapter: $0.key, station: $0.value.description) }
        let image = FileImage(format: format, version: version, stations: book.stations.values.sorted { $0.address < $1.address }.map { station in
            StationImage(station: station.address.description, stationType: typeName(station.address.kind),
                         bonds: station.bonds.values.sorted { $0.peer < $1.peer }.map { b in
                BondImage(peer: b.peer.description, peerType: typeName(b.peer.kind), ltk: hex(b.ltk.value), ediv: Int(b.ediv),
                          rand: hex64(b.rand), keySize: b.keySize, authenticated: b.authenticated,
                          secureConnections: b.secureConnections, irk: b.peerIRK.map { hex($0.value) },
                          csrk: b.peerCSRK.map { hex($0.value) }, created: b.created,
                          privateAddress: b.usesPrivateAddress ? true : nil)
            })
        }, adapters: adapters.isEmpty ? nil : adapters)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        do {
            return Array(try encoder.encode(image)) + [0x0A]
        } catch {
            throw BondStoreError(.damaged, path: path, detail: "cannot encode: \(error)")
        }
    }

    private static func decode(_ data: [UInt8], path: String) throws(BondStoreError) -> Book {
        func damaged(_ detail: String) -> BondStoreError { BondStoreError(.damaged, path: path, detail: detail) }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        // The top level must be an object: `null` or `[]` said so in Swift's decoder's words.
        if let top = try? JSONSerialization.jsonObject(with: Data(data), options: [.fragmentsAllowed]), !(top is [String: Any]) {
            throw damaged("the file holds \(Self.kind(of: top)), not a bonds store (an object with \"format\", \"version\" and \"stations\")")
        }
        let image: FileImage
        do {
            image = try decoder.decode(FileImage.self, from: Data(data))
        } catch let error as DecodingError {
            throw damaged(describe(error))
        } catch {
            throw damaged("\(error)")
        }
        guard image.format == format else { throw damaged("format is \"\(image.format)\", not \"\(format)\"") }
        guard image.version == version else { throw damaged("version \(image.version) is not supported (this tool reads version \(version))") }
        var stations: [UInt64: Station] = [:]
        for (i, s) in image.stations.enumerated() {
            let at = "stations[\(i)]"
            guard let address = address(s.station, s.stationType) else {
                throw damaged("\(at): station \"\(s.station)\" (\(s.stationType)) is not an address and type (public or random)")
            }
            guard stations[address.value] == nil else { throw damaged("\(at): station \(s.station) is listed twice") }
            var station = Station(address: address)
            for (j, b) in s.bonds.enumerated() {
                let at = "\(at).bonds[\(j)]"
                guard let peer = Self.address(b.peer, b.peerType) else {
                    throw damaged("\(at): peer \"\(b.peer)\" (\(b.peerType)) is not an address and type (public or random)")
                }
                guard station.bonds[peer.value] == nil else { throw damaged("\(at): peer \(b.peer) is listed twice") }
                guard let ltk = key(b.ltk) else { throw damaged("\(at).ltk: not 32 hex digits") }
                guard let rand = UInt64(b.rand, radix: 16), b.rand.utf8.count == 16 else { throw damaged("\(at).rand: not 16 hex digits") }
                guard (7...16).contains(b.keySize) else { throw damaged("\(at).key_size: \(b.keySize) is not 7 to 16") }
                guard let ediv = UInt16(exactly: b.ediv) else { throw damaged("\(at).ediv: \(b.ediv) is not 0 to 65535") }
                let irk = try b.irk.map { (text: String) throws(BondStoreError) -> Key128 in
                    guard let k = key(text) else { throw damaged("\(at).irk: not 32 hex digits") }
                    return k
                }
                let csrk = try b.csrk.map { (text: String) throws(BondStoreError) -> Key128 in
                    guard let k = key(text) else { throw damaged("\(at).csrk: not 32 hex digits") }
                    return k
                }
                station.bonds[peer.value] = Bond(peer: peer, ltk: ltk, ediv: ediv, rand: rand, keySize: b.keySize,
                                                 authenticated: b.authenticated, secureConnections: b.secureConnections,
                                                 peerIRK: irk, peerCSRK: csrk, created: b.created,
                                                 usesPrivateAddress: b.privateAddress ?? false)
            }
            stations[address.value] = station
        }
        var adapters: [String: BluetoothAddress] = [:]
        for (i, a) in (image.adapters ?? []).enumerated() {
            guard let address = BluetoothAddress(a.station, kind: .random) else {
                throw damaged("adapters[\(i)]: station \"\(a.station)\" is not an address")
            }
            guard adapters[a.adapter] == nil else { throw damaged("adapters[\(i)]: adapter \(a.adapter) is listed twice") }
            adapters[a.adapter] = address
        }
        return Book(stations: stations, adapters: adapters)
    }

    private static func describe(_ error: DecodingError) -> String {
        func where_(_ path: [any CodingKey]) -> String {
            path.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().drop { $0 == "." }.description
        }
        switch error {
        case .keyNotFound(let key, let context):
            let at = where_(context.codingPath)
            return "\(at.isEmpty ? "" : at + ": ")missing \"\(key.stringValue)\""
        case .typeMismatch(let type, let context):
            // In words: what belongs there (not the decoder's `Expected to decode Dictionary<String, Any>`).
            let at = where_(context.codingPath)
            return "\(at.isEmpty ? "the top level" : at) is not \(Self.expected(type))"
        case .valueNotFound(let type, let context):
            let at = where_(context.codingPath)
            return "\(at.isEmpty ? "the top level" : at) is null, not \(Self.expected(type))"
        case .dataCorrupted(let context):
            let at = where_(context.codingPath)
            guard at.isEmpty else { return "\(at): \(context.debugDescription)" }
            let why = (context.underlyingError as NSError?)?.userInfo[NSDebugDescriptionErrorKey] as? String
            return "not valid JSON" + (why.map { " (\($0))" } ?? "")
        @unknown default:
            return "\(error)"
        }
    }

    /// What a decoded type is, in words.
    private static func expected(_ type: Any.Type) -> String {
        switch "\(type)" {
        case "String": return "text"
        case "Bool": return "true or false"
        case "Int", "Int64", "UInt16", "Double": return "a number"
        case let t where t.hasPrefix("Array"): return "a list"
        default: return "an object"
        }
    }

    /// What a JSON value is, in words.
    private static func kind(of value: Any) -> String {
        switch value {
        case is NSNull: return "null"
        case is [Any]: return "a list"
        case is String: return "text"
        case is NSNumber: return "a number"
        default: return "a value"
        }
    }

    private static func typeName(_ kind: BluetoothAddress.Kind) -> String { kind == .public ? "public" : "random" }

    private static func address(_ text: String, _ type: String) -> BluetoothAddress? {
        let kind: BluetoothAddress.Kind
        switch type {
        case "public": kind = .public
        case "random": kind = .random
        default: return nil
        }
        return BluetoothAddress(text, kind: kind)
    }

    private static func hex(_ value: UInt128) -> String { value.bigEndianBytes.hexString }

    private static func hex64(_ value: UInt64) -> String {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * (7 - UInt64($0)))) }.hexString
    }

    private static func key(_ text: String) -> Key128? {
        guard text.utf8.count == 32, let raw = [UInt8](hex: text), let value = UInt128(bigEndianBytes: raw) else { return nil }
        return Key128(value)
    }
}
