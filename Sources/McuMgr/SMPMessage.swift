import CBOR

/// The CBOR body of one SMP request or response, as its command defines it: read from and written to
/// CBOR declaratively, both ways (the client writes requests and reads responses; the simulated device
/// does the opposite), so every message round-trips in tests.
public protocol SMPMessage: Sendable, Equatable {
    /// Reads the body; unknown keys are ignored (devices add fields), a key of the wrong type is an error.
    init(body: CBOR) throws(SMPMessageError)
    /// The body, keys in the order Zephyr's clients write them.
    var body: CBOR { get }
}

/// A request: its group, command and operation (Zephyr's group documents name each), and the
/// message its success response carries.
public protocol SMPRequest: SMPMessage {
    associatedtype Response: SMPMessage
    static var group: SMPGroup { get }
    static var command: UInt8 { get }
    /// `read` or `write`.
    static var op: SMPOp { get }
}

/// A success response that carries nothing (an empty map; `rc: 0` tolerated).
public struct EmptyResponse: SMPMessage {
    public init() {}
    public init(body: CBOR) throws(SMPMessageError) { _ = try SMPFields(body, "response") }
    public var body: CBOR { .map([]) }
}

/// Typed access to the pairs of a message's map, each key optional or required, each of its type.
struct SMPFields {
    let body: CBOR
    let what: String

    init(_ body: CBOR, _ what: String) throws(SMPMessageError) {
        guard case .map = body else { throw SMPMessageError("\(what) is \(body.kindName), not a map") }
        self.body = body
        self.what = what
    }

    private func typed<T>(_ key: String, _ type: String, _ read: (CBOR) -> T?) throws(SMPMessageError) -> T? {
        guard let v = body[key] else { return nil }
        guard let t = read(v) else { throw SMPMessageError("\(what): `\(key)` must be \(type), not \(v.kindName)") }
        return t
    }

    private func present<T>(_ key: String, _ value: T?) throws(SMPMessageError) -> T {
        guard let value else { throw SMPMessageError("\(what) has no `\(key)`") }
        return value
    }

    func uint(_ key: String) throws(SMPMessageError) -> UInt64? { try typed(key, "an unsigned integer") { $0.unsignedValue } }
    func int(_ key: String) throws(SMPMessageError) -> Int64? { try typed(key, "an integer") { $0.intValue } }
    func bytes(_ key: String) throws(SMPMessageError) -> [UInt8]? { try typed(key, "a byte string") { $0.bytesValue } }
    func text(_ key: String) throws(SMPMessageError) -> String? { try typed(key, "a text string") { $0.textValue } }
    func bool(_ key: String) throws(SMPMessageError) -> Bool? { try typed(key, "a boolean") { $0.boolValue } }
    func array(_ key: String) throws(SMPMessageError) -> [CBOR]? { try typed(key, "an array") { $0.arrayItems } }

    func uint(required key: String) throws(SMPMessageError) -> UInt64 { try present(key, try uint(key)) }
    func bytes(required key: String) throws(SMPMessageError) -> [UInt8] { try present(key, try bytes(key)) }
    func text(required key: String) throws(SMPMessageError) -> String { try present(key, try text(key)) }
    func bool(required key: String) throws(SMPMessageError) -> Bool { try present(key, try bool(key)) }
    func array(required key: String) throws(SMPMessageError) -> [CBOR] { try present(key, try array(key)) }

    /// An unsigned value that must fit `Int` (sizes and offsets).
    func size(_ key: String) throws(SMPMessageError) -> Int? {
        guard let v = try uint(key) else { return nil }
        guard v <= UInt64(Int32.max) else { throw SMPMessageError("\(what): `\(key)` \(v) is out of range") }
        return Int(v)
    }

    func size(required key: String) throws(SMPMessageError) -> Int { try present(key, try size(key)) }
}

/// Builds a message's map, optional keys left out when nil.
struct SMPBody {
    private(set) var pairs: [CBOR.Pair] = []

    mutating func add(_ key: String, _ value: CBOR?) {
        if let value { pairs.append(CBOR.Pair(.text(key), value)) }
    }

    var cbor: CBOR { .map(pairs) }
}
