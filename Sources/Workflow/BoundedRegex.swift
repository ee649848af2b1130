import BLE
import CPCRE2
import Synchronization

/// A regular expression whose matching cannot run away (docs/reliability.md, "A regex cannot hang a
/// run"): `verify: matches`, an `await`'s `matches`/`busy`/`fails_on` and a `confirm` match values a
/// device sent, and a value from a device is hostile (`'^(a+)+$'` against 24 `a` and a `!` backtracks
/// for minutes in a backtracking engine without limits — Swift's `Regex` and libc's `regexec` both).
///
/// The engine is PCRE2 (Perl-compatible syntax), matched with:
/// - a **match limit** (`matchLimit` backtracking steps), a **depth limit** and a **heap limit**: a
///   runaway match ends with `MatchError.gaveUp` in well under a second, whatever the value;
/// - a **callout** at every step of the pattern (compiled with auto-callouts) that, every
///   `checkInterval` steps, checks the task's cancellation (`MatchError.cancelled`: Ctrl-C or SIGTERM
///   cut the device) and the step's deadline (`MatchError.deadline`).
///
/// Patterns are compiled once and shared (a run matches the same few patterns on every device); a
/// pattern that does not compile says why and at which character (`CompileError`), which validation
/// reports before anything runs.
public final class BoundedRegex: @unchecked Sendable {  // reason: a compiled pcre2_code is immutable; PCRE2 lets threads match it at once, each with its own match data
    /// Backtracking steps one match may take (PCRE2's match limit).
    public static let matchLimit: UInt32 = 1_000_000
    /// Nested backtracking frames (PCRE2's depth limit).
    public static let depthLimit: UInt32 = 10_000
    /// Heap one match may use for its frames, in KiB (PCRE2's heap limit).
    public static let heapLimit: UInt32 = 16 * 1024
    /// Steps between two looks at the task and the clock.
    static let checkInterval = 4096

    public let pattern: String
    private let code: OpaquePointer

    /// Why a pattern does not compile: PCRE2's message and the character (1-based) it points at.
    public struct CompileError: Error, Sendable, Equatable, CustomStringConvertible {
        public var message: String
        /// 1-based character position in the pattern.
        public var position: Int
        public var description: String { "\(message) at character \(position)" }
    }

    /// Why a match ended without an answer.
    public enum MatchError: Error, Sendable, Equatable {
        /// A limit was reached: the pattern backtracks too much on this value.
        case gaveUp(String)
        /// The step's deadline passed during the match.
        case deadline
        /// The task was cancelled during the match.
        case cancelled
    }

    private init(pattern: String, code: OpaquePointer) {
        self.pattern = pattern
        self.code = code
    }

    deinit { pcre2_code_free_8(code) }

    // MARK: Compiling

    private static let cache = Mutex<[String: Result<BoundedRegex, CompileError>]>([:])
    /// Workflows hold few patterns; a bound keeps hostile input from growing the cache without end.
    private static let cacheLimit = 1024

    /// The compiled pattern (cached), or why it does not compile.
    public static func compile(_ pattern: String) -> Result<BoundedRegex, CompileError> {
        if let hit = cache.withLock({ $0[pattern] }) { return hit }
        let result = compileUncached(pattern)
        cache.withLock { c in
            if c.count >= cacheLimit { c.removeAll(keepingCapacity: true) }
            c[pattern] = result
        }
        return result
    }

    private static func compileUncached(_ pattern: String) -> Result<BoundedRegex, CompileError> {
        var errorCode: Int32 = 0
        var errorOffset = 0
        let bytes = Array(pattern.utf8)
        let code = bytes.withUnsafeBufferPointer { p in
            pcre2_compile_8(p.baseAddress ?? UnsafePointer(bitPattern: 1), p.count, UInt32(PCRE2_UTF | PCRE2_AUTO_CALLOUT),
                            &errorCode, &errorOffset, nil)
        }
        guard let code else {
            var buffer = [UInt8](repeating: 0, count: 256)
            let n = buffer.withUnsafeMutableBufferPointer { pcre2_get_error_message_8(errorCode, $0.baseAddress, $0.count) }
            let message = n > 0 ? String(decoding: buffer.prefix(Int(n)), as: UTF8.self) : "error \(errorCode)"
            // PCRE2 counts code units (bytes); a message counts characters.
            let position = String(decoding: bytes.prefix(min(errorOffset, bytes.count)), as: UTF8.self).count + 1
            return .failure(CompileError(message: message, position: position))
        }
        return .success(BoundedRegex(pattern: pattern, code: code))
    }

    // MARK: Matching

    /// What the callout sees: how many steps since the last look, and the deadline.
    private struct Watch {
        var steps = 0
        var deadline: ContinuousClock.Instant?
        var stopped: MatchError?
    }

    /// True when the pattern matches somewhere in `text`.
    public func matches(_ text: String, deadline: ContinuousClock.Instant? = nil) throws(MatchError) -> Bool {
        var text = text
        let result: Result<Bool, MatchError> = text.withUTF8 { utf8 in
            do throws(MatchError) {
                return .success(try matches(utf8, deadline: deadline))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// True when the pattern matches somewhere in the UTF-8 bytes `text` (valid UTF-8: the callers
    /// check it first).
    public func matches(_ text: UnsafeBufferPointer<UInt8>, deadline: ContinuousClock.Instant? = nil) throws(MatchError) -> Bool {
        guard let data = pcre2_match_data_create_from_pattern_8(code, nil) else { throw .gaveUp("out of memory") }
        defer { pcre2_match_data_free_8(data) }
        guard let context = pcre2_match_context_create_8(nil) else { throw .gaveUp("out of memory") }
        defer { pcre2_match_context_free_8(context) }
        pcre2_set_match_limit_8(context, Self.matchLimit)
        pcre2_set_depth_limit_8(context, Self.depthLimit)
        pcre2_set_heap_limit_8(context, Self.heapLimit)
        var watch = Watch(deadline: deadline)
        let rc: Int32 = withUnsafeMutablePointer(to: &watch) { w in
            pcre2_set_callout_8(context, { _, data in
                guard let w = data?.assumingMemoryBound(to: Watch.self) else { return 0 }
                w.pointee.steps += 1
                guard w.pointee.steps >= BoundedRegex.checkInterval else { return 0 }
                w.pointee.steps = 0
                if Task.isCancelled {
                    w.pointee.stopped = .cancelled
                    return PCRE2_ERROR_CALLOUT
                }
                if let d = w.pointee.deadline, ContinuousClock.now >= d {
                    w.pointee.stopped = .deadline
                    return PCRE2_ERROR_CALLOUT
                }
                return 0
            }, w)
            return pcre2_match_8(code, text.baseAddress ?? UnsafePointer(bitPattern: 1), text.count, 0, 0, data, context)
        }
        if rc >= 0 { return true }
        switch rc {
        case PCRE2_ERROR_NOMATCH, PCRE2_ERROR_PARTIAL:
            return false
        case PCRE2_ERROR_CALLOUT:
            throw watch.stopped ?? .cancelled
        case PCRE2_ERROR_MATCHLIMIT:
            throw .gaveUp("more than \(Self.matchLimit) backtracking steps")
        case PCRE2_ERROR_DEPTHLIMIT:
            throw .gaveUp("backtracking deeper than \(Self.depthLimit) levels")
        case PCRE2_ERROR_HEAPLIMIT:
            throw .gaveUp("more than \(Self.heapLimit / 1024) MiB of backtracking frames")
        default:
            var buffer = [UInt8](repeating: 0, count: 256)
            let n = buffer.withUnsafeMutableBufferPointer { pcre2_get_error_message_8(rc, $0.baseAddress, $0.count) }
            throw .gaveUp(n > 0 ? String(decoding: buffer.prefix(Int(n)), as: UTF8.self) : "error \(rc)")
        }
    }
}

extension BoundedRegex.MatchError {
    /// The error a step reports: a runaway pattern is the workflow's input problem (`invalid_input`),
    /// a deadline a `timeout`, a cancellation the task's.
    public func stepError(pattern: String, value: String, timeout: Duration?) -> any Error {
        switch self {
        case .gaveUp(let why):
            return ValueError("the regular expression /\(pattern)/ gave up on \(TypedValue.quoted(String(value.prefix(64))))\(value.count > 64 ? "…" : ""): \(why); write it so that it cannot backtrack this much")
        case .deadline:
            return BLEError.timeout(operation: "matching /\(pattern)/", limit: timeout ?? .zero)
        case .cancelled:
            return CancellationError()
        }
    }
}
