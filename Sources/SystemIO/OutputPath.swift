#if canImport(Glibc)
import Glibc
#endif

/// The output-path rule, decided in one place for every file `provision` writes (report, journal,
/// events, JUnit, HTML, trace, retry file, bonds, spool, simulator state and dump):
///
/// - **A regular file** (or nothing yet) is written as a new file beside it and renamed over it
///   (`AtomicFile`, `OutputFile`): a reader sees the old file or the new one, never half of one. The
///   new file has the mode its writer documents (0600 for what holds secrets, else 0644).
/// - **A FIFO, a character device, or a standard stream** (`/dev/stdout`, `/dev/stderr`, `/dev/fd/N`,
///   `/proc/self/fd/N`) is opened and written as it is: never renamed over, never chmodded, never
///   truncated, never fsynced.
/// - **A symbolic link** is followed to its target, even a target that does not exist yet: the target
///   is replaced, the link stays (and what goes with a file, a lock, goes beside the target).
/// - Anything else (a directory, a socket, a block device) is refused.
public enum OutputPath: Sendable, Equatable {
    /// A regular file at this path (symbolic links followed); it may not exist yet.
    case regularFile(String)
    /// Written as it is, at this path (as given).
    case asIs(String)

    /// What is at `path`, by the rule above.
    public static func resolve(_ path: String) throws(FileError) -> OutputPath {
        if isStandardStream(path) { return .asIs(path) }
        var st = stat()
        if stat(path, &st) == 0 {
            switch st.st_mode & S_IFMT {
            case S_IFREG:
                return .regularFile(try target(of: path))
            case S_IFIFO, S_IFCHR:
                return .asIs(path)
            case S_IFDIR:
                throw FileError(path: path, operation: "write", errno: EISDIR)
            default:
                throw FileError(path: path, operation: "write", errno: EINVAL,
                                detail: "not a regular file, a FIFO or a character device")
            }
        }
        let e = errno
        guard e == ENOENT else { throw FileError(path: path, operation: "stat", errno: e) }
        // Nothing there, or a link to something that does not exist yet: where the file will be.
        return .regularFile(try target(of: path))
    }

    /// The standard streams by name: written as they are whatever they are (a terminal, a pipe, or a
    /// file the shell opened: renaming over that file would take it from the shell).
    public static func isStandardStream(_ path: String) -> Bool {
        ["/dev/stdout", "/dev/stderr", "/dev/stdin"].contains(path)
            || path.hasPrefix("/dev/fd/") || path.hasPrefix("/proc/self/fd/")
    }

    /// Where the file named by `path` is: `path` itself unless it is a symbolic link, else the end of the
    /// chain of links (relative links taken from the directory of the link), which need not exist.
    public static func target(of path: String) throws(FileError) -> String {
        var current = path
        for _ in 0..<40 {
            var st = stat()
            if lstat(current, &st) != 0 {
                if errno == ENOENT { return current }
                throw FileError(path: path, operation: "stat", errno: errno)
            }
            guard st.st_mode & S_IFMT == S_IFLNK else { return current }
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let n = readlink(current, &buffer, buffer.count - 1)
            guard n > 0 else { throw FileError(path: path, operation: "readlink", errno: n < 0 ? errno : EINVAL) }
            let link = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            current = link.hasPrefix("/") ? link : FileIO.directory(of: current) + "/" + link
        }
        throw FileError(path: path, operation: "resolve", errno: ELOOP)
    }
}
