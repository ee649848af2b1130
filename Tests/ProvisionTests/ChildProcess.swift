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

    /// The `provision` binary `swift build`/`swift test` built beside the tests.
    static var binary: String {
        let candidates = [packageRoot + "/.build/debug/provision", packageRoot + "/.build/release/provision"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates[0]
    }

    let process = Process()
    let lines: AsyncStream<String>
    private let exited: AsyncStream<Int32>
    private let stderrPipe = Pipe()
    private let stdoutPipe = Pipe()

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
        // Drain stderr so the child never blocks on a full pipe.
        let errHandle = stderrPipe.fileHandleForReading
        Thread.detachNewThread {
            while !errHandle.availableData.isEmpty {}
        }
        let (exitStream, exitContinuation) = AsyncStream.makeStream(of: Int32.self)
        exited = exitStream
        process.terminationHandler = { p in
            exitContinuation.yield(p.terminationStatus)
            exitContinuation.finish()
        }
        try process.run()
    }

    func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    /// Waits for the child to exit (its stdout closes first) and returns its exit status.
    func wait() async -> Int32 {
        for await _ in lines {}
        for await status in exited { return status }
        return process.terminationStatus
    }
}
