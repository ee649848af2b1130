import AsyncSupport
import BLE
import Synchronization
import Workflow

/// Values of one subscription, buffered from the moment of subscribing, consumed by `await` steps.
final class Mailbox: Sendable {
    enum Result {
        case matched([UInt8])
        case busy([UInt8])
        case failed([UInt8])
        case timedOut(lastSeen: [UInt8]?)
    }

    private struct State {
        var buffer: [[UInt8]] = []
        var waiter: CheckedContinuation<Void, Never>?
        var error: (any Error)?
        var ended = false
    }

    /// The buffer lives in its own object so the pump and timer tasks can share it.
    private final class Box: Sendable {
        let m = Mutex(State())
    }

    private let state = Box()
    private let stream: NotificationStream
    private let pump: Mutex<Task<Void, Never>?> = Mutex(nil)

    init(stream: NotificationStream) {
        self.stream = stream
        let task = Task { [state] in
            do {
                for try await value in stream {
                    let w: CheckedContinuation<Void, Never>? = state.m.withLock { s in
                        s.buffer.append(value)
                        defer { s.waiter = nil }
                        return s.waiter
                    }
                    w?.resume()
                }
                let w = state.m.withLock { s in
                    s.ended = true
                    defer { s.waiter = nil }
                    return s.waiter
                }
                w?.resume()
            } catch {
                let w = state.m.withLock { s in
                    s.error = error
                    s.ended = true
                    defer { s.waiter = nil }
                    return s.waiter
                }
                w?.resume()
            }
        }
        pump.withLock { $0 = task }
    }

    func discardBuffered() { state.m.withLock { $0.buffer.removeAll() } }

    /// Consumes values in order until one matches (or is a busy answer), or the timeout passes.
    func next(matching matcher: Matcher, busy: Matcher?, failsOn: Matcher?, timeout: Duration) async throws -> Result {
        let deadline = ContinuousClock.now + timeout
        var last: [UInt8]?
        let timer = Timeouts.shared.schedule(after: timeout) { [state] in
            let w = state.m.withLock { s in
                defer { s.waiter = nil }
                return s.waiter
            }
            w?.resume()
        }
        defer { Timeouts.shared.cancel(timer) }
        while true {
            try Task.checkCancellation()
            enum Next { case value([UInt8]), error(any Error), ended, wait }
            let next: Next = state.m.withLock { s in
                if !s.buffer.isEmpty { return .value(s.buffer.removeFirst()) }
                if let e = s.error { return .error(e) }
                if s.ended { return .ended }
                return .wait
            }
            switch next {
            case .value(let v):
                last = v
                if try matcher.matches(v) { return .matched(v) }
                if let busy, try busy.matches(v) { return .busy(v) }
                if let failsOn, try failsOn.matches(v) { return .failed(v) }
                continue
            case .error(let e):
                throw e
            case .ended:
                throw BLEError.disconnected(.localHostTerminated)
            case .wait:
                if ContinuousClock.now >= deadline { return .timedOut(lastSeen: last) }
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                        let resumeNow = state.m.withLock { s -> Bool in
                            if !s.buffer.isEmpty || s.ended || Task.isCancelled || ContinuousClock.now >= deadline { return true }
                            s.waiter = c
                            return false
                        }
                        if resumeNow { c.resume() }
                    }
                } onCancel: { [state] in
                    let w = state.m.withLock { s in
                        defer { s.waiter = nil }
                        return s.waiter
                    }
                    w?.resume()
                }
            }
        }
    }

    func close() async {
        pump.withLock { $0?.cancel() }
        await stream.cancel()
    }
}
