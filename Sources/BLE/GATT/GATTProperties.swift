/// Characteristic properties (Vol 3 Part G 3.3.1.1).
public struct GATTProperties: OptionSet, Sendable, Hashable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let broadcast = GATTProperties(rawValue: 0x01)
    public static let read = GATTProperties(rawValue: 0x02)
    public static let writeWithoutResponse = GATTProperties(rawValue: 0x04)
    public static let write = GATTProperties(rawValue: 0x08)
    public static let notify = GATTProperties(rawValue: 0x10)
    public static let indicate = GATTProperties(rawValue: 0x20)
    public static let authenticatedSignedWrites = GATTProperties(rawValue: 0x40)
    public static let extendedProperties = GATTProperties(rawValue: 0x80)

    /// Names for diagnostics: "read, notify".
    public var names: [String] {
        var out: [String] = []
        if contains(.broadcast) { out.append("broadcast") }
        if contains(.read) { out.append("read") }
        if contains(.writeWithoutResponse) { out.append("write-without-response") }
        if contains(.write) { out.append("write") }
        if contains(.notify) { out.append("notify") }
        if contains(.indicate) { out.append("indicate") }
        return out
    }
}
