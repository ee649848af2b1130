import Foundation
import Synchronization

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

    /// `error:` (red when colours are on).
    public func styled(_ severity: String) -> String {
        guard colorEnabled else { return severity }
        switch severity {
        case "error": return "\u{1B}[1;31merror\u{1B}[0m"
        case "warning": return "\u{1B}[1;33mwarning\u{1B}[0m"
        default: return severity
        }
    }

    /// The process's real stdout and stderr.
    public static func standard(environment: [String: String] = ProcessInfo.processInfo.environment) -> Output {
        let color = environment["NO_COLOR"] == nil && environment["TERM"] != "dumb" && isatty(2) != 0
        return Output(
            writeOut: { text in FileHandle.standardOutput.write(Data(text.utf8)) },
            writeErr: { text in FileHandle.standardError.write(Data(text.utf8)) },
            colorEnabled: color)
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
