/// A protobuf enum as an open set: any value a device sends survives (proto3 enums are open), known
/// ones have names.
public protocol ProtoEnum: RawRepresentable, Hashable, Sendable, CustomStringConvertible where RawValue == Int32 {
    init(rawValue: Int32)
    /// The names of the values the .proto file declares.
    static var names: [Int32: String] { get }
}

extension ProtoEnum {
    public var description: String { Self.names[rawValue] ?? "\(rawValue)" }
    /// True for a value the .proto file declares.
    public var isKnown: Bool { Self.names[rawValue] != nil }
}
