import YAML

/// Why a device model, a per-device override or a state file could not be used, and where:
/// `file:line:column: message`.
public struct SimulatorError: Error, Sendable, Equatable, CustomStringConvertible {
    public var file: String
    public var mark: SourceMark?
    public var message: String
    public var hint: String?

    public init(_ message: String, file: String, at mark: SourceMark? = nil, hint: String? = nil) {
        self.file = file
        self.mark = mark
        self.message = message
        self.hint = hint
    }

    public var description: String {
        var s = file
        if let mark { s += ":\(mark.line):\(mark.column)" }
        s += ": \(message)"
        if let hint { s += " (\(hint))" }
        return s
    }
}
