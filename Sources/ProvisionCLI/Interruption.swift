import Dispatch
import Foundation
import Synchronization

/// How every command but `run` ends on SIGINT (Ctrl-C), SIGTERM or SIGHUP: the command's task is
/// cancelled, whatever it computes checks cancellation and stops (a report being read, a regex being
/// matched, a device being talked to), and the process exits 130, "interrupted" (DESIGN.md's exit
/// codes). A second signal while the command is still finishing exits 130 at once.
///
/// `run` stops a line its own way (first signal: no new devices; second: cut), so it opts out
/// (`Command.handlesInterruption`). Installed by the process's `main` only: a test that calls a command
/// in its own process keeps its signals.
enum Interruption {
    /// Runs `body` in a task that a signal cancels; returns its exit status, or 130 if a signal came.
    static func run(output: Output, _ body: @escaping @Sendable () async -> Int32) async -> Int32 {
        let signals = Mutex(0)
        let task = Task { await body() }
        var sources: [any DispatchSourceSignal] = []
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                let n = signals.withLock { n in
                    n += 1
                    return n
                }
                if n == 1 {
                    task.cancel()
                } else {
                    output.err("interrupted")
                    exit(ExitCode.interrupted)
                }
            }
            source.resume()
            sources.append(source)
        }
        let code = await task.value
        for s in sources { s.cancel() }
        return signals.withLock { $0 } > 0 ? ExitCode.interrupted : code
    }
}
