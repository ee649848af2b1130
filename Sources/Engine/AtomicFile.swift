import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Errors from the file system, with the path and errno.
public struct FileError: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var operation: String
    public var errno: Int32
    public var description: String { "\(operation) \(path): \(String(cString: strerror(errno)))" }
}

/// Small POSIX helpers: retry on EINTR, throw with errno. Package-wide: the line store's spool uses them too.
package enum AtomicFile {
    /// Writes `data` to `path` so that a reader sees the old file or the new one, never half of it.
    package static func write(_ data: Data, to path: String) throws {
        try write(to: path) { emit in try emit(data) }
    }

    /// Like `write(_:to:)`, with the contents produced in chunks by `body` (each chunk passed to `emit`
    /// is written at once), so a large file is never held in memory whole.
    package static func write(to path: String, _ body: (_ emit: (Data) throws -> Void) throws -> Void) throws {
        let tmp = path + ".tmp.\(getpid())"
        let fd = try open(tmp, O_WRONLY | O_CREAT | O_TRUNC)
        do {
            try body { chunk in try writeAll(fd, chunk, path: tmp) }
            try fsyncFD(fd, path: tmp)
            _ = Glibc.close(fd)
        } catch {
            _ = Glibc.close(fd)
            unlink(tmp)
            throw error
        }
        guard rename(tmp, path) == 0 else {
            let e = errno
            unlink(tmp)
            throw FileError(path: path, operation: "rename to", errno: e)
        }
        syncDirectory(of: path)
    }

    package static func open(_ path: String, _ flags: Int32) throws -> Int32 {
        while true {
            let fd = Glibc.open(path, flags | O_CLOEXEC, 0o644)
            if fd >= 0 { return fd }
            if errno == EINTR { continue }
            throw FileError(path: path, operation: "open", errno: errno)
        }
    }

    package static func writeAll(_ fd: Int32, _ data: Data, path: String) throws {
        try data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            guard var p = raw.baseAddress else { return }
            var left = raw.count
            while left > 0 {
                let n = Glibc.write(fd, p, left)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw FileError(path: path, operation: "write", errno: errno)
                }
                p += n
                left -= n
            }
        }
    }

    package static func fsyncFD(_ fd: Int32, path: String) throws {
        while fsync(fd) != 0 {
            if errno == EINTR { continue }
            throw FileError(path: path, operation: "fsync", errno: errno)
        }
    }

    /// Makes a rename or a file creation durable (best effort: some file systems refuse directory fsync).
    package static func syncDirectory(of path: String) {
        let dir = (path as NSString).deletingLastPathComponent
        let fd = Glibc.open(dir.isEmpty ? "." : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        _ = Glibc.close(fd)
    }
}
