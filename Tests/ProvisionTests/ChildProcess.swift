import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A `provision` child process whose standard output is read line by line as it arrives (for tests that
/// act on events: kill it after the Nth event, interrupt it mid-run).
final class ChildProcess: @unchecked Sendable {  // reason: Process is not Sendable; its use is confined to the test's task and the reader thread only touches `lines`
    static let packageRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// The `provision` binary under test: `PROVISION_BIN` when set (`make test` runs the process suites
    /// a second time against `.build/release/provision`, the binary users run), else the one
    /// `swift build`/`swift test` built beside the tests.
    static var binary: String {
        if let path = ProcessInfo.processInfo.environment["PROVISION_BIN"], !path.isEmpty { return path }
        let candidates = [packageRoot + "/.build/debug/provision", packageRoot + "/.build/release/provision"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates[0]
    }

    /// Runs `script` with bash (`$PROVISION` is the binary under test), for pipelines and redirections
    /// a `Process` cannot set up (`| head -1`, `>&-`). Returns bash's exit status and what it printed.
    static func shell(_ script: String, directory: String) async throws -> (status: Int32, stdout: String, stderr: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = ["-c", script]
        p.currentDirectoryURL = URL(fileURLWithPath: directory)
        var env = ProcessInfo.processInfo.environment
        env["NO_COLOR"] = "1"
        env["PROVISION"] = binary
        p.environment = env
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        let (exited, continuation) = AsyncStream.makeStream(of: Int32.self)
        p.terminationHandler = { continuation.yield($0.terminationStatus); continuation.finish() }
        try p.run()
        // Read both to their end on their own threads, so neither pipe fills up.
        async let stdout = Self.readAll(out.fileHandleForReading)
        async let stderr = Self.readAll(err.fileHandleForReading)
        let (o, e) = await (stdout, stderr)
        var status: Int32 = -1
        for await s in exited { status = s }
        return (status, o, e)
    }

    private static func readAll(_ handle: FileHandle) async -> String {
        for await text in drain(handle) { return text }
        return ""
    }

    /// Everything `handle` delivers up to its end, read by a thread of its own (blocking reads, no
    /// polling), as one string.
    private static func drain(_ handle: FileHandle) -> AsyncStream<String> {
        let (text, done) = AsyncStream.makeStream(of: String.self)
        Thread.detachNewThread {
            var data = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                data.append(chunk)
            }
            done.yield(String(decoding: data, as: UTF8.self))
            done.finish()
        }
        return text
    }

    let process = Process()
    let lines: AsyncStream<String>
    private let exited: AsyncStream<Int32>
    private let stderrPipe = Pipe()
    private let stdoutPipe = Pipe()
    private let stderrText: AsyncStream<String>

    init(_ arguments: [String], directory: String) throws {
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        var env = ProcessInfo.processInfo.environment
        env["NO_COLOR"] = "1"
        process.environment = env
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        lines = stream
        let handle = stdoutPipe.fileHandleForReading
        // A dedicated thread does blocking reads: no polling.
        Thread.detachNewThread {
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let nl = pending.firstIndex(of: 0x0A) {
                    continuation.yield(String(decoding: pending[pending.startIndex..<nl], as: UTF8.self))
                    pending.removeSubrange(pending.startIndex...nl)
                }
            }
            continuation.finish()
        }
        // Drain stderr so the child never blocks on a full pipe; keep it for `stderr()`.
        stderrText = Self.drain(stderrPipe.fileHandleForReading)
        let (exitStream, exitContinuation) = AsyncStream.makeStream(of: Int32.self)
        exited = exitStream
        process.terminationHandler = { p in
            exitContinuation.yield(p.terminationStatus)
            exitContinuation.finish()
        }
        try process.run()
    }

    func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    /// Everything the child wrote to stderr (waits for it to close its stderr).
    func stderr() async -> String {
        for await text in stderrText { return text }
        return ""
    }

    /// Waits for the child to exit (its stdout closes first) and returns its exit status.
    func wait() async -> Int32 {
        for await _ in lines {}
        for await status in exited { return status }
        return process.terminationStatus
    }

    /// Reads the child's output to its end, sending SIGKILL after its `n`-th event line (a JSON line);
    /// returns its exit status and whether it was killed.
    func drain(killingAfterEvent n: Int) async -> (status: Int32, killed: Bool) {
        var seen = 0
        var killed = false
        for await l in lines where l.hasPrefix("{") {
            seen += 1
            if seen == n {
                signal(SIGKILL)
                killed = true
            }
        }
        return (await wait(), killed)
    }
}

extension ChildProcess {
    /// Runs `provision ARGS` in `directory` to its end: the exit status and everything it printed.
    static func run(_ arguments: [String], in directory: String) async throws -> (status: Int32, stdout: String, stderr: String) {
        let child = try ChildProcess(arguments, directory: directory)
        var out = ""
        for await l in child.lines { out += l + "\n" }
        let err = await child.stderr()
        return (await child.wait(), out, err)
    }

    /// Runs `provision ARGS` (events on stdout) in `directory` and sends `signals`: the first after the
    /// first finished device, each next one once the stop was acknowledged (`stop_requested`). Returns the
    /// exit status, the event lines and stderr.
    static func interrupt(_ arguments: [String], in directory: String, _ signals: [Int32]) async throws -> (status: Int32, events: [String], stderr: String) {
        let child = try ChildProcess(arguments, directory: directory)
        var lines: [String] = []
        var sent = 0
        for await l in child.lines {
            lines.append(l)
            let due = sent == 0 ? l.contains("\"device_finished\"") : l.contains("\"stop_requested\"")
            if sent < signals.count, due {
                child.signal(signals[sent])
                sent += 1
            }
        }
        let stderr = await child.stderr()
        return (await child.wait(), lines, stderr)
    }
}
