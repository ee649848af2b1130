#if canImport(Glibc)
import Glibc
#endif

/// Whole documents (report, JUnit, HTML, retry file, simulator dump, bonds) written by the output-path
/// rule (`OutputPath`): a regular file is replaced atomically — a new file beside it, fsync, rename,
/// fsync of the directory — so a reader sees the old document or the new one, never half of one; a
/// FIFO, a device or a standard stream is written as it is.
public enum AtomicFile {
    /// Writes `bytes` to `path`; a new regular file gets `mode`.
    public static func write<Bytes: Collection>(_ bytes: Bytes, to path: String, mode: mode_t = 0o644) throws(FileError)
        where Bytes.Element == UInt8 {
        let file = try OutputFile(path: path, mode: mode, replacement: .replacingOnCommit)
        do throws(FileError) {
            try file.write(bytes)
            try file.commit()
        } catch {
            file.close()
            throw error
        }
    }

    /// Like `write(_:to:mode:)`, with the contents written in chunks by `body` (each chunk written to
    /// `file` goes out at once), so a large document is never held in memory whole. When `body` throws,
    /// a regular file at `path` is left as it was.
    public static func write(to path: String, mode: mode_t = 0o644, _ body: (_ file: OutputFile) throws -> Void) throws {
        let file = try OutputFile(path: path, mode: mode, replacement: .replacingOnCommit)
        do {
            try body(file)
            try file.commit()
        } catch {
            file.close()
            throw error
        }
    }
}
