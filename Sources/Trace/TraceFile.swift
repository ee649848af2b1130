import Foundation
import Synchronization

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
        var handle: FileHandle?
        var buffer: [UInt8] = []
        var failure: TraceError?
        var bytesWritten: Int = 0
    }

    public let path: String
    /// Bytes buffered before they are written to the file.
    public let bufferLimit: Int
    private let state: Mutex<State>

    /// Creates (or truncates) the file at `path`, readable and writable by its owner only (mode 0600):
    /// a trace holds raw bytes, secrets sent to devices included.
    public init(path: String, bufferLimit: Int = 64 * 1024) throws(TraceError) {
        self.path = path
        self.bufferLimit = max(1, bufferLimit)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw TraceError(path: path, operation: "create", reason: Self.reason(for: path, errno: errno))
        }
        // A file that existed keeps its mode through O_CREAT; make it private too.
        guard fchmod(fd, 0o600) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw TraceError(path: path, operation: "create", reason: String(cString: strerror(e)))
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        var s = State(handle: handle)
        s.buffer.reserveCapacity(self.bufferLimit)
        state = Mutex(s)
    }

    /// Appends `bytes`; writes the buffer out when it reaches `bufferLimit`.
    public func append(_ bytes: [UInt8]) throws(TraceError) {
        let failure: TraceError? = state.withLock { s in
            if let f = s.failure { return f }
            guard s.handle != nil else { return TraceError(path: path, operation: "write", reason: "the file is closed") }
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
            guard let handle = s.handle else { return s.failure }
            let f = s.failure ?? drain(&s)
            try? handle.close()
            s.handle = nil
            return f
        }
        if let failure { throw failure }
    }

    /// Bytes appended so far (written or buffered).
    public var size: Int { state.withLock { $0.bytesWritten } }

    /// Bytes waiting in memory.
    public var buffered: Int { state.withLock { $0.buffer.count } }

    private func drain(_ s: inout State) -> TraceError? {
        guard !s.buffer.isEmpty, let handle = s.handle else { return nil }
        do {
            try handle.write(contentsOf: s.buffer)
            s.buffer.removeAll(keepingCapacity: true)
            return nil
        } catch {
            let f = TraceError(path: path, operation: "write", reason: "\(error.localizedDescription)")
            s.failure = f
            s.buffer = []
            try? handle.close()
            s.handle = nil
            return f
        }
    }

    private static func reason(for path: String, errno code: Int32) -> String {
        let dir = (path as NSString).deletingLastPathComponent
        var isDirectory: ObjCBool = false
        if !dir.isEmpty, !FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory) {
            return "the directory \(dir) does not exist"
        }
        if !dir.isEmpty, !isDirectory.boolValue { return "\(dir) is not a directory" }
        return String(cString: strerror(code))
    }

    deinit {
        state.withLock { s in
            _ = drain(&s)
            try? s.handle?.close()
        }
    }
}
