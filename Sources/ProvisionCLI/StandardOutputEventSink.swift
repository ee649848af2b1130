import AsyncSupport
import Dispatch
import Engine
import Foundation

/// `--events -`: every event as one JSON line on standard output, in order, written on a serial queue
/// (emitting never waits for the reader) through `Output`, so a reader that goes away (`| head -1`)
/// ends the lines, never the run.
final class StandardOutputEventSink: RunEventSink {
    private let output: Output
    private let queue = DispatchQueue(label: "provision.events.stdout")

    init(output: Output) {
        self.output = output
    }

    func emit(_ event: RunEvent) {
        let line = String(decoding: event.jsonLine(), as: UTF8.self)
        queue.async { [output] in output.out(line) }
    }

    /// Returns once every event emitted before it is written.
    func finish() async {
        await queue.perform {}
    }
}
