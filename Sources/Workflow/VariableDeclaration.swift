import BLE

/// A variable declared in a workflow's `vars:` (docs/workflow.md, "Declared variables"):
/// `battery: uint8`, `config: { hex: [1, 200] }`, `device_key: { hex: 16, secret: true }`.
///
/// It gives the variable a type (its format's `valueType`) that validation checks every use against,
/// a length for `hex` (bytes) and `utf8` (UTF-8 bytes) values, and whether the value is secret. An
/// inventory value is read with `value(fromText:name:)`, for every device, before anything runs.
public struct VariableDeclaration: Sendable, Equatable {
    public let format: ValueFormat
    /// Allowed length in bytes, for `hex` and `utf8`.
    public let length: ClosedRange<Int>?
    /// A secret never reaches a report, a journal, a log or an error message.
    public let secret: Bool

    /// Throws when a length is given for a format that has none of its own to constrain.
    public init(format: ValueFormat, length: ClosedRange<Int>? = nil, secret: Bool = false) throws(ValueError) {
        if let length {
            guard format == .hex || format == .utf8 else {
                throw ValueError("a length applies to hex and utf8 values, not to \(format.rawValue)")
            }
            guard length.lowerBound >= 0 else { throw ValueError("a length cannot be negative") }
        }
        self.format = format
        self.length = length
        self.secret = secret
    }

    /// The type every use of the variable is checked against.
    public var type: ValueType { format.valueType }

    /// Reads the variable's value from inventory text: hex digits for `hex`, the text for `utf8`,
    /// decimal or `0x` hex for integers (which must fit the width), a decimal for `sfloat`/`float`, a
    /// version for `version`. Errors name the variable and, unless it is secret, quote the text.
    public func value(fromText text: String, name: String) throws(ValueError) -> TypedValue {
        let shown = secret ? "" : " (\"\(TypedValue.quoted(text))\")"
        let value: TypedValue
        do {
            value = try TypedValue(text: text, as: type)
        } catch {
            throw ValueError(secret ? "\(name) is not \(Self.what(format)) (the value is secret and not shown)" : "\(name): \(error.message)")
        }
        switch value {
        case .integer:
            do {
                _ = try format.encode(value)
            } catch {
                throw ValueError("\(name): \(secret ? "the value does not fit in \(format.rawValue)" : error.message)")
            }
        case .bytes(let b):
            try check(b.count, name: name, shown: shown)
        case .text(let s):
            try check(s.utf8.count, name: name, shown: shown)
        default:
            break
        }
        return value
    }

    private func check(_ count: Int, name: String, shown: String) throws(ValueError) {
        guard let length, !length.contains(count) else { return }
        let needed = length.lowerBound == length.upperBound ? "\(length.lowerBound)" : "\(length.lowerBound) to \(length.upperBound)"
        throw ValueError("\(name) is \(count) byte\(count == 1 ? "" : "s")\(shown), but \(needed) are needed")
    }

    private static func what(_ format: ValueFormat) -> String {
        switch format {
        case .hex: return "valid hex (pairs of 0-9, a-f)"
        default: return "a valid \(format.rawValue) value"
        }
    }
}
