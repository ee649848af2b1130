import AsyncSupport
import Synchronization
@testable import BLE

/// Waits, with a deadline, until a condition over recorded items holds. Items are appended by the code
/// under test; waiters are woken on every append (no polling).
final class Recorder<Item: Sendable>: Sendable {
    /// The items; waiters are woken on every append and check their condition again.
    private let state = WaiterQueue<[Item], Void>([])

    init() {}

    var items: [Item] { state.withLock { items, _ in items } }

    func append(_ item: Item) {
        state.withLock { items, waiters in
            items.append(item)
            waiters.resumeAll(())
        }
    }

    /// Waits until `condition(items)` holds; throws `BLEError.timeout` after `limit`.
    @discardableResult
    func wait(within limit: Duration = .seconds(5), _ what: String = "recorded items",
              until condition: @escaping @Sendable ([Item]) -> Bool) async throws -> [Item] {
        try await withDeadline(limit, operation: what) {
            await self.waitForever(condition)
        }
        return items
    }

    /// Waits until at least `count` items were recorded.
    @discardableResult
    func wait(count: Int, within limit: Duration = .seconds(5)) async throws -> [Item] {
        try await wait(within: limit, "\(count) items") { $0.count >= count }
    }

    private func waitForever(_ condition: @escaping @Sendable ([Item]) -> Bool) async {
        // Granted at once when the condition holds, else at the next append; cancelled with the task.
        while case .granted = await state.wait({ items, _ in condition(items) ? () : nil }) {
            if condition(items) { return }
        }
    }
}

/// A bearer whose peer is the test: what the client sends is recorded (and can be awaited), what the
/// client receives is whatever the test injects. Optional credits give write-without-response backpressure.
final class ScriptedBearer: ATTBearer {
    let incoming: AsyncStream<[UInt8]>
    let localMaxMTU: Int
    private let input: AsyncStream<[UInt8]>.Continuation
    private let closed = Mutex<DisconnectReason?>(nil)
    let sent = Recorder<[UInt8]>()
    let gate: AsyncSemaphore?
    /// The PDUs whose send found no credit free and waited (tests observe the backpressure, not the clock).
    let creditWaits = Recorder<[UInt8]>()

    init(localMaxMTU: Int = 517, credits: Int? = nil) {
        (incoming, input) = AsyncStream.makeStream(of: [UInt8].self)
        self.localMaxMTU = localMaxMTU
        gate = credits.map { AsyncSemaphore(permits: $0, cancellationError: BLEError.cancelled) }
    }

    func send(_ pdu: [UInt8]) async throws {
        if let gate {
            if gate.available == 0 { creditWaits.append(pdu) }
            try await gate.acquire()
        }
        if let reason = closed.withLock({ $0 }) { throw BLEError.disconnected(reason) }
        sent.append(pdu)
    }

    func close(reason: DisconnectReason) async {
        let first = closed.withLock { c -> Bool in
            guard c == nil else { return false }
            c = reason
            return true
        }
        guard first else { return }
        gate?.close(BLEError.disconnected(reason))
        input.finish()
    }

    /// The peer sends a PDU to the client.
    func inject(_ pdu: [UInt8]) { input.yield(pdu) }
    func inject(_ pdu: ATTPDU) { input.yield(pdu.bytes) }
    /// The peer's side goes away (incoming ends).
    func endIncoming() { input.finish() }

    var closedReason: DisconnectReason? { closed.withLock { $0 } }
}

/// A scripted peer: answers each request the client sends with whatever `reply` returns (nothing, one
/// PDU, or several), in order. Runs until the bearer closes or the task is cancelled.
func answer(_ bearer: ScriptedBearer, _ reply: @escaping @Sendable (_ request: [UInt8]) -> [[UInt8]]) -> Task<Void, Never> {
    Task {
        var handled = 0
        while !Task.isCancelled {
            let seen = handled
            guard let items = try? await bearer.sent.wait(within: .seconds(30), "next request", until: { $0.count > seen }) else { return }
            while handled < items.count {
                let pdu = items[handled]
                handled += 1
                guard let op = pdu.first, ATTOpcode(op).isRequest else { continue }
                for r in reply(pdu) { bearer.inject(r) }
            }
        }
    }
}
