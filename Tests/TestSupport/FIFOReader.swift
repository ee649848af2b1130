import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The reading end of a FIFO (or a pipe), opened before the writer runs without waiting for it, and read
/// to the end on a thread of its own: blocking reads never hold a thread of the cooperative pool, which
/// the writer under test may need.
public final class FIFOReader: Sendable {
    private let result: AsyncStream<[UInt8]>
    /// The FIFO's path, when the reader opened one (a writer of our own comes and goes at the end).
    private let path: String?

    /// Opens the FIFO at `path` for reading.
    public init(path: String) throws {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw CocoaError(.fileReadUnknown, userInfo: [NSFilePathErrorKey: path]) }
        self.path = path
        result = Self.read(fd, chunk: 65536)
    }

    /// Reads `fd` (the read end of a pipe) in chunks of at most `chunk` bytes; the reader closes it.
    public init(descriptor fd: Int32, chunk: Int = 65536) {
        path = nil
        result = Self.read(fd, chunk: chunk)
    }

    /// Everything written, once the writer has closed its end. For a FIFO, call it after the writing
    /// process has exited: a writer of our own comes and goes first, so a FIFO the process never opened
    /// ends too (the test then fails on what it got, not on its time limit).
    public func bytes() async -> [UInt8] {
        if let path {
            let fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            if fd >= 0 { close(fd) }
        }
        for await bytes in result { return bytes }
        return []
    }

    private static func read(_ fd: Int32, chunk: Int) -> AsyncStream<[UInt8]> {
        let (stream, continuation) = AsyncStream.makeStream(of: [UInt8].self)
        Thread.detachNewThread {
            continuation.yield(readToEnd(fd, chunk: chunk))
            continuation.finish()
        }
        return stream
    }

    /// poll, then read, until a writer has come and closed its end (a FIFO read before any writer came
    /// returns 0 without meaning the end; poll reports the hang-up only once a writer has come and gone).
    private static func readToEnd(_ fd: Int32, chunk: Int) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: chunk)
        var wrote = false
        while true {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                wrote = true
                out += buffer[0..<n]
            } else if n == 0 {
                if wrote || p.revents & Int16(POLLHUP) != 0 { break }
            } else if errno != EAGAIN && errno != EINTR {
                break
            }
        }
        close(fd)
        return out
    }
}
