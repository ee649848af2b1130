/// A value set once, awaited by any number of tasks. Waiting honours task cancellation.
///
/// Used for "the link went down, and why": the first `fulfill` wins, later ones are ignored.
public final class OneShot<Value: Sendable>: Sendable {
    private let queue = WaiterQueue<Value?, Value>(nil)

    public init() {}

    /// The value, if it has been set.
    public var value: Value? { queue.withLock { v, _ in v } }

    /// Sets the value and wakes every waiter. Returns false if it was already set.
    @discardableResult
    public func fulfill(_ value: Value) -> Bool {
        queue.withLock { v, waiters in
            guard v == nil else { return false }
            v = value
            waiters.resumeAll(value)
            return true
        }
    }

    /// Waits for the value; nil if the waiting task was cancelled first.
    public func wait() async -> Value? {
        if let v = value { return v }
        switch await queue.wait({ v, _ in v }) {
        case .granted(let v): return v
        case .cancelled, .timedOut: return nil
        }
    }
}
