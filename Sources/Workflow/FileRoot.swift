import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The one directory the files a workflow sends to devices (`file:`, `length_of:`) come from: the
/// inventory's directory, or the directory its `files: { root: DIR }` names.
///
/// A path in a variable is relative to the root and must stay inside it once `..` and symbolic links
/// are resolved; absolute paths are refused, and only regular files are read (not directories, devices,
/// FIFOs or `/proc` files). Every read goes through here: validation before a run, and each write during
/// it (a file swapped for a link between the two is caught at the write).
public struct FileRoot: Sendable, Equatable {
    /// The directory, as given ("" is the current directory).
    public var directory: String

    public init(_ directory: String) {
        self.directory = directory
    }

    /// The real path of `path` (as written in a variable), checked to lie inside the root.
    public func resolve(_ path: String) throws(ValueError) -> String {
        if path.isEmpty { throw ValueError("the file path is empty") }
        if path.hasPrefix("/") {
            throw ValueError("`\(path)` is an absolute path; file paths are relative to \(shownRoot) (another directory can be named with `files: { root: DIR }` in the inventory)")
        }
        let root = directory.isEmpty ? "." : directory
        guard let realRoot = Self.realPath(root) else { throw ValueError("the file root \(shownRoot) does not exist") }
        let joined = root.hasSuffix("/") ? root + path : root + "/" + path
        guard let real = Self.realPath(joined) else { throw ValueError("cannot read file \(joined)") }
        guard real.hasPrefix(realRoot == "/" ? "/" : realRoot + "/") else {
            throw ValueError("`\(path)` leads outside \(shownRoot) (to \(real)); files must lie inside it")
        }
        return real
    }

    /// The size of a regular file inside the root.
    public func size(of path: String) throws(ValueError) -> Int64 {
        let real = try resolve(path)
        var st = stat()
        guard stat(real, &st) == 0 else { throw ValueError("cannot read file \(real): \(String(cString: strerror(errno)))") }
        try Self.requireRegular(st, real)
        return Int64(st.st_size)
    }

    /// The bytes of a regular file inside the root.
    public func read(_ path: String) throws(ValueError) -> [UInt8] {
        let real = try resolve(path)
        let fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { throw ValueError("cannot read file \(real): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw ValueError("cannot read file \(real): \(String(cString: strerror(errno)))") }
        try Self.requireRegular(st, real)
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var filled = 0
        while filled < bytes.count {
            let n = bytes.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return Glibc.read(fd, base + filled, raw.count - filled)
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw ValueError("cannot read file \(real): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            filled += n
        }
        if filled < bytes.count { bytes.removeLast(bytes.count - filled) }
        return bytes
    }

    private var shownRoot: String { directory.isEmpty ? "the current directory" : directory }

    private static func requireRegular(_ st: stat, _ path: String) throws(ValueError) {
        guard st.st_mode & S_IFMT == S_IFREG else {
            throw ValueError("\(path) is not a regular file (a directory, device, FIFO or socket cannot be sent)")
        }
    }

    package static func realPath(_ path: String) -> String? {
        guard let p = realpath(path, nil) else { return nil }
        defer { free(p) }
        return String(cString: p)
    }
}
