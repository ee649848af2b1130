import Foundation
import Synchronization
import SystemIO
import Workflow

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a command writes: standard output and standard error, replaceable in tests.
public struct Output: Sendable {
    public var writeOut: @Sendable (String) -> Void
    public var writeErr: @Sendable (String) -> Void
    /// Whether stderr messages may use ANSI colours (off when NO_COLOR is set or stderr is not a terminal).
    public var colorEnabled: Bool

    public init(writeOut: @escaping @Sendable (String) -> Void, writeErr: @escaping @Sendable (String) -> Void, colorEnabled: Bool = false) {
        self.writeOut = writeOut
        self.writeErr = writeErr
        self.colorEnabled = colorEnabled
    }

    /// Prints a line to standard output.
    public func out(_ line: String) { writeOut(line + "\n") }
    /// Prints a line to standard error.
    public func err(_ line: String) { writeErr(line + "\n") }
    /// Prints a line of text that holds what devices, files or reports said, every control character
    /// escaped (`ControlCharacters.escaped`): an ESC or a newline from a device cannot rewrite the terminal.
    public func out(escaping line: String) { out(ControlCharacters.escaped(line)) }
    /// `out(escaping:)` for standard error.
    public func err(escaping line: String) { err(ControlCharacters.escaped(line)) }

    /// `error:` (red when colours are on).
    public func styled(_ severity: String) -> String {
        guard colorEnabled else { return severity }
        switch severity {
        case "error": return "\u{1B}[1;31merror\u{1B}[0m"
        case "warning": return "\u{1B}[1;33mwarning\u{1B}[0m"
        default: return severity
        }
    }

    /// The process's real stdout and stderr. A stream that closes (a `| head -1` that has read enough,
    /// a terminal or SSH session that went away) stops the printing to it, never the command.
    public static func standard(environment: [String: String] = ProcessInfo.processInfo.environment) -> Output {
        let color = environment["NO_COLOR"] == nil && environment["TERM"] != "dumb" && isatty(2) != 0
        let stdout = StandardStream(STDOUT_FILENO), stderr = StandardStream(STDERR_FILENO)
        return Output(writeOut: { stdout.write($0) }, writeErr: { stderr.write($0) }, colorEnabled: color)
    }

    /// The same output with standard output sent to standard error: for the human lines of a command
    /// whose standard output carries data (`provision run --events -`).
    public var humanOnStderr: Output {
        Output(writeOut: writeErr, writeErr: writeErr, colorEnabled: colorEnabled)
    }
}

/// One of the process's standard streams, written with write(2).
///
/// `FileHandle.write` traps when the reader has gone (EPIPE) or the descriptor is closed (EBADF); here
/// the first failed write marks the stream gone and later text is dropped. SIGPIPE must be ignored for
/// EPIPE to arrive as an error at all (`ProcessEnvironment.prepare`).
final class StandardStream: Sendable {
    private let fd: Int32
    /// True once a write failed: nothing more is written.
    private let gone = Mutex(false)

    init(_ fd: Int32) { self.fd = fd }

    func write(_ text: String) {
        let bytes = Array(text.utf8)
        gone.withLock { gone in
            guard !gone else { return }
            do throws(FileError) {
                try FileIO.writeAll(fd, bytes, path: fd == STDOUT_FILENO ? "standard output" : "standard error")
            } catch {
                gone = true  // EPIPE, EIO (a hung-up terminal), EBADF, ENOSPC: stop printing here
            }
        }
    }
}

/// What the process sets up before a command runs.
public enum ProcessEnvironment {
    /// Ignores SIGPIPE (a closed pipe becomes EPIPE on the write, handled where it happens, instead of
    /// killing a run mid-device) and gives descriptors 0, 1 and 2 a target if the process started without
    /// them (`provision run ... >&-`): otherwise the journal or the report could be opened as descriptor
    /// 1 and receive what is printed.
    public static func prepare() {
        signal(SIGPIPE, SIG_IGN)
        for fd in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] where fcntl(fd, F_GETFD) == -1 && errno == EBADF {
            let null = open("/dev/null", fd == STDIN_FILENO ? O_RDONLY : O_WRONLY)
            if null >= 0, null != fd {
                _ = dup2(null, fd)
                _ = close(null)
            }
        }
    }
}

/// Captures what a command prints, for tests.
public final class OutputBuffer: Sendable {
    private let state = Mutex<(out: String, err: String)>(("", ""))

    public init() {}

    public var output: Output {
        Output(
            writeOut: { text in self.state.withLock { $0.out += text } },
            writeErr: { text in self.state.withLock { $0.err += text } })
    }

    /// Everything printed to standard output.
    public var stdout: String { state.withLock { $0.out } }
    /// Everything printed to standard error.
    public var stderr: String { state.withLock { $0.err } }
}
