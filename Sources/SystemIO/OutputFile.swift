import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// An output opened by the output-path rule (`OutputPath`), for writing as a run goes (events, traces)
/// or whole (`AtomicFile`).
///
/// - A regular file is a new file beside the target (`TARGET.tmp.PID.N`, created with `mode`). Opened
///   with `.replacingNow`, it is renamed over the target at once (the path then names the new file as it
///   grows: a reader following it sees the run's lines, never the old file's); with `.replacingOnCommit`
///   it replaces the target only at `commit()` (fsync, rename, fsync of the directory).
/// - A FIFO, a character device or a standard stream is opened as it is, without blocking: a FIFO that
///   no process has open for reading fails at once (`ENXIO`), since waiting for a reader would hold the
///   run with nothing to show; writes that make no progress for `FileIO.stallLimit` fail likewise.
///
/// Not thread-safe: one owner writes (a serial queue, a lock).
public final class OutputFile {
    /// When a new regular file takes the target's place.
    public enum Replacement: Sendable {
        /// At open: the file grows under the target's name.
        case replacingNow
        /// At `commit()`: until then the target is untouched.
        case replacingOnCommit
    }

    /// The path as given.
    public let path: String
    /// The regular file replaced (symbolic links followed), or nil for a FIFO, device or stream.
    public let target: String?
    private var fd: Int32
    /// The new file while it is not yet renamed over the target.
    private var temporary: String?

    /// Opens `path` by the output-path rule; a new regular file is created with `mode`.
    public init(path: String, mode: mode_t, replacement: Replacement) throws(FileError) {
        self.path = path
        switch try OutputPath.resolve(path) {
        case .asIs(let p):
            target = nil
            do {
                fd = try FileIO.open(p, O_WRONLY | O_APPEND | O_NOCTTY | O_NONBLOCK)
            } catch let e where e.errno == ENXIO {
                throw FileError(path: path, operation: "open", errno: ENXIO,
                                detail: "it is a FIFO that no process is reading; start its reader first")
            }
        case .regularFile(let t):
            target = t
            let (fd, tmp) = try Self.createTemporary(beside: t, mode: mode)
            self.fd = fd
            temporary = tmp
            if replacement == .replacingNow {
                do throws(FileError) {
                    try Self.rename(tmp, over: t)
                } catch {
                    FileIO.close(fd)
                    unlink(tmp)
                    throw error
                }
                temporary = nil
            }
        }
    }

    deinit {
        if fd >= 0 { FileIO.close(fd) }
        if let temporary { unlink(temporary) }
    }

    /// True for a regular file (replaced atomically), false for a FIFO, device or stream.
    public var isRegularFile: Bool { target != nil }

    /// Writes all of `bytes`.
    public func write<Bytes: Collection>(_ bytes: Bytes) throws(FileError) where Bytes.Element == UInt8 {
        guard fd >= 0 else { throw FileError(path: path, operation: "write", errno: EBADF) }
        try FileIO.writeAll(fd, bytes, path: temporary ?? target ?? path)
    }

    /// Makes what was written durable (fsync); nothing to do for a FIFO, device or stream.
    public func sync() throws(FileError) {
        guard fd >= 0, let target else { return }
        try FileIO.sync(fd, path: temporary ?? target)
    }

    /// Ends the file: for `.replacingOnCommit`, fsync, close, rename over the target and fsync of the
    /// directory; otherwise close (after an fsync of a regular file when `sync` is true).
    public func commit(sync: Bool = true) throws(FileError) {
        guard fd >= 0 else { return }
        do throws(FileError) {
            if sync || temporary != nil { try self.sync() }
        } catch {
            close()
            throw error
        }
        FileIO.close(fd)
        fd = -1
        if let temporary, let target {
            self.temporary = nil
            do throws(FileError) {
                try Self.rename(temporary, over: target)
            } catch {
                unlink(temporary)
                throw error
            }
        }
    }

    /// Closes without committing: a new file not yet renamed over the target is removed (the target
    /// stays as it was).
    public func close() {
        if fd >= 0 { FileIO.close(fd) }
        fd = -1
        if let temporary { unlink(temporary) }
        temporary = nil
    }

    // MARK: - Regular files

    private static let counter = Counter()

    /// A new file in the target's directory, made with O_EXCL (a name left by a crash is skipped).
    private static func createTemporary(beside target: String, mode: mode_t) throws(FileError) -> (Int32, String) {
        let pid = getpid()
        while true {
            let tmp = "\(target).tmp.\(pid).\(counter.next())"
            do {
                return (try FileIO.open(tmp, O_WRONLY | O_CREAT | O_EXCL, mode: mode), tmp)
            } catch let e where e.errno == EEXIST {
                continue
            } catch {
                throw FileError(path: target, operation: "create a file beside", errno: error.errno)
            }
        }
    }

    /// rename(2) then an fsync of the directory, so the new name survives a crash.
    private static func rename(_ from: String, over target: String) throws(FileError) {
        guard Glibc.rename(from, target) == 0 else {
            throw FileError(path: target, operation: "rename over", errno: errno)
        }
        FileIO.syncDirectory(of: target)
    }
}

/// Numbers for temporary file names (unique within the process).
private final class Counter: Sendable {
    private let value = Atomic<UInt64>(0)
    func next() -> UInt64 { value.add(1, ordering: .relaxed).newValue }
}
