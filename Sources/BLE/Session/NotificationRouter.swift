import Synchronization

/// Routes notifications from the ATT reader (synchronously, in arrival order) to every consumer of the
/// subscription bound to the handle. Bindings belong to one link generation; a new link starts empty.
final class NotificationRouter: Sendable {
    typealias Consumer = AsyncThrowingStream<[UInt8], any Error>.Continuation

    private struct State {
        var generation: UInt64 = 0
        var keyByHandle: [UInt16: SubscriptionKey] = [:]
        var consumers: [SubscriptionKey: [UInt64: Consumer]] = [:]
    }

    private let state = Mutex(State())

    /// Starts a new link generation: handle bindings are forgotten.
    func reset(generation: UInt64) {
        state.withLock {
            $0.generation = generation
            $0.keyByHandle = [:]
        }
    }

    func bind(handle: UInt16, to key: SubscriptionKey, generation: UInt64) {
        state.withLock { s in
            guard s.generation == generation else { return }
            s.keyByHandle[handle] = key
        }
    }

    func unbind(_ key: SubscriptionKey) {
        state.withLock { s in s.keyByHandle = s.keyByHandle.filter { $0.value != key } }
    }

    func add(_ consumer: Consumer, id: UInt64, for key: SubscriptionKey) {
        state.withLock { $0.consumers[key, default: [:]][id] = consumer }
    }

    /// Removes a consumer; returns it if it was there.
    @discardableResult
    func remove(id: UInt64, for key: SubscriptionKey) -> Consumer? {
        state.withLock { s in
            let c = s.consumers[key]?.removeValue(forKey: id)
            if s.consumers[key]?.isEmpty == true { s.consumers[key] = nil }
            return c
        }
    }

    /// Ends every consumer of `key` (with `error`, or normally when nil) and forgets them.
    func finish(_ key: SubscriptionKey, error: BLEError?) {
        let ended = state.withLock { s in
            s.keyByHandle = s.keyByHandle.filter { $0.value != key }
            return s.consumers.removeValue(forKey: key).map { Array($0.values) } ?? []
        }
        for c in ended { c.finish(throwing: error) }
    }

    /// Delivers a value to the consumers of the subscription bound to its handle.
    func deliver(_ event: ATTValueEvent, generation: UInt64) {
        let targets: [Consumer] = state.withLock { s in
            guard s.generation == generation, let key = s.keyByHandle[event.handle],
                  let consumers = s.consumers[key] else { return [] }
            return Array(consumers.values)
        }
        for c in targets { c.yield(event.value) }
    }
}

/// The current connection state and its observers.
final class StateBroadcaster: Sendable {
    private struct State {
        var current: ConnectionState = .disconnected
        var observers: [UInt64: AsyncStream<ConnectionState>.Continuation] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    var current: ConnectionState { state.withLock { $0.current } }

    func publish(_ value: ConnectionState) {
        let observers = state.withLock { s in
            s.current = value
            return Array(s.observers.values)
        }
        for o in observers { o.yield(value) }
    }

    func stream() -> AsyncStream<ConnectionState> {
        let (stream, continuation) = AsyncStream.makeStream(of: ConnectionState.self)
        let id: UInt64 = state.withLock { s in
            s.nextID += 1
            s.observers[s.nextID] = continuation
            continuation.yield(s.current)
            return s.nextID
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.observers.removeValue(forKey: id) }
        }
        return stream
    }
}

/// Notifications of one characteristic for one consumer: every value that arrives after the subscription,
/// buffered until read. Throws a `BLEError` when the subscription is lost (failed restore or reconnect).
///
/// The consumer leaves with `cancel()`, by cancelling the task iterating it, or by dropping the stream
/// and its iterators; the last consumer of a characteristic leaving writes its CCCD off.
public struct NotificationStream: AsyncSequence, Sendable {
    public typealias Element = [UInt8]

    let base: AsyncThrowingStream<[UInt8], any Error>
    let token: LeaveToken

    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<[UInt8], any Error>.Iterator
        let token: LeaveToken
        public mutating func next() async throws -> [UInt8]? {
            try await base.next()
        }
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(base: base.makeAsyncIterator(), token: token)
    }

    /// Leaves the subscription; the last consumer out disables it on the device (awaited).
    public func cancel() async {
        await token.leave()
    }
}

/// Leaves a subscription once: explicitly, or when the last copy of the stream is gone.
final class LeaveToken: Sendable {
    private let left = Atomic<Bool>(false)
    private let action: @Sendable () async -> Void

    init(_ action: @escaping @Sendable () async -> Void) {
        self.action = action
    }

    func leave() async {
        guard !left.exchange(true, ordering: .acquiringAndReleasing) else { return }
        await action()
    }

    deinit {
        guard !left.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let action = self.action
        Task { await action() }
    }
}
