#if canImport(Glibc)
import Glibc
#endif

/// A system call on a file failed: the path, what was being done, and the errno (with a sentence of
/// our own where the system's words would mislead, e.g. a FIFO nobody reads).
public struct FileError: Error, Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var operation: String
    public var errno: Int32
    /// Said instead of the system's text for `errno`, when set.
    public var detail: String?

    public init(path: String, operation: String, errno: Int32, detail: String? = nil) {
        self.path = path
        self.operation = operation
        self.errno = errno
        self.detail = detail
    }

    public var description: String { "\(operation) \(path): \(detail ?? String(cString: strerror(errno)))" }
}
