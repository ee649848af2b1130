import Foundation
import Support
import Synchronization

/// Encodes the engine's records (journal lines, the report, events) as JSON from their `Codable`
/// definitions — the one definition of every key — producing the bytes `EngineJSON.encoder` writes
/// (snake_case keys, sorted, slashes unescaped, nil optionals left out, `JSONEncoder`'s number and
/// pretty-print formats) at a fraction of its cost: no intermediate tree, one growing byte buffer.
/// `RecordEncoderTests` checks every record type against `JSONEncoder`, byte for byte.
///
/// How it works: a value's bytes are final as soon as its `encode(to:)` returns. A keyed container
/// writes each member (`"key":value`) as it comes and, when its value is done, puts the members in
/// key order (`JSONEncoder`'s `.sortedKeys`) in place. A type whose `CodingKeys` are declared in
/// sorted order can say so (`SortedRecordKeys`): its members are written in final form at once, which
/// lets `stream` hand out finished bytes while a large value (the report) is still being written.
///
/// Limitation (not met by any record here): a nested container (`nestedContainer`,
/// `nestedUnkeyedContainer`, `superEncoder`) must be filled before its parent is written to again.
package enum RecordEncoder {
    /// One compact JSON value (no newline).
    package static func compact<T: Encodable>(_ value: T) -> [UInt8] {
        let sink = Sink(pretty: false, capacity: 1024)
        sink.encode(value, depth: 0)
        sink.pool = []
        return sink.out.pointee.bytes
    }

    /// One pretty-printed JSON value (no final newline).
    package static func pretty<T: Encodable>(_ value: T) -> [UInt8] {
        let sink = Sink(pretty: true, capacity: 4096)
        sink.encode(value, depth: 0)
        sink.pool = []
        return sink.out.pointee.bytes
    }

    /// One value as it is written at `depth` of a document (pretty or compact): the bytes an
    /// `EncodedJSON` of it puts back in place, the same as if the document had been written whole.
    static func element<T: Encodable>(_ value: T, pretty: Bool, depth: Int) -> [UInt8] {
        let sink = Sink(pretty: pretty, capacity: 4096)
        sink.encode(value, depth: depth)
        sink.pool = []
        return sink.out.pointee.bytes
    }

    /// The pretty form, at `depth` of a document, of a value's compact JSON (as `compact` writes it: no
    /// whitespace outside strings): the bytes `element(value, pretty: true, depth:)` writes, made by
    /// re-indenting instead of encoding again (a device's record is encoded once, for the journal, and
    /// re-indented for the report). `RecordEncoderTests` checks it against `element`.
    static func prettify(_ compact: ArraySlice<UInt8>, depth base: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(compact.count * 2)
        var depth = base
        var i = compact.startIndex
        let end = compact.endIndex
        while i < end {
            let c = compact[i]
            switch c {
            case UInt8(ascii: "\""):
                // A string, copied as it is up to its closing quote (a backslash escapes the next byte).
                var j = i + 1
                while j < end, compact[j] != UInt8(ascii: "\"") { j += compact[j] == UInt8(ascii: "\\") ? 2 : 1 }
                let stop = min(j + 1, end)
                out.append(contentsOf: compact[i..<stop])
                i = stop
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                let close = c == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                if i + 1 < end, compact[i + 1] == close {
                    // Empty: an empty line between the brackets, as `JSONEncoder` writes it.
                    out.append(c)
                    out.append(0x0A)
                    JSONBytes.newline(depth, into: &out)
                    out.append(close)
                    i += 2
                    continue
                }
                out.append(c)
                depth += 1
                JSONBytes.newline(depth, into: &out)
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                JSONBytes.newline(depth, into: &out)
                out.append(c)
            case UInt8(ascii: ","):
                out.append(c)
                JSONBytes.newline(depth, into: &out)
            case UInt8(ascii: ":"):
                JSONBytes.colon(pretty: true, into: &out)
            default:
                out.append(c)
            }
            i += 1
        }
        return out
    }

    /// Encodes `value`, handing finished bytes to `emit` in chunks of about `chunk` bytes as they are
    /// ready (a `SortedRecordKeys` value's array members are streamed element by element), so a large
    /// document is never held whole.
    static func stream<T: Encodable>(_ value: T, pretty: Bool, chunk: Int = 1 << 20, emit: (Data) throws -> Void) throws {
        let sink = Sink(pretty: pretty, capacity: chunk + 64 * 1024)
        sink.out.pointee.flushThreshold = chunk
        var failure: (any Error)?
        // `emit` is only called during `encode`; the sink does not keep it.
        withoutActuallyEscaping(emit) { emit in
            sink.emit = { data in
                guard failure == nil else { return }
                do { try emit(data) } catch { failure = error }
            }
            sink.encode(value, depth: 0)
            sink.emit = nil
            sink.pool = []
        }
        if let failure { throw failure }
        try emit(Data(sink.out.pointee.bytes))
    }
}

/// A value `RecordEncoder.element` already wrote at the depth and in the format it appears at: put
/// back as it is (a device's record, written once when the device ended, in the streamed report).
/// Only `RecordEncoder` writes it.
struct EncodedJSON: Encodable {
    var bytes: [UInt8]

    func encode(to encoder: any Encoder) throws {
        throw EncodingError.invalidValue(bytes, EncodingError.Context(codingPath: encoder.codingPath,
                                                                      debugDescription: "pre-encoded JSON is written by RecordEncoder only"))
    }
}

/// A record whose `CodingKeys` are declared (and so encoded) in sorted order of their JSON names:
/// `RecordEncoder` writes its members in final form at once and can stream its arrays.
/// `RecordEncoderTests` checks the order.
protocol SortedRecordKeys {}

/// A dictionary with `String` keys: encoded as a JSON object whose keys are written as they are
/// (never converted to snake_case), sorted — as `JSONEncoder` does.
private protocol StringKeyedMap {
    func encodeMembers(into sink: RecordEncoder.Sink, depth: Int)
}

extension Dictionary: StringKeyedMap where Key == String, Value: Encodable {
    fileprivate func encodeMembers(into sink: RecordEncoder.Sink, depth: Int) {
        let out = sink.out
        out.pointee.bytes.append(UInt8(ascii: "{"))
        var first = true
        for key in keys.sorted() {
            guard let value = self[key] else { continue }
            out.pointee.separator(first: first, depth: depth + 1)
            first = false
            out.pointee.string(key)
            out.pointee.colon()
            sink.encode(value, depth: depth + 1)
        }
        out.pointee.close(UInt8(ascii: "}"), empty: first, depth: depth)
    }
}

extension RecordEncoder {
    /// The output and the bookkeeping of the containers being written.
    final class Sink {
        /// The writer's state, behind a pointer this sink owns (allocated in `init`, freed in `deinit`,
        /// never shared): as class properties, every byte appended paid a dynamic exclusivity check
        /// (a fifth of the encoder's time).
        let out: UnsafeMutablePointer<Output>
        var emit: ((Data) -> Void)?
        /// Reused encoders by depth (`encoder(depth:sorted:)`); emptied when the value is written.
        var pool: [ValueEncoder] = []

        init(pretty: Bool, capacity: Int) {
            out = .allocate(capacity: 1)
            out.initialize(to: Output(pretty: pretty, capacity: capacity))
        }

        deinit {
            out.deinitialize(count: 1)
            out.deallocate()
        }

        /// Writes a value at `depth`. `pooled: false` for a value written inside another value's
        /// single-value container (at the same depth, while that encoder is in use).
        func encode<T: Encodable>(_ value: T, depth: Int, pooled: Bool = true) {
            // Metatype comparisons first: a dynamic cast per value costs more than writing it.
            if T.self == String.self, let v = value as? String { return out.pointee.string(v) }
            if T.self == Int.self, let v = value as? Int { return JSONBytes.int(v, into: &out.pointee.bytes) }
            if T.self == Double.self, let v = value as? Double { return JSONBytes.double(v, into: &out.pointee.bytes) }
            if T.self == Bool.self, let v = value as? Bool { return JSONBytes.bool(v, into: &out.pointee.bytes) }
            if T.self == EncodedJSON.self, let v = value as? EncodedJSON { return out.pointee.bytes.append(contentsOf: v.bytes) }
            let kind = out.pointee.kind(of: T.self)
            if kind == .map, let m = value as? any StringKeyedMap { return m.encodeMembers(into: self, depth: depth) }
            let sorted = kind == .sorted
            let encoder = pooled ? self.encoder(depth: depth, sorted: sorted) : ValueEncoder(sink: self, depth: depth, sorted: sorted)
            do { try value.encode(to: encoder) } catch {
                // Our records' `encode(to:)` never throw; an encoder never refuses a value.
            }
            encoder.finish()
        }

        /// How a type is written, looked up once per type.
        enum Kind { case map, sorted, other }
        private static let kinds = Mutex<[ObjectIdentifier: Kind]>([:])

        static func kind(of type: Any.Type) -> Kind {
            let id = ObjectIdentifier(type)
            if let k = kinds.withLock({ $0[id] }) { return k }
            let k: Kind = type is any StringKeyedMap.Type ? .map : type is any SortedRecordKeys.Type ? .sorted : .other
            kinds.withLock { $0[id] = k }
            return k
        }

        /// The encoder for a value at `depth`: one per depth, reused (values at one depth are written
        /// one after the other).
        func encoder(depth: Int, sorted: Bool) -> ValueEncoder {
            while pool.count <= depth { pool.append(ValueEncoder(sink: self, depth: pool.count, sorted: false)) }
            let e = pool[depth]
            e.reset(sorted: sorted)
            return e
        }

        /// Hands out finished bytes when there are enough and nothing open still needs sorting.
        func maybeFlush() {
            guard let emit, out.pointee.sortingOpen == 0, out.pointee.bytes.count >= out.pointee.flushThreshold else { return }
            emit(Data(out.pointee.bytes))
            out.pointee.flushed += out.pointee.bytes.count
            out.pointee.bytes.removeAll(keepingCapacity: true)
        }
    }

    /// The bytes written so far and the members of the keyed containers still open.
    struct Output {
        /// Bytes not yet handed out (all of them unless streaming).
        var bytes: [UInt8]
        let pretty: Bool
        /// Members of open keyed containers that will be sorted when their value is done.
        var members: [Member] = []
        /// Open keyed containers whose members must still be sorted (streaming waits for none).
        var sortingOpen = 0
        /// Bytes handed out so far (positions in `members` are absolute: minus this, in `bytes`).
        var flushed = 0
        var flushThreshold = Int.max
        private var scratch: [UInt8] = []

        /// A member of a keyed container: `"key"` starts at `key`, the value at `value` (absolute positions).
        struct Member {
            var key: Int
            var value: Int
        }

        init(pretty: Bool, capacity: Int) {
            self.pretty = pretty
            bytes = []
            bytes.reserveCapacity(capacity)
        }

        var position: Int { flushed + bytes.count }

        mutating func string(_ s: String) { JSONBytes.string(s, into: &bytes) }
        mutating func separator(first: Bool, depth: Int) { JSONBytes.separator(first: first, pretty: pretty, depth: depth, into: &bytes) }
        mutating func colon() { JSONBytes.colon(pretty: pretty, into: &bytes) }

        /// Closes a container at `depth`. `JSONEncoder` writes an empty container, pretty, as an empty
        /// line between its brackets.
        mutating func close(_ bracket: UInt8, empty: Bool, depth: Int) {
            JSONBytes.close(bracket, empty: empty, pretty: pretty, depth: depth, into: &bytes)
        }

        /// Types seen by this output, and how they are written (the global table costs a lock and a hash).
        private var kinds: [(ObjectIdentifier, Sink.Kind)] = []

        mutating func kind(of type: Any.Type) -> Sink.Kind {
            let id = ObjectIdentifier(type)
            for (t, k) in kinds where t == id { return k }
            let k = Sink.kind(of: type)
            kinds.append((id, k))
            return k
        }

        /// A key as `JSONEncoder`'s `.convertToSnakeCase` writes it, quoted. The common camelCase keys
        /// (`durationMs`, `attRoundTrips`: lower-case start, every capital followed by a lower-case
        /// letter, nothing to escape) are converted as they are written; others go through `SnakeCase`.
        mutating func key(_ name: String) {
            var name = name
            // Checked and converted over the contiguous UTF-8 into a small buffer, appended at once (a
            // `String.UTF8View` iterator and byte-by-byte appends cost a few hundred instructions a key).
            let written: Bool = name.withUTF8 { utf8 in
                let n = utf8.count
                guard n > 0, n <= 48 else { return false }
                return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 2 * n + 2) { buffer in
                    var w = 0
                    buffer[w] = UInt8(ascii: "\"")
                    w += 1
                    var previousCapital = false
                    for i in 0..<n {
                        let b = utf8[i]
                        if b &- UInt8(ascii: "a") < 26 {
                            buffer[w] = b
                            w += 1
                            previousCapital = false
                        } else if b &- UInt8(ascii: "A") < 26 {
                            if i == 0 || previousCapital { return false }
                            buffer[w] = UInt8(ascii: "_")
                            buffer[w + 1] = b + 0x20
                            w += 2
                            previousCapital = true
                        } else if b &- UInt8(ascii: "0") < 10, i > 0, !previousCapital {
                            buffer[w] = b
                            w += 1
                        } else {
                            return false
                        }
                    }
                    guard !previousCapital else { return false }
                    buffer[w] = UInt8(ascii: "\"")
                    w += 1
                    bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[0..<w]))
                    return true
                }
            }
            if !written { string(SnakeCase.convert(name)) }
        }

        /// Puts the members from `first` on (of a keyed container at `depth` that began at `start`) in
        /// key order, with separators and brackets, in place.
        mutating func sortMembers(from first: Int, start: Int, depth: Int) {
            let end = position
            let count = members.count - first
            var order = Array(first..<members.count)
            // Keys compare as their escaped bytes (between the quotes).
            let flushed = self.flushed
            order.sort { [members, bytes] a, b in
                func key(_ m: Int) -> ArraySlice<UInt8> { bytes[(members[m].key - flushed + 1)..<(members[m].value - flushed - 1)] }
                return key(a).lexicographicallyPrecedes(key(b))
            }
            // Move the container's bytes aside and write it again, in order, where it began.
            let base = start - flushed
            scratch.removeAll(keepingCapacity: true)
            scratch.append(contentsOf: bytes[base...])
            bytes.removeSubrange(base...)
            let offset = flushed + base
            bytes.append(UInt8(ascii: "{"))
            for (n, m) in order.enumerated() {
                separator(first: n == 0, depth: depth + 1)
                let k = members[m].key - offset
                let v = members[m].value - offset
                let e = (m + 1 < members.count ? members[m + 1].key : end) - offset
                bytes.append(contentsOf: scratch[k..<v])
                colon()
                bytes.append(contentsOf: scratch[v..<e])
            }
            close(UInt8(ascii: "}"), empty: count == 0, depth: depth)
            members.removeSubrange(first...)
        }
    }

    /// The `Encoder` for one value: the container it asks for decides how the value is written.
    final class ValueEncoder: Encoder {
        let sink: Sink
        let depth: Int
        /// This encoder's state, behind a pointer it owns (for the same reason as `Sink.out`).
        let frame: UnsafeMutablePointer<Frame>
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        enum State {
            case none
            case keyed(start: Int, firstMember: Int, count: Int)
            case unkeyed(count: Int)
            case single
        }

        struct Frame {
            /// The value's keys come in sorted order (`SortedRecordKeys`).
            var sorted: Bool
            var state = State.none
            /// Nested encoders handed out by `nestedContainer` & co., finished before the next write.
            var pending: [ValueEncoder] = []
        }

        init(sink: Sink, depth: Int, sorted: Bool) {
            self.sink = sink
            self.depth = depth
            frame = .allocate(capacity: 1)
            frame.initialize(to: Frame(sorted: sorted))
        }

        deinit {
            frame.deinitialize(count: 1)
            frame.deallocate()
        }

        /// Ready for the next value at this depth.
        func reset(sorted: Bool) {
            frame.pointee.sorted = sorted
            frame.pointee.state = .none
        }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            if case .none = frame.pointee.state {
                let out = sink.out
                frame.pointee.state = .keyed(start: out.pointee.position, firstMember: out.pointee.members.count, count: 0)
                if frame.pointee.sorted { out.pointee.bytes.append(UInt8(ascii: "{")) } else { out.pointee.sortingOpen += 1 }
            }
            return KeyedEncodingContainer(Keyed<Key>(encoder: self))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            if case .none = frame.pointee.state {
                frame.pointee.state = .unkeyed(count: 0)
                sink.out.pointee.bytes.append(UInt8(ascii: "["))
            }
            return Unkeyed(encoder: self)
        }

        func singleValueContainer() -> any SingleValueEncodingContainer {
            if case .none = frame.pointee.state { frame.pointee.state = .single }
            return Single(encoder: self)
        }

        /// Starts a member: finishes pending nested values, writes the separator (sorted) and the key.
        func beginMember(_ key: some CodingKey) {
            if !frame.pointee.pending.isEmpty { finishPending() }
            guard case .keyed(let start, let first, let count) = frame.pointee.state else { return }
            frame.pointee.state = .keyed(start: start, firstMember: first, count: count + 1)
            let out = sink.out
            if frame.pointee.sorted {
                out.pointee.separator(first: count == 0, depth: depth + 1)
                out.pointee.key(key.stringValue)
                out.pointee.colon()
            } else {
                let at = out.pointee.position
                out.pointee.key(key.stringValue)
                out.pointee.members.append(Output.Member(key: at, value: out.pointee.position))
            }
        }

        /// Starts an element of an unkeyed container.
        func beginElement() {
            if !frame.pointee.pending.isEmpty { finishPending() }
            guard case .unkeyed(let count) = frame.pointee.state else { return }
            frame.pointee.state = .unkeyed(count: count + 1)
            sink.out.pointee.separator(first: count == 0, depth: depth + 1)
        }

        func endElement() { sink.maybeFlush() }

        func finishPending() {
            let p = frame.pointee.pending
            frame.pointee.pending = []
            for e in p { e.finish() }
        }

        /// Called when the value's `encode(to:)` returned: closes (and sorts) its container.
        func finish() {
            if !frame.pointee.pending.isEmpty { finishPending() }
            let out = sink.out
            switch frame.pointee.state {
            case .none:
                // A value that wrote nothing: `JSONEncoder` writes an empty object.
                out.pointee.bytes.append(UInt8(ascii: "{"))
                out.pointee.bytes.append(UInt8(ascii: "}"))
            case .keyed(let start, let first, let count):
                if frame.pointee.sorted {
                    out.pointee.close(UInt8(ascii: "}"), empty: count == 0, depth: depth)
                } else {
                    out.pointee.sortMembers(from: first, start: start, depth: depth)
                    out.pointee.sortingOpen -= 1
                }
            case .unkeyed(let count):
                out.pointee.close(UInt8(ascii: "]"), empty: count == 0, depth: depth)
            case .single:
                break
            }
            frame.pointee.state = .none
        }

        func nested(sorted: Bool = false) -> ValueEncoder {
            let e = ValueEncoder(sink: sink, depth: depth + 1, sorted: sorted)
            frame.pointee.pending.append(e)
            return e
        }

        // The writes the containers make.
        func string(_ v: String) { sink.out.pointee.string(v) }
        func int<I: BinaryInteger>(_ v: I) { JSONBytes.int(v, into: &sink.out.pointee.bytes) }
        func double(_ v: Double) { JSONBytes.double(v, into: &sink.out.pointee.bytes) }
        func bool(_ v: Bool) { JSONBytes.bool(v, into: &sink.out.pointee.bytes) }
        func null() { JSONBytes.null(into: &sink.out.pointee.bytes) }
    }

    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let encoder: ValueEncoder
        var codingPath: [any CodingKey] { [] }

        mutating func encodeNil(forKey key: Key) throws { encoder.beginMember(key); encoder.null() }
        mutating func encode(_ value: Bool, forKey key: Key) throws { encoder.beginMember(key); encoder.bool(value) }
        mutating func encode(_ value: String, forKey key: Key) throws { encoder.beginMember(key); encoder.string(value) }
        mutating func encode(_ value: Double, forKey key: Key) throws { encoder.beginMember(key); encoder.double(value) }
        mutating func encode(_ value: Float, forKey key: Key) throws { encoder.beginMember(key); encoder.double(Double(value)) }
        mutating func encode(_ value: Int, forKey key: Key) throws { encoder.beginMember(key); encoder.int(value) }
        mutating func encode(_ value: Int8, forKey key: Key) throws { encoder.beginMember(key); encoder.int(value) }
        mutating func encode(_ value: Int16, forKey key: Key) throws { encoder.beginMember(key); encoder.int(value) }
        mutating func encode(_ value: Int32, forKey key: Key) throws { encoder.beginMember(key); encoder.int(value) }
        mutating func encode(_ value: Int64, forKey key: Key) throws { encoder.beginMember(key); encoder.int(value) }
        mutating func encode(_ value: UInt, forKey key: Key) throws { encoder.beginMember(key); encoder.int(value) }
        mutating func encode(_ value: UInt8, forKey key: Key) throws { encoder.beginMember(key); encoder.int(value) }
        mutating func encode(_ value: UInt16, forKey key: Key) throws { encoder.beginMember(key); encoder.int(value) }
        mutating func encode(_ value: UInt32, forKey key: Key) throws { encoder.beginMember(key); encoder.int(value) }
        mutating func encode(_ value: UInt64, forKey key: Key) throws { encoder.beginMember(key); encoder.int(value) }
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            encoder.beginMember(key)
            encoder.sink.encode(value, depth: encoder.depth + 1)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            encoder.beginMember(key)
            return encoder.nested().container(keyedBy: keyType)
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            encoder.beginMember(key)
            return encoder.nested().unkeyedContainer()
        }

        mutating func superEncoder() -> any Encoder {
            encoder.beginMember(SuperKey())
            return encoder.nested()
        }

        mutating func superEncoder(forKey key: Key) -> any Encoder {
            encoder.beginMember(key)
            return encoder.nested()
        }
    }

    private struct SuperKey: CodingKey {
        var stringValue: String { "super" }
        var intValue: Int? { nil }
        init() {}
        init?(stringValue: String) { nil }
        init?(intValue: Int) { nil }
    }

    struct Unkeyed: UnkeyedEncodingContainer {
        let encoder: ValueEncoder
        var codingPath: [any CodingKey] { [] }
        var count: Int {
            if case .unkeyed(let n) = encoder.frame.pointee.state { return n }
            return 0
        }

        mutating func encodeNil() throws { encoder.beginElement(); encoder.null(); encoder.endElement() }
        mutating func encode(_ value: String) throws { encoder.beginElement(); encoder.string(value); encoder.endElement() }
        mutating func encode(_ value: Bool) throws { encoder.beginElement(); encoder.bool(value); encoder.endElement() }
        mutating func encode(_ value: Int) throws { encoder.beginElement(); encoder.int(value); encoder.endElement() }
        mutating func encode(_ value: Double) throws { encoder.beginElement(); encoder.double(value); encoder.endElement() }
        mutating func encode<T: Encodable>(_ value: T) throws {
            encoder.beginElement()
            encoder.sink.encode(value, depth: encoder.depth + 1)
            encoder.endElement()
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            encoder.beginElement()
            return encoder.nested().container(keyedBy: keyType)
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            encoder.beginElement()
            return encoder.nested().unkeyedContainer()
        }

        mutating func superEncoder() -> any Encoder {
            encoder.beginElement()
            return encoder.nested()
        }
    }

    struct Single: SingleValueEncodingContainer {
        let encoder: ValueEncoder
        var codingPath: [any CodingKey] { [] }

        mutating func encodeNil() throws { encoder.null() }
        mutating func encode(_ value: Bool) throws { encoder.bool(value) }
        mutating func encode(_ value: String) throws { encoder.string(value) }
        mutating func encode(_ value: Double) throws { encoder.double(value) }
        mutating func encode(_ value: Float) throws { encoder.double(Double(value)) }
        mutating func encode(_ value: Int) throws { encoder.int(value) }
        mutating func encode(_ value: Int8) throws { encoder.int(value) }
        mutating func encode(_ value: Int16) throws { encoder.int(value) }
        mutating func encode(_ value: Int32) throws { encoder.int(value) }
        mutating func encode(_ value: Int64) throws { encoder.int(value) }
        mutating func encode(_ value: UInt) throws { encoder.int(value) }
        mutating func encode(_ value: UInt8) throws { encoder.int(value) }
        mutating func encode(_ value: UInt16) throws { encoder.int(value) }
        mutating func encode(_ value: UInt32) throws { encoder.int(value) }
        mutating func encode(_ value: UInt64) throws { encoder.int(value) }
        mutating func encode<T: Encodable>(_ value: T) throws { encoder.sink.encode(value, depth: encoder.depth, pooled: false) }
    }
}

/// The bytes of JSON values and punctuation, as `JSONEncoder` writes them.
enum JSONBytes {

    /// A string literal: Support's `JSONString`, the one home of JSON escaping.
    static func string(_ s: String, into out: inout [UInt8]) {
        JSONString.append(s, to: &out)
    }

    static func int<I: BinaryInteger>(_ v: I, into out: inout [UInt8]) {
        if let small = Int64(exactly: v) {
            int64(small, into: &out)
        } else {
            // Above Int64.max: only UInt64 (UInt) gets here.
            unsigned(UInt64(truncatingIfNeeded: v), negative: false, into: &out)
        }
    }

    static func int64(_ v: Int64, into out: inout [UInt8]) {
        unsigned(v.magnitude, negative: v < 0, into: &out)
    }

    /// Decimal digits written back to front into a small buffer, appended at once (generic
    /// `quotientAndRemainder` and a reversed slice cost hundreds of instructions per number).
    private static func unsigned(_ magnitude: UInt64, negative: Bool, into out: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 21) { buffer in
            var i = 21
            var m = magnitude
            repeat {
                i -= 1
                buffer[i] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: m % 10)
                m /= 10
            } while m > 0
            if negative {
                i -= 1
                buffer[i] = UInt8(ascii: "-")
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[i..<21]))
        }
    }

    static func bool(_ v: Bool, into out: inout [UInt8]) {
        out.append(contentsOf: (v ? "true" : "false").utf8)
    }

    static func null(into out: inout [UInt8]) { out.append(contentsOf: "null".utf8) }

    /// As `JSONEncoder` writes a finite number: its shortest description, without a trailing `.0`.
    /// (Non-finite values cannot occur in these records; they are written as 0 rather than invalid JSON.)
    static func double(_ v: Double, into out: inout [UInt8]) {
        guard v.isFinite else {
            out.append(UInt8(ascii: "0"))
            return
        }
        // The records' numbers are mostly milliseconds rounded to 3 places. Below 1e9, when `v` is the
        // double nearest to n/1000, its shortest description is n/1000's decimal digits (no other
        // decimal with at most 3 places is as close: doubles there are far finer than 0.001), so it is
        // written from the integer n without making a `String`. -0 keeps its sign the slow way.
        if v.magnitude < 1e9, v != 0 || v.sign == .plus {
            let scaled = (v * 1000).rounded()
            if Double(Int64(scaled)) / 1000 == v {
                millis(Int64(scaled), into: &out)
                return
            }
        }
        var text = v.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        out.append(contentsOf: text.utf8)
    }

    /// n/1000 as its shortest decimal: `12.345`, `0.5`, `-3`, `0`.
    private static func millis(_ n: Int64, into out: inout [UInt8]) {
        let m = n.magnitude
        unsigned(m / 1000, negative: n < 0, into: &out)
        var fraction = m % 1000
        guard fraction != 0 else { return }
        out.append(UInt8(ascii: "."))
        var digits = 3
        while fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        var divisor: UInt64 = digits == 3 ? 100 : digits == 2 ? 10 : 1
        while divisor > 0 {
            out.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: fraction / divisor % 10))
            divisor /= 10
        }
    }

    static func separator(first: Bool, pretty: Bool, depth: Int, into out: inout [UInt8]) {
        if !first { out.append(UInt8(ascii: ",")) }
        if pretty { newline(depth, into: &out) }
    }

    static func colon(pretty: Bool, into out: inout [UInt8]) {
        if pretty {
            out.append(0x20)
            out.append(UInt8(ascii: ":"))
            out.append(0x20)
        } else {
            out.append(UInt8(ascii: ":"))
        }
    }

    static func close(_ bracket: UInt8, empty: Bool, pretty: Bool, depth: Int, into out: inout [UInt8]) {
        if pretty {
            if empty { out.append(0x0A) }
            newline(depth, into: &out)
        }
        out.append(bracket)
    }

    private static let indentation = [UInt8](repeating: 0x20, count: 64)

    static func newline(_ depth: Int, into out: inout [UInt8]) {
        out.append(0x0A)
        if 2 * depth <= indentation.count {
            out.append(contentsOf: indentation[0..<(2 * depth)])
            return
        }
        for _ in 0..<depth {
            out.append(0x20)
            out.append(0x20)
        }
    }
}

/// `JSONEncoder.KeyEncodingStrategy.convertToSnakeCase`, byte for byte: words split where a lower-case
/// letter meets an upper-case one, and before the last capital of a run of capitals (`myURLKey` →
/// `my_url_key`), joined with `_`, lower-cased; leading and trailing underscores kept.
enum SnakeCase {
    /// Keys already converted: records use a few dozen, each thousands of times.
    private static let cache = Mutex<[String: String]>([:])

    static func convert(_ key: String) -> String {
        if let hit = cache.withLock({ $0[key] }) { return hit }
        let converted = compute(key)
        cache.withLock { $0[key] = converted }
        return converted
    }

    static func compute(_ key: String) -> String {
        let scalars = Array(key.unicodeScalars)
        guard !scalars.isEmpty else { return key }
        // Leading and trailing underscores stay as they are.
        var lo = 0
        while lo < scalars.count && scalars[lo] == "_" { lo += 1 }
        guard lo < scalars.count else { return key }
        var hi = scalars.count - 1
        while hi > lo && scalars[hi] == "_" { hi -= 1 }
        let body = Array(scalars[lo...hi])
        func isUpper(_ s: Unicode.Scalar) -> Bool { s.properties.isUppercase }
        func isLower(_ s: Unicode.Scalar) -> Bool { s.properties.isLowercase }
        var words: [Range<Int>] = []
        var wordStart = 0
        var search = 1
        while let upper = (search..<body.count).first(where: { isUpper(body[$0]) }) {
            words.append(wordStart..<upper)
            guard let lower = (upper..<body.count).first(where: { isLower(body[$0]) }) else {
                wordStart = upper
                search = body.count
                break
            }
            if lower == upper + 1 {
                wordStart = upper
            } else {
                words.append(upper..<(lower - 1))
                wordStart = lower - 1
            }
            search = lower + 1
        }
        words.append(wordStart..<body.count)
        var out = String(String.UnicodeScalarView(scalars[0..<lo]))
        out += words.map { String(String.UnicodeScalarView(body[$0])).lowercased() }.joined(separator: "_")
        out += String(String.UnicodeScalarView(scalars[(hi + 1)...]))
        return out
    }
}
