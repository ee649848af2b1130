import AsyncSupport
import Dispatch
import Synchronization
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// Writes every event as one JSON line to `--events PATH`, in order, on a serial queue of its own
/// (emitting never waits for the file, and no write runs on the cooperative pool).
///
/// The path follows the output-path rule (`OutputPath`): a regular file is replaced at once by a new
/// one (mode 0644) that grows as the run goes; a FIFO, a device or a standard stream is written as it
/// is — a FIFO needs its reader already (see `OutputFile`). The first failed write (a reader gone, a
/// full disk) ends the lines; `finish` says so. Standard output (`--events -`) is the command line's
/// own sink, which survives a closed pipe.
public final class JSONLinesEventSink: RunEventSink {
    private let queue = DispatchQueue(label: "provision.events")
    private struct State {
        var file: OutputFile
        var failure: FileError?
    }

    /// Used on `queue` (uncontended: the lock only makes the hand-over between threads explicit).
    private let state: Mutex<State>

    public init(path: String) throws {
        state = Mutex(State(file: try OutputFile(path: path, mode: 0o644, replacement: .replacingNow)))
    }

    public func emit(_ event: RunEvent) {
        var bytes = event.jsonLine()
        bytes.append(0x0A)
        let line = bytes
        queue.async { [self] in
            state.withLock { s in
                guard s.failure == nil else { return }
                do throws(FileError) { try s.file.write(line) } catch { s.failure = error }
            }
        }
    }

    /// Writes what is queued, syncs a regular file and closes it; the first write error, if any.
    @discardableResult
    public func close() async -> FileError? {
        await queue.perform { [self] in
            state.withLock { s in
                if s.failure == nil {
                    do throws(FileError) { try s.file.commit(sync: true) } catch { s.failure = error }
                } else {
                    s.file.close()
                }
                return s.failure
            }
        }
    }

    public func finish() async {
        _ = await close()
    }
}
