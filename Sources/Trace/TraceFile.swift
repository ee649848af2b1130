import Foundation
import Synchronization
import SystemIO

/// Why a trace could not be written: the file, what was being done, and the system's reason.
public struct TraceError: Error, Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var operation: String
    public var reason: String

    public init(path: String, operation: String, reason: String) {
        self.path = path
        self.operation = operation
        self.reason = reason
    }

    public var description: String { "cannot \(operation) trace file \(path): \(reason)" }
}

/// An append-only file written through a bounded buffer: whatever the length of a run, a trace holds
/// at most `bufferLimit` bytes in memory. Safe to use from any task or thread; writes are serialised.
///
/// A write error is thrown to the writer that hits it; after it the file is closed and every later
/// write throws the same error (a trace never stops a run by itself: the caller decides).
public final class TraceFile: Sendable {
    private struct State {
        var file: OutputFile?
        var buffer: [UInt8] = []
        var failure: TraceError?
        var bytesWritten: Int = 0
    }

    public let path: String
    /// Bytes buffered before they are written to the file.
    public let bufferLimit: Int
    private let state: Mutex<State>

    /// Opens `path` by the output-path rule (`OutputPath`): a regular file is replaced by a new one
    /// readable and writable by its owner only (mode 0600: a trace holds raw bytes, secrets sent to
    /// devices included) that grows as the run goes; a FIFO, a device or a standard stream is written as
    /// it is, its mode untouched (a FIFO needs its reader already).
    public init(path: String, bufferLimit: Int = 64 * 1024) throws(TraceError) {
        self.path = path
        self.bufferLimit = max(1, bufferLimit)
        let file: OutputFile
        do throws(FileError) {
            file = try OutputFile(path: path, mode: 0o600, replacement: .replacingNow)
        } catch {
            throw TraceError(path: path, operation: "create", reason: Self.reason(for: path, error))
        }
        var s = State(file: file)
        s.buffer.reserveCapacity(self.bufferLimit)
        state = Mutex(s)
    }

    /// Appends `bytes`; writes the buffer out when it reaches `bufferLimit`.
    public func append(_ bytes: [UInt8]) throws(TraceError) {
        let failure: TraceError? = state.withLock { s in
            if let f = s.failure { return f }
            guard s.file != nil else { return TraceError(path: path, operation: "write", reason: "the file is closed") }
            s.buffer.append(contentsOf: bytes)
            s.bytesWritten += bytes.count
            return s.buffer.count >= bufferLimit ? drain(&s) : nil
        }
        if let failure { throw failure }
    }

    /// Writes out whatever is buffered.
    public func flush() throws(TraceError) {
        let failure: TraceError? = state.withLock { s in s.failure ?? drain(&s) }
        if let failure { throw failure }
    }

    /// Flushes and closes the file. Closing twice is harmless.
    public func close() throws(TraceError) {
        let failure: TraceError? = state.withLock { s in
            guard let file = s.file else { return s.failure }
            var f = s.failure ?? drain(&s)
            if f == nil {
                do throws(FileError) { try file.commit(sync: false) } catch {
                    f = TraceError(path: path, operation: "close", reason: error.detail ?? String(cString: strerror(error.errno)))
                }
            } else {
                file.close()
            }
            s.file = nil
            return f
        }
        if let failure { throw failure }
    }

    /// Bytes appended so far (written or buffered).
    public var size: Int { state.withLock { $0.bytesWritten } }

    /// Bytes waiting in memory.
    public var buffered: Int { state.withLock { $0.buffer.count } }

    private func drain(_ s: inout State) -> TraceError? {
        guard !s.buffer.isEmpty, let file = s.file else { return nil }
        do throws(FileError) {
            try file.write(s.buffer)
            s.buffer.removeAll(keepingCapacity: true)
            return nil
        } catch {
            let f = TraceError(path: path, operation: "write", reason: error.detail ?? String(cString: strerror(error.errno)))
            s.failure = f
            s.buffer = []
            file.close()
            s.file = nil
            return f
        }
    }

    private static func reason(for path: String, _ error: FileError) -> String {
        let dir = (path as NSString).deletingLastPathComponent
        var isDirectory: ObjCBool = false
        if !dir.isEmpty, !FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory) {
            return "the directory \(dir) does not exist"
        }
        if !dir.isEmpty, !isDirectory.boolValue { return "\(dir) is not a directory" }
        return error.detail ?? String(cString: strerror(error.errno))
    }

    deinit {
        state.withLock { s in
            _ = drain(&s)
            s.file?.close()
        }
    }
}
