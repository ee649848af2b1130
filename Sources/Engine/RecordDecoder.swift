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

    /// Decodes `type` from a parsed text (its root, or the value at token `token`).
    package func decode<T: Decodable>(_ type: T.Type, from tape: JSONTape, at token: Int = 0) throws(RecordDecodingError) -> T {
        let root = TapeDecoder(tape: tape, token: token, codingPath: [], jsonPath: [], context: self)
        do {
            return try root.decode(type)
        } catch let e as RecordDecodingError {
            throw e
        } catch {
            throw root.positioned(error)
        }
    }

    fileprivate func name(_ key: some CodingKey) -> [UInt8] {
        if let hit = names[key.stringValue] { return hit }
        let converted = Array(SnakeCase.convert(key.stringValue).utf8)
        names[key.stringValue] = converted
        return converted
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

private final class TapeDecoder: Decoder {
    let tape: JSONTape
    let token: Int
    let codingPath: [any CodingKey]
    let jsonPath: [JSONTape.PathComponent]
    let context: RecordDecoder
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(tape: JSONTape, token: Int, codingPath: [any CodingKey], jsonPath: [JSONTape.PathComponent], context: RecordDecoder) {
        self.tape = tape
        self.token = token
        self.codingPath = codingPath
        self.jsonPath = jsonPath
        self.context = context
    }

    var kind: JSONTape.Kind { tape.tokens[token].kind }

    func fail(_ message: String, at token: Int? = nil, path: [JSONTape.PathComponent]? = nil) -> RecordDecodingError {
        RecordDecodingError(offset: tape.offset(of: token ?? self.token), path: path ?? jsonPath, message: message)
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

    func mismatch(_ expected: String) -> RecordDecodingError {
        kind == .null ? fail("is null, but \(expected) is needed") : fail("is \(Self.found(kind)), not \(expected)")
    }

    /// A decoder for child token `child`, one step further down.
    func child(_ child: Int, key: any CodingKey, component: JSONTape.PathComponent) -> TapeDecoder {
        TapeDecoder(tape: tape, token: child, codingPath: codingPath + [key], jsonPath: jsonPath + [component], context: context)
    }

    // MARK: Scalars

    func string() throws(RecordDecodingError) -> String {
        guard kind == .string else { throw mismatch("text") }
        do {
            return try tape.string(token)
        } catch {
            throw fail(error.message)
        }
    }

    func bool() throws(RecordDecodingError) -> Bool {
        switch kind {
        case .true: return true
        case .false: return false
        default: throw mismatch("true or false")
        }
    }

    func double() throws(RecordDecodingError) -> Double {
        guard kind == .number else { throw mismatch("a number") }
        guard let d = tape.double(token) else {
            throw fail("\(tape.numberText(token)) is out of range for a number (0, or about 2.2e-308 to 1.8e308 either side of it)")
        }
        return d
    }

    func integer<I: FixedWidthInteger>(_ type: I.Type) throws(RecordDecodingError) -> I {
        guard kind == .number else { throw mismatch("a whole number") }
        let text = tape.numberText(token)
        let range = "\(I.min) to \(I.max)"
        if let v = tape.int64(token) {
            guard let exact = I(exactly: v) else { throw fail("\(text) is out of range (\(range))") }
            return exact
        }
        // Beyond Int64: only a UInt64 (or wider) can hold it, written as digits.
        if I.bitWidth >= 64, !I.isSigned, tape.isIntegerSyntax(token), let v = UInt64(text), let exact = I(exactly: v) { return exact }
        if tape.isIntegerSyntax(token) || tape.double(token).map({ $0 == $0.rounded() }) == true {
            throw fail("\(text) is out of range (\(range))")
        }
        throw fail("\(text) is not a whole number")
    }

    /// A JSON scalar as written: a number in integer form must fit an Int64.
    func scalar() throws(RecordDecodingError) -> JSONScalar {
        switch kind {
        case .null: return .null
        case .true: return .boolean(true)
        case .false: return .boolean(false)
        case .string: return .string(try string())
        case .number:
            if let n = tape.int64(token) { return .integer(n) }
            if tape.isIntegerSyntax(token) {
                throw fail("\(tape.numberText(token)) is out of range for an integer (\(Int64.min) to \(Int64.max))")
            }
            return .real(try double())
        case .object, .array:
            throw mismatch("a single value (text, a number, true, false or null)")
        }
    }

    // MARK: Values

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        // The types records are made of, read straight from the tape (no container in between).
        if T.self == String.self, let v = try string() as? T { return v }
        if T.self == Double.self, let v = try double() as? T { return v }
        if T.self == Int.self, let v = try integer(Int.self) as? T { return v }
        if T.self == Bool.self, let v = try bool() as? T { return v }
        if T.self == JSONScalar.self, let v = try scalar() as? T { return v }
        if let map = T.self as? any StringKeyedDecodableMap.Type, let v = try map.decodeMap(from: self) as? T { return v }
        do {
            return try T(from: self)
        } catch let e as RecordDecodingError {
            throw e
        } catch {
            throw positioned(error)
        }
    }

    /// An error a type's own `init(from:)` threw (`DecodingError`, or its own), placed at the value
    /// its coding path leads to from here.
    func positioned(_ error: any Error) -> RecordDecodingError {
        guard let e = error as? DecodingError else { return fail("\(error)") }
        func place(_ context: DecodingError.Context) -> (Int, [JSONTape.PathComponent]) {
            var path = jsonPath
            var t = token
            for key in context.codingPath.dropFirst(codingPath.count) {
                let component: JSONTape.PathComponent
                if let i = key.intValue {
                    component = .index(i)
                } else {
                    component = .key(key is MemberKey ? key.stringValue : SnakeCase.convert(key.stringValue))
                }
                path.append(component)
                if let next = tape.locate([component], from: t) { t = next }
            }
            return (t, path)
        }
        switch e {
        case .dataCorrupted(let c):
            let (t, path) = place(c)
            if tape.tokens[t].kind == .string, let text = try? tape.string(t), c.debugDescription.hasPrefix("Cannot initialize") {
                // An enumeration's raw value this version does not have (`"outcome": "weird"`).
                return fail("\(JSONString.quoted(text)) is not a value this version of provision knows", at: t, path: path)
            }
            return fail(c.debugDescription, at: t, path: path)
        case .keyNotFound(let key, let c):
            let (t, path) = place(c)
            return fail("`\(SnakeCase.convert(key.stringValue))` is missing", at: t, path: path)
        case .typeMismatch(let type, let c):
            let (t, path) = place(c)
            return fail("is \(Self.found(tape.tokens[t].kind)), not \(type)", at: t, path: path)
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
private protocol StringKeyedDecodableMap {
    static func decodeMap(from decoder: TapeDecoder) throws -> Self
}

extension Dictionary: StringKeyedDecodableMap where Key == String, Value: Decodable {
    fileprivate static func decodeMap(from decoder: TapeDecoder) throws -> Self {
        guard decoder.kind == .object else { throw decoder.mismatch("an object") }
        var out: [String: Value] = [:]
        let members = decoder.tape.members(of: decoder.token)
        out.reserveCapacity(members.count)
        for m in members {
            let key: String
            do {
                key = try decoder.tape.string(m.key)
            } catch {
                throw decoder.fail(error.message, at: m.key)
            }
            let child = decoder.child(m.value, key: MemberKey(key), component: .key(key))
            out[key] = try child.decode(Value.self)
        }
        return out
    }
}

/// A coding key for a dictionary's member or an array's element.
private struct MemberKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(_ s: String) { stringValue = s }
    init(index: Int) { stringValue = "Index \(index)"; intValue = index }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { self.init(index: intValue) }
}

// MARK: - Containers

private struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: TapeDecoder
    let members: [(key: Int, value: Int)]

    init(decoder: TapeDecoder) {
        self.decoder = decoder
        members = decoder.tape.members(of: decoder.token)
    }

    var codingPath: [any CodingKey] { decoder.codingPath }

    /// Keys as `convertFromSnakeCase` shows them (`att_round_trips` → `attRoundTrips`).
    var allKeys: [Key] {
        members.compactMap { m in (try? decoder.tape.string(m.key)).flatMap { Key(stringValue: Self.camel($0)) } }
    }

    static func camel(_ name: String) -> String {
        let parts = name.split(separator: "_", omittingEmptySubsequences: true)
        guard parts.count > 1 else { return name }
        let leading = name.prefix { $0 == "_" }, trailing = String(name.reversed().prefix { $0 == "_" })
        return leading + parts[0].lowercased() + parts.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst().lowercased() }.joined() + trailing
    }

    /// The member's value token, the last one when a name is written twice (as `JSONDecoder`).
    func value(_ key: Key) -> Int? {
        let name = decoder.context.name(key)
        var found: Int?
        for m in members where decoder.tape.stringEquals(m.key, name) { found = m.value }
        return found
    }

    func child(_ key: Key) throws(RecordDecodingError) -> TapeDecoder {
        let name = decoder.context.name(key)
        guard let v = value(key) else {
            throw decoder.fail("`\(String(decoding: name, as: UTF8.self))` is missing")
        }
        return decoder.child(v, key: key, component: .key(String(decoding: name, as: UTF8.self)))
    }

    func contains(_ key: Key) -> Bool { value(key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { try child(key).kind == .null }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try child(key).bool() }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try child(key).string() }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try child(key).double() }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
        let c = try child(key)
        let d = try c.double()
        guard let f = Float(exactly: d) ?? (abs(d) <= Double(Float.greatestFiniteMagnitude) ? Float(d) : nil) else {
            throw c.fail("\(d) is out of range for a Float")
        }
        return f
    }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try child(key).integer(Int.self) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try child(key).integer(Int8.self) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try child(key).integer(Int16.self) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try child(key).integer(Int32.self) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try child(key).integer(Int64.self) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try child(key).integer(UInt.self) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try child(key).integer(UInt8.self) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try child(key).integer(UInt16.self) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try child(key).integer(UInt32.self) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try child(key).integer(UInt64.self) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try child(key).decode(type) }

    // Optional members: absent or null is nil (the common case, read without a container).
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        guard let c = try optionalChild(key) else { return nil }
        return try c.string()
    }
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        guard let c = try optionalChild(key) else { return nil }
        return try c.bool()
    }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        guard let c = try optionalChild(key) else { return nil }
        return try c.double()
    }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
        guard let c = try optionalChild(key) else { return nil }
        return try c.integer(Int.self)
    }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let c = try optionalChild(key) else { return nil }
        return try c.decode(type)
    }

    private func optionalChild(_ key: Key) throws(RecordDecodingError) -> TapeDecoder? {
        guard value(key) != nil else { return nil }
        let c = try child(key)
        return c.kind == .null ? nil : c
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

    private mutating func element() throws(RecordDecodingError) -> TapeDecoder {
        guard !isAtEnd else {
            throw decoder.fail("has \(count ?? 0) element(s); more were expected")
        }
        let c = decoder.child(next, key: MemberKey(index: currentIndex), component: .index(currentIndex))
        next = decoder.tape.next(after: next)
        currentIndex += 1
        return c
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else { throw decoder.fail("has \(count ?? 0) element(s); more were expected") }
        guard decoder.tape.tokens[next].kind == .null else { return false }
        _ = try element()
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try element().bool() }
    mutating func decode(_ type: String.Type) throws -> String { try element().string() }
    mutating func decode(_ type: Double.Type) throws -> Double { try element().double() }
    mutating func decode(_ type: Int.Type) throws -> Int { try element().integer(Int.self) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try element().integer(Int64.self) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try element().integer(UInt64.self) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try element().decode(type) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try element().container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try element().unkeyedContainer() }

    mutating func superDecoder() throws -> any Decoder { try element() }
}

private struct SingleContainer: SingleValueDecodingContainer {
    let decoder: TapeDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }

    func decodeNil() -> Bool { decoder.kind == .null }
    func decode(_ type: Bool.Type) throws -> Bool { try decoder.bool() }
    func decode(_ type: String.Type) throws -> String { try decoder.string() }
    func decode(_ type: Double.Type) throws -> Double { try decoder.double() }
    func decode(_ type: Float.Type) throws -> Float {
        let d = try decoder.double()
        guard abs(d) <= Double(Float.greatestFiniteMagnitude) else { throw decoder.fail("\(d) is out of range for a Float") }
        return Float(d)
    }
    func decode(_ type: Int.Type) throws -> Int { try decoder.integer(Int.self) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decoder.integer(Int8.self) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decoder.integer(Int16.self) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decoder.integer(Int32.self) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decoder.integer(Int64.self) }
    func decode(_ type: UInt.Type) throws -> UInt { try decoder.integer(UInt.self) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.integer(UInt8.self) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.integer(UInt16.self) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.integer(UInt32.self) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.integer(UInt64.self) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.decode(type) }
}
