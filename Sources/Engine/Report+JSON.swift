import Foundation

extension RunReport {
    /// The report as JSON text, as `write(to:)` writes it (keys sorted, snake_case), streamed to `emit`
    /// in chunks (`provision report --json` prints a report this way).
    public func writeJSON(pretty: Bool = true, to emit: (Data) throws -> Void) throws {
        try RecordEncoder.stream(self, pretty: pretty, chunk: 1 << 20, emit: emit)
    }
}
