import Foundation
import Support
import Workflow

/// Reads the engine's records (`DeviceRecord`, `RunInfo`, `Summary`, `JournalLine`, …) from JSON
/// through their `Codable` definitions, as `JSONDecoder` with `.convertFromSnakeCase` reads them, but
/// from a `JSONTape`: one pass over the bytes, then only what a record asks for is materialised. The
/// reading side of `RecordEncoder`; `provision report` streams a report through it one device at a
/// time (docs/report.md, "Reading a report").
///
/// Differences from `JSONDecoder`, each deliberate:
/// - Every number is range-checked: a number out of its type's range (`70000` for a UInt16,
///   `1e400`, `1e-400` that would read as 0) is an error, never a rounded or wrapped value.
/// - A `JSONScalar` written as an integer (`18446744073709551615`) must fit an Int64: it is never
///   quietly read as the nearest double.
/// - Errors say where, in words: the JSON path (`devices[3].captured.battery`), the byte offset,
///   and what was wrong (`RecordDecodingError`).
/// - Member names are matched as the encoder writes them (`attRoundTrips` ↔ `att_round_trips`);
///   dictionary keys are taken as written, as `JSONDecoder` does.
///
/// One instance is reused for many records (it caches member names); it is not shared between tasks.
package final class RecordDecoder {
    /// Member names of coding keys as written (`attRoundTrips` → `att_round_trips`), by key.
    fileprivate var names: [String: [UInt8]] = [:]

    package init() {}

    /// Decodes `type` from the JSON text `bytes`.
    package func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws(RecordDecodingError) -> T {
        let tape: JSONTape
        do {
            tape = try JSONTape(bytes)
        } catch {
            throw RecordDecodingError(offset: error.offset, path: [], message: "not JSON: \(error.message)")
        }
        return try decode(type, from: tape)
    }

    /// Whether a type is a `[String: Value]` map (read with its keys as written), by type: the
    /// dynamic cast is made once per type, not once per value.
    private var maps: [ObjectIdentifier: Bool] = [:]

    fileprivate func isMap(_ type: Any.Type) -> Bool {
        let id = ObjectIdentifier(type)
        if let known = maps[id] { return known }
        let answer = type is any StringKeyedDecodableMap.Type
        maps[id] = answer
        return answer
    }

    /// What an omitted member reads as.
    package enum Omitted: Sendable {
        /// An empty list (`steps`).
        case emptyList
        /// Absent (an optional member: `measurements`).
        case absent
    }

    /// Decodes `type` from a parsed text (its root, or the value at token `token`).
    ///
    /// `omitting` names members of the top-level object (as written: `steps`) that are not decoded: each
    /// reads as its `Omitted` value, whatever the text holds there (it was parsed as JSON, nothing
    /// more). A reader that needs only part of a record (`provision report` answering a query that
    /// names no step) saves most of the decoding this way.
    package func decode<T: Decodable>(_ type: T.Type, from tape: JSONTape, at token: Int = 0,
                                      omitting: [String: Omitted] = [:]) throws(RecordDecodingError) -> T {
        let root = TapeDecoder(tape: Tape(tape, context: self, omitting: omitting), token: token, parent: nil, key: nil)
        do {
            return try root.decode(type)
        } catch let e as RecordDecodingError {
            throw e
        } catch {
            throw root.positioned(error)
        }
    }

    /// The member name a coding key is written as.
    fileprivate func name(_ key: some CodingKey) -> [UInt8] {
        if let hit = names[key.stringValue] { return hit }
        let converted = Array(SnakeCase.convert(key.stringValue).utf8)
        names[key.stringValue] = converted
        return converted
    }

    /// How many bytes `key` is written as (a capital that starts a word adds its `_`).
    @inline(__always)
    fileprivate func writtenLength(_ key: String) -> Int {
        var k = key
        return k.withUTF8 { u -> Int in
            guard let first = u.first, first >= UInt8(ascii: "a"), first <= UInt8(ascii: "z") else { return slowLength(key) }
            var n = u.count
            for i in 0..<u.count {
                let c = u[i]
                if c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") {
                    if i + 1 < u.count, !(u[i + 1] >= UInt8(ascii: "a") && u[i + 1] <= UInt8(ascii: "z")) { return slowLength(key) }
                    n += 1
                } else if c >= 0x80 {
                    return slowLength(key)
                }
            }
            return n
        }
    }

    private func slowLength(_ key: String) -> Int {
        if let hit = names[key] { return hit.count }
        let name = Array(SnakeCase.convert(key).utf8)
        names[key] = name
        return name.count
    }

    /// True when member name `name` (bytes `start..<end` of `p`) is how `key` is written. Keys in
    /// lower camel case whose capitals each start a word (`startMs`, `attRoundTrips`) are compared
    /// in place, without converting them; any other key through `name(_:)`.
    @inline(__always)
    fileprivate func matches(_ key: String, _ p: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Bool {
        var k = key
        return k.withUTF8 { u -> Bool in
            guard let first = u.first, first >= UInt8(ascii: "a"), first <= UInt8(ascii: "z") else { return slowMatch(key, p, start, end) }
            var j = start
            var i = 0
            while i < u.count {
                let c = u[i]
                if c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") {
                    // A capital that starts a word: `_` and its lower case. Anything else (two capitals,
                    // a capital before a digit) follows SnakeCase's rules: the slow way.
                    if i + 1 < u.count, !(u[i + 1] >= UInt8(ascii: "a") && u[i + 1] <= UInt8(ascii: "z")) { return slowMatch(key, p, start, end) }
                    guard j + 1 < end, p[j] == UInt8(ascii: "_"), p[j + 1] == c + 32 else { return false }
                    j += 2
                } else if c >= 0x80 {
                    return slowMatch(key, p, start, end)
                } else {
                    guard j < end, p[j] == c else { return false }
                    j += 1
                }
                i += 1
            }
            return j == end
        }
    }

    private func slowMatch(_ key: String, _ p: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Bool {
        let name: [UInt8]
        if let hit = names[key] { name = hit } else {
            name = Array(SnakeCase.convert(key).utf8)
            names[key] = name
        }
        guard name.count == end - start else { return false }
        for i in 0..<name.count where p[start + i] != name[i] { return false }
        return true
    }
}

/// Why a record could not be read: where (the path as written in the JSON, and the byte offset in the
/// text given to the decoder) and what was wrong.
package struct RecordDecodingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Byte offset of the offending value in the decoded text.
    package var offset: Int
    package var path: [JSONTape.PathComponent]
    package var message: String

    package init(offset: Int, path: [JSONTape.PathComponent], message: String) {
        self.offset = offset
        self.path = path
        self.message = message
    }

    /// `devices[3].captured.battery` (empty for the top level).
    package var pathText: String { Self.text(path) }

    package static func text(_ path: [JSONTape.PathComponent]) -> String {
        var text = ""
        for c in path {
            switch c {
            case .key(let k): text += (text.isEmpty ? "" : ".") + k
            case .index(let i): text += "[\(i)]"
            }
        }
        return text
    }

    /// The message after the path: `` `devices[3].outcome`: `weird` is not one of … ``.
    package var description: String { path.isEmpty ? message : "`\(pathText)`: \(message)" }
}

// MARK: - The decoder

/// One record's text and tokens, shared by the decoders of its values.
private final class Tape {
    let source: JSONTape
    let tokens: [JSONTape.Token]
    let bytes: [UInt8]
    let context: RecordDecoder

    /// Top-level members read as something else (`RecordDecoder.Omitted`), by the token they read as.
    let omitted: [(name: [UInt8], token: Int)]

    init(_ source: JSONTape, context: RecordDecoder, omitting: [String: RecordDecoder.Omitted] = [:]) {
        self.source = source
        var tokens = source.tokens
        var omitted: [([UInt8], Int)] = []
        if !omitting.isEmpty {
            // Two tokens past the text's own: an empty list and a null, for omitted members to point at.
            let list = tokens.count
            tokens.append(JSONTape.Token(start: 0, end: list + 1, count: 0, kind: .array, escaped: false))
            tokens.append(JSONTape.Token(start: 0, end: 0, count: 0, kind: .null, escaped: false))
            for (name, o) in omitting { omitted.append((Array(name.utf8), o == .emptyList ? list : list + 1)) }
        }
        self.tokens = tokens
        self.omitted = omitted
        bytes = source.bytes
        self.context = context
    }

    @inline(__always) func kind(_ i: Int) -> JSONTape.Kind { tokens[i].kind }

    /// Where token `i` is written (an omitted member's stand-in is nowhere: the start).
    func offset(_ i: Int) -> Int { i < source.tokens.count ? source.offset(of: i) : 0 }
}

/// A coding key one step down from a decoder; the path component it is written as is made only for a
/// message (`component`).
private struct Step {
    var key: any CodingKey

    var component: JSONTape.PathComponent {
        if let m = key as? MemberKey { return m.index.map { .index($0) } ?? .key(m.name) }
        return .key(SnakeCase.convert(key.stringValue))
    }
}

/// The decoder of one value (an object, a list or a scalar). Scalars inside containers are read
/// straight from the tape; a decoder is made only for a nested record, list or map. Its paths (the
/// coding path, the JSON path) are kept as a link to its parent and made only when asked for.
private final class TapeDecoder: Decoder {
    let tape: Tape
    let token: Int
    let parent: TapeDecoder?
    let step: Step?
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(tape: Tape, token: Int, parent: TapeDecoder?, key: Step?) {
        self.tape = tape
        self.token = token
        self.parent = parent
        self.step = key
    }

    var codingPath: [any CodingKey] {
        var out: [any CodingKey] = []
        var d: TapeDecoder? = self
        while let x = d, let s = x.step {
            out.append(s.key)
            d = x.parent
        }
        return out.reversed()
    }

    var jsonPath: [JSONTape.PathComponent] {
        var out: [JSONTape.PathComponent] = []
        var d: TapeDecoder? = self
        while let x = d, let s = x.step {
            out.append(s.component)
            d = x.parent
        }
        return out.reversed()
    }

    var kind: JSONTape.Kind { tape.kind(token) }

    func fail(_ message: String, at token: Int? = nil, path: [JSONTape.PathComponent]? = nil) -> RecordDecodingError {
        RecordDecodingError(offset: tape.offset(token ?? self.token), path: path ?? jsonPath, message: message)
    }

    /// What a token holds, for "is not text (found a number)".
    static func found(_ kind: JSONTape.Kind) -> String {
        switch kind {
        case .object: return "an object"
        case .array: return "a list"
        case .string: return "text"
        case .number: return "a number"
        case .true, .false: return "true or false"
        case .null: return "null"
        }
    }

    /// A decoder for child token `child`, one step further down.
    func child(_ child: Int, key: any CodingKey) -> TapeDecoder {
        TapeDecoder(tape: tape, token: child, parent: self, key: Step(key: key))
    }

    // MARK: Scalars, read at a token (of this decoder, or a member or element of it)

    /// The failure for a value at `token` that is one step below this decoder (`step`), or this
    /// decoder's own value (`step` nil).
    func fail(_ message: String, token t: Int, step s: () -> Step?) -> RecordDecodingError {
        RecordDecodingError(offset: tape.offset(t), path: jsonPath + (s().map { [$0.component] } ?? []), message: message)
    }

    func mismatch(_ expected: String, token t: Int, step s: () -> Step?) -> RecordDecodingError {
        let k = tape.kind(t)
        return k == .null ? fail("is null, but \(expected) is needed", token: t, step: s) : fail("is \(Self.found(k)), not \(expected)", token: t, step: s)
    }

    func mismatch(_ expected: String) -> RecordDecodingError { mismatch(expected, token: token, step: { nil }) }

    func string(_ t: Int, _ s: @autoclosure () -> Step?) throws(RecordDecodingError) -> String {
        guard tape.kind(t) == .string else { throw mismatch("text", token: t, step: s) }
        do {
            return try tape.source.string(t)
        } catch {
            throw fail(error.message, token: t, step: s)
        }
    }

    func bool(_ t: Int, _ s: @autoclosure () -> Step?) throws(RecordDecodingError) -> Bool {
        switch tape.kind(t) {
        case .true: return true
        case .false: return false
        default: throw mismatch("true or false", token: t, step: s)
        }
    }

    func double(_ t: Int, _ s: @autoclosure () -> Step?) throws(RecordDecodingError) -> Double {
        guard tape.kind(t) == .number else { throw mismatch("a number", token: t, step: s) }
        guard let d = tape.source.double(t) else {
            throw fail("\(tape.source.numberText(t)) is out of range for a number (0, or about 2.2e-308 to 1.8e308 either side of it)", token: t, step: s)
        }
        return d
    }

    func float(_ t: Int, _ s: @autoclosure () -> Step?) throws(RecordDecodingError) -> Float {
        let d = try double(t, s())
        guard abs(d) <= Double(Float.greatestFiniteMagnitude) else { throw fail("\(d) is out of range for a Float", token: t, step: s) }
        return Float(d)
    }

    func integer<I: FixedWidthInteger>(_ type: I.Type, _ t: Int, _ s: @autoclosure () -> Step?) throws(RecordDecodingError) -> I {
        guard tape.kind(t) == .number else { throw mismatch("a whole number", token: t, step: s) }
        if let v = tape.source.int64(t), let exact = I(exactly: v) { return exact }
        let text = tape.source.numberText(t)
        // Beyond Int64: only a UInt64 (or wider) can hold it, written as digits.
        if I.bitWidth >= 64, !I.isSigned, tape.source.isIntegerSyntax(t), let v = UInt64(text), let exact = I(exactly: v) { return exact }
        if tape.source.isIntegerSyntax(t) || tape.source.double(t).map({ $0 == $0.rounded() }) == true {
            throw fail("\(text) is out of range (\(I.min) to \(I.max))", token: t, step: s)
        }
        throw fail("\(text) is not a whole number", token: t, step: s)
    }

    /// A JSON scalar as written: a number in integer form must fit an Int64.
    func scalar(_ t: Int, _ s: @autoclosure () -> Step?) throws(RecordDecodingError) -> JSONScalar {
        switch tape.kind(t) {
        case .null: return .null
        case .true: return .boolean(true)
        case .false: return .boolean(false)
        case .string: return .string(try string(t, s()))
        case .number:
            if let n = tape.source.int64(t) { return .integer(n) }
            if tape.source.isIntegerSyntax(t) {
                throw fail("\(tape.source.numberText(t)) is out of range for an integer (\(Int64.min) to \(Int64.max))", token: t, step: s)
            }
            return .real(try double(t, s()))
        case .object, .array:
            throw mismatch("a single value (text, a number, true, false or null)", token: t, step: s)
        }
    }

    /// The types records are made of, read straight from the tape (no decoder in between).
    @inline(__always)
    static func isFast(_ type: Any.Type) -> Bool {
        type == String.self || type == Double.self || type == Int.self || type == Bool.self || type == JSONScalar.self
    }

    /// A value of one of the `isFast` types. The bit casts are exact: each follows the check that `T`
    /// is that very type (a dynamic cast here cost more than the rest of reading a value).
    func fast<T>(_ type: T.Type, _ t: Int, _ s: @autoclosure () -> Step?) throws(RecordDecodingError) -> T {
        if T.self == String.self { return unsafeBitCast(try string(t, s()), to: T.self) }
        if T.self == Double.self { return unsafeBitCast(try double(t, s()), to: T.self) }
        if T.self == Int.self { return unsafeBitCast(try integer(Int.self, t, s()), to: T.self) }
        if T.self == Bool.self { return unsafeBitCast(try bool(t, s()), to: T.self) }
        if T.self == JSONScalar.self { return unsafeBitCast(try scalar(t, s()), to: T.self) }
        throw fail("\(T.self) is not read here", token: t, step: s)
    }

    // MARK: Values

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if Self.isFast(T.self) { return try fast(type, token, nil) }
        if tape.context.isMap(T.self), let map = T.self as? any StringKeyedDecodableMap.Type, let v = try map.decodeMap(from: self) as? T { return v }
        do {
            return try T(from: self)
        } catch let e as RecordDecodingError {
            throw e
        } catch {
            throw positioned(error)
        }
    }

    /// `type` at child token `t`, one step down.
    func decode<T: Decodable>(_ type: T.Type, at t: Int, _ s: @autoclosure () -> Step) throws -> T {
        if Self.isFast(T.self) { return try fast(type, t, s()) }
        return try TapeDecoder(tape: tape, token: t, parent: self, key: s()).decode(type)
    }

    /// An error a type's own `init(from:)` threw (`DecodingError`, or its own), placed at the value
    /// its coding path leads to from here.
    func positioned(_ error: any Error) -> RecordDecodingError {
        guard let e = error as? DecodingError else { return fail("\(error)") }
        let depth = codingPath.count
        func place(_ context: DecodingError.Context) -> (Int, [JSONTape.PathComponent]) {
            var path = jsonPath
            var t = token
            for key in context.codingPath.dropFirst(depth) {
                let component: JSONTape.PathComponent
                if let i = key.intValue {
                    component = .index(i)
                } else {
                    component = .key(key is MemberKey ? key.stringValue : SnakeCase.convert(key.stringValue))
                }
                path.append(component)
                if let next = tape.source.locate([component], from: t) { t = next }
            }
            return (t, path)
        }
        switch e {
        case .dataCorrupted(let c):
            let (t, path) = place(c)
            if tape.kind(t) == .string, let text = try? tape.source.string(t), c.debugDescription.hasPrefix("Cannot initialize") {
                // An enumeration's raw value this version does not have (`"outcome": "weird"`).
                return fail("\(JSONString.quoted(text)) is not a value this version of provision knows", at: t, path: path)
            }
            return fail(c.debugDescription, at: t, path: path)
        case .keyNotFound(let key, let c):
            let (t, path) = place(c)
            return fail("`\(SnakeCase.convert(key.stringValue))` is missing", at: t, path: path)
        case .typeMismatch(let type, let c):
            let (t, path) = place(c)
            return fail("is \(Self.found(tape.kind(t))), not \(type)", at: t, path: path)
        case .valueNotFound(_, let c):
            let (t, path) = place(c)
            return fail("is null", at: t, path: path)
        @unknown default:
            return fail("\(error)")
        }
    }

    // MARK: Decoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard kind == .object else { throw mismatch("an object") }
        return KeyedDecodingContainer(KeyedContainer<Key>(decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard kind == .array else { throw mismatch("a list") }
        return UnkeyedContainer(decoder: self)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleContainer(decoder: self) }
}

/// `[String: Value]` read member by member, the keys as written (no snake_case conversion).
fileprivate protocol StringKeyedDecodableMap {
    static func decodeMap(from decoder: TapeDecoder) throws -> Self
}

extension Dictionary: StringKeyedDecodableMap where Key == String, Value: Decodable {
    fileprivate static func decodeMap(from decoder: TapeDecoder) throws -> Self {
        guard decoder.kind == .object else { throw decoder.mismatch("an object") }
        let tape = decoder.tape
        var out: [String: Value] = [:]
        let n = Int(tape.tokens[decoder.token].count)
        out.reserveCapacity(n)
        var k = decoder.token + 1
        for _ in 0..<n {
            let key: String
            do {
                key = try tape.source.string(k)
            } catch {
                throw decoder.fail(error.message, at: k)
            }
            out[key] = try decoder.decode(Value.self, at: k + 1, Step(key: MemberKey(key)))
            k = tape.source.next(after: k + 1)
        }
        return out
    }
}

/// A coding key for a dictionary's member (its name as written) or an array's element (its index);
/// the text of an index is made only when asked for.
private struct MemberKey: CodingKey {
    var name: String
    var index: Int?
    init(_ s: String) { name = s }
    init(index: Int) { name = ""; self.index = index }
    init?(stringValue: String) { name = stringValue }
    init?(intValue: Int) { self.init(index: intValue) }
    var stringValue: String { index.map { "Index \($0)" } ?? name }
    var intValue: Int? { index }
}

// MARK: - Containers

/// A class, not a struct: `KeyedDecodingContainer` boxes it and calls it for every member, and a struct
/// (a decoder and a member list) was copied, retained and released at each call.
private final class KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: TapeDecoder
    /// The value token of each member, and where its name is (`start..<end` of the bytes; escaped
    /// names are compared after unescaping).
    private let members: [Member]

    struct Member {
        var start: Int
        var end: Int
        var escaped: Bool
        var value: Int
    }

    init(decoder: TapeDecoder) {
        self.decoder = decoder
        let tape = decoder.tape
        let n = Int(tape.tokens[decoder.token].count)
        var members: [Member] = []
        members.reserveCapacity(n)
        var k = decoder.token + 1
        for _ in 0..<n {
            let t = tape.tokens[k]
            members.append(Member(start: t.start, end: t.end, escaped: t.escaped, value: k + 1))
            k = tape.source.next(after: k + 1)
        }
        self.members = members
    }

    var codingPath: [any CodingKey] { decoder.codingPath }

    /// Keys as `convertFromSnakeCase` shows them (`att_round_trips` → `attRoundTrips`).
    var allKeys: [Key] {
        members.compactMap { m in (try? decoder.tape.source.string(m.value - 1)).flatMap { Key(stringValue: Self.camel($0)) } }
    }

    static func camel(_ name: String) -> String {
        let parts = name.split(separator: "_", omittingEmptySubsequences: true)
        guard parts.count > 1 else { return name }
        let leading = name.prefix { $0 == "_" }, trailing = String(name.reversed().prefix { $0 == "_" })
        return leading + parts[0].lowercased() + parts.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst().lowercased() }.joined() + trailing
    }

    /// The member's value token, the last one when a name is written twice (as `JSONDecoder`).
    func value(_ key: Key) -> Int? {
        let tape = decoder.tape
        if !tape.omitted.isEmpty, decoder.parent == nil, decoder.token == 0 {
            let written = tape.context.name(key)
            if let o = tape.omitted.first(where: { $0.name == written }) { return o.token }
        }
        let context = tape.context
        let name = key.stringValue
        let length = context.writtenLength(name)
        return tape.bytes.withUnsafeBufferPointer { p -> Int? in
            var found: Int?
            for m in members {
                if m.escaped {
                    if let text = try? tape.source.string(m.value - 1), Array(text.utf8) == context.name(key) { found = m.value }
                } else if m.end - m.start == length, context.matches(name, p, m.start, m.end) {
                    found = m.value
                }
            }
            return found
        }
    }

    func step(_ key: Key) -> Step { Step(key: key) }

    /// The value token of `key`, or the error that it is missing.
    func token(_ key: Key) throws(RecordDecodingError) -> Int {
        guard let v = value(key) else {
            throw decoder.fail("`\(String(decoding: decoder.tape.context.name(key), as: UTF8.self))` is missing")
        }
        return v
    }

    func child(_ key: Key) throws(RecordDecodingError) -> TapeDecoder {
        let v = try token(key)
        return TapeDecoder(tape: decoder.tape, token: v, parent: decoder, key: step(key))
    }

    func contains(_ key: Key) -> Bool { value(key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { decoder.tape.kind(try token(key)) == .null }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decoder.bool(try token(key), step(key)) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try decoder.string(try token(key), step(key)) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decoder.double(try token(key), step(key)) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decoder.float(try token(key), step(key)) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decoder.integer(Int.self, try token(key), step(key)) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decoder.integer(Int8.self, try token(key), step(key)) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decoder.integer(Int16.self, try token(key), step(key)) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decoder.integer(Int32.self, try token(key), step(key)) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decoder.integer(Int64.self, try token(key), step(key)) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decoder.integer(UInt.self, try token(key), step(key)) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decoder.integer(UInt8.self, try token(key), step(key)) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decoder.integer(UInt16.self, try token(key), step(key)) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decoder.integer(UInt32.self, try token(key), step(key)) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decoder.integer(UInt64.self, try token(key), step(key)) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try decoder.decode(type, at: try token(key), step(key)) }

    // Optional members: absent or null is nil (the common case, read without a decoder).
    private func present(_ key: Key) -> Int? {
        guard let v = value(key), decoder.tape.kind(v) != .null else { return nil }
        return v
    }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        try present(key).map { t throws(RecordDecodingError) in try decoder.string(t, step(key)) }
    }
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        try present(key).map { t throws(RecordDecodingError) in try decoder.bool(t, step(key)) }
    }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        try present(key).map { t throws(RecordDecodingError) in try decoder.double(t, step(key)) }
    }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
        try present(key).map { t throws(RecordDecodingError) in try decoder.integer(Int.self, t, step(key)) }
    }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let t = present(key) else { return nil }
        return try decoder.decode(type, at: t, step(key))
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try child(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try child(key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        throw decoder.fail("records do not use `super` members")
    }

    func superDecoder(forKey key: Key) throws -> any Decoder { try child(key) }
}

private struct UnkeyedContainer: UnkeyedDecodingContainer {
    let decoder: TapeDecoder
    let count: Int?
    private(set) var currentIndex = 0
    /// The token of the next element.
    private var next: Int

    init(decoder: TapeDecoder) {
        self.decoder = decoder
        count = Int(decoder.tape.tokens[decoder.token].count)
        next = decoder.token + 1
    }

    var codingPath: [any CodingKey] { decoder.codingPath }
    var isAtEnd: Bool { currentIndex >= (count ?? 0) }

    /// The next element's token and step, consumed.
    private mutating func element() throws(RecordDecodingError) -> (Int, Step) {
        guard !isAtEnd else {
            throw decoder.fail("has \(count ?? 0) element(s); more were expected")
        }
        let t = next
        let s = Step(key: MemberKey(index: currentIndex))
        next = decoder.tape.source.next(after: next)
        currentIndex += 1
        return (t, s)
    }

    private mutating func child() throws(RecordDecodingError) -> TapeDecoder {
        let (t, s) = try element()
        return TapeDecoder(tape: decoder.tape, token: t, parent: decoder, key: s)
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else { throw decoder.fail("has \(count ?? 0) element(s); more were expected") }
        guard decoder.tape.kind(next) == .null else { return false }
        _ = try element()
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { let (t, s) = try element(); return try decoder.bool(t, s) }
    mutating func decode(_ type: String.Type) throws -> String { let (t, s) = try element(); return try decoder.string(t, s) }
    mutating func decode(_ type: Double.Type) throws -> Double { let (t, s) = try element(); return try decoder.double(t, s) }
    mutating func decode(_ type: Int.Type) throws -> Int { let (t, s) = try element(); return try decoder.integer(Int.self, t, s) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { let (t, s) = try element(); return try decoder.integer(Int64.self, t, s) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { let (t, s) = try element(); return try decoder.integer(UInt64.self, t, s) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { let (t, s) = try element(); return try decoder.decode(type, at: t, s) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try child().container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try child().unkeyedContainer() }

    mutating func superDecoder() throws -> any Decoder { try child() }
}

private struct SingleContainer: SingleValueDecodingContainer {
    let decoder: TapeDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }
    var t: Int { decoder.token }

    func decodeNil() -> Bool { decoder.kind == .null }
    func decode(_ type: Bool.Type) throws -> Bool { try decoder.bool(t, nil) }
    func decode(_ type: String.Type) throws -> String { try decoder.string(t, nil) }
    func decode(_ type: Double.Type) throws -> Double { try decoder.double(t, nil) }
    func decode(_ type: Float.Type) throws -> Float { try decoder.float(t, nil) }
    func decode(_ type: Int.Type) throws -> Int { try decoder.integer(Int.self, t, nil) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decoder.integer(Int8.self, t, nil) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decoder.integer(Int16.self, t, nil) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decoder.integer(Int32.self, t, nil) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decoder.integer(Int64.self, t, nil) }
    func decode(_ type: UInt.Type) throws -> UInt { try decoder.integer(UInt.self, t, nil) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.integer(UInt8.self, t, nil) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.integer(UInt16.self, t, nil) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.integer(UInt32.self, t, nil) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.integer(UInt64.self, t, nil) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.decode(type) }
}
