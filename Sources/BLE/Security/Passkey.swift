/// A six-digit passkey (000000 to 999999) for Passkey Entry pairing. Secret: printing it shows "******".
///
/// A device that displays its passkey, or carries it on its label, is paired by entering the same six
/// digits here (from the inventory, as a secret). `digits` is the only way to read it as text.
public struct Passkey: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The passkey as a number, 0...999_999.
    public let value: UInt32

    /// nil when `value` is above 999 999.
    public init?(_ value: UInt32) {
        guard value <= 999_999 else { return nil }
        self.value = value
    }

    /// From one to six decimal digits ("012345", "9"); nil for anything else.
    public init?(_ text: String) {
        guard (1...6).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
              let value = UInt32(text) else { return nil }
        self.value = value
    }

    /// The passkey as the six digits a display shows ("004217").
    public var digits: String {
        let text = String(value)
        return String(repeating: "0", count: max(0, 6 - text.count)) + text
    }

    /// A passkey from 20 random bits, as the specification generates a displayed one (Vol 3 Part H 2.3.5.3).
    package static func fromRandom(_ bytes: [UInt8]) -> Passkey {
        let raw = bytes.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return Passkey(checked: raw % 1_000_000)
    }

    private init(checked value: UInt32) { self.value = value }

    public var description: String { "******" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
