/// Why a YAML document could not be read, and where.
public struct YAMLError: Error, Sendable, Equatable, CustomStringConvertible {
    public var mark: SourceMark
    public var message: String
    public var hint: String?

    public init(_ message: String, at mark: SourceMark, hint: String? = nil) {
        self.message = message
        self.mark = mark
        self.hint = hint
    }

    public var description: String { "\(mark): \(message)" }
}
