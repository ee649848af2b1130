import Synchronization

/// A value set once, awaited by any number of tasks. Waiting honours task cancellation.
///
/// Used for "the link went down, and why": the first `fulfill` wins, later ones are ignored.
package final class OneShot<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var waiters: [UInt64: CheckedContinuation<Value?, Never>] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    package init() {}

    /// The value, if it has been set.
    package var value: Value? { state.withLock { $0.value } }

    /// Sets the value and wakes every waiter. Returns false if it was already set.
    @discardableResult
    package func fulfill(_ value: Value) -> Bool {
        let waiters: [CheckedContinuation<Value?, Never>]? = state.withLock { s in
            guard s.value == nil else { return nil }
            s.value = value
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        guard let waiters else { return false }
        for w in waiters { w.resume(returning: value) }
        return true
    }

    /// Waits for the value; nil if the waiting task was cancelled first.
    package func wait() async -> Value? {
        let id: UInt64 = state.withLock { s in
            s.nextID += 1
            return s.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Value?, Never>) in
                let immediate: Value?? = state.withLock { s in
                    if let v = s.value { return .some(v) }
                    if Task.isCancelled { return .some(nil) }
                    s.waiters[id] = c
                    return .none
                }
                if let immediate { c.resume(returning: immediate) }
            }
        } onCancel: {
            let c = state.withLock { $0.waiters.removeValue(forKey: id) }
            c?.resume(returning: nil)
        }
    }
}
