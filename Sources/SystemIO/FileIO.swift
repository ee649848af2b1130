#if canImport(Glibc)
import Glibc
#endif

/// The POSIX calls every file writer needs, written once: each retries on EINTR and throws `FileError`
/// with the path and errno.
public enum FileIO {
    /// How long a write to a FIFO or a device may make no progress before it fails (a reader that
    /// stopped reading must not hold the run).
    public static let stallLimit: Duration = .seconds(10)

    /// Opens `path` (close-on-exec), creating it with `mode` when `flags` has O_CREAT.
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o644) throws(FileError) -> Int32 {
        while true {
            let fd = Glibc.open(path, flags | O_CLOEXEC, mode)
            if fd >= 0 { return fd }
            if errno == EINTR { continue }
            throw FileError(path: path, operation: "open", errno: errno)
        }
    }

    /// Closes `fd` (an EINTR from close is not retried: on Linux the descriptor is gone either way).
    public static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    /// Writes every byte: partial writes continue where they stopped, EINTR is retried, and a
    /// non-blocking descriptor that is full (EAGAIN: a FIFO whose reader is slow) is waited on with
    /// poll(2) for at most `stallLimit` without progress.
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String,
                                stallLimit: Duration = FileIO.stallLimit) throws(FileError) {
        guard var p = bytes.baseAddress else { return }
        var left = bytes.count
        while left > 0 {
            let n = Glibc.write(fd, p, left)
            if n > 0 {
                p += n
                left -= n
                continue
            }
            let e = n < 0 ? errno : EIO
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK {
                try waitWritable(fd, path: path, limit: stallLimit)
                continue
            }
            throw FileError(path: path, operation: "write", errno: e)
        }
    }

    /// `writeAll` for any bytes held in one piece (an array, a slice, `Data`), or copied into one.
    public static func writeAll<Bytes: Collection>(_ fd: Int32, _ bytes: Bytes, path: String,
                                                   stallLimit: Duration = FileIO.stallLimit) throws(FileError) where Bytes.Element == UInt8 {
        let done: Result<Void, FileError>? = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(FileError) in try writeAll(fd, UnsafeRawBufferPointer(buffer), path: path, stallLimit: stallLimit) }
        }
        if let done { return try done.get() }
        // Not contiguous: copied into an array, which is.
        try writeAll(fd, Array(bytes), path: path, stallLimit: stallLimit)
    }

    /// fsync(2), retried on EINTR.
    public static func sync(_ fd: Int32, path: String) throws(FileError) {
        while fsync(fd) != 0 {
            if errno == EINTR { continue }
            throw FileError(path: path, operation: "fsync", errno: errno)
        }
    }

    /// Makes a rename or a file creation in the directory of `path` durable (best effort: some file
    /// systems refuse directory fsync).
    public static func syncDirectory(of path: String) {
        let dir = directory(of: path)
        var fd: Int32
        repeat { fd = Glibc.open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) } while fd < 0 && errno == EINTR
        guard fd >= 0 else { return }
        while fsync(fd) != 0 && errno == EINTR {}
        _ = Glibc.close(fd)
    }

    /// The directory part of `path` ("." when it has none).
    public static func directory(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        if slash == path.utf8.startIndex { return "/" }
        return String(path[..<slash])
    }

    /// The last component of `path`.
    public static func name(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return path }
        return String(path[path.utf8.index(after: slash)...])
    }

    /// Waits until `fd` can take more bytes, for at most `limit`.
    private static func waitWritable(_ fd: Int32, path: String, limit: Duration) throws(FileError) {
        let deadline = ContinuousClock.now + limit
        while true {
            let left = deadline - ContinuousClock.now
            let ms = max(0, Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let n = poll(&p, 1, ms)
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError(path: path, operation: "write", errno: errno)
            }
            if n == 0 {
                throw FileError(path: path, operation: "write", errno: ETIMEDOUT,
                                detail: "nothing could be written for \(limit) (is its reader still reading?)")
            }
            // POLLERR/POLLHUP: the next write reports what happened (EPIPE when the reader left).
            return
        }
    }
}
