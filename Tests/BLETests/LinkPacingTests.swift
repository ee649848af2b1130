import Testing
@testable import BLE

private let limit = Duration.seconds(5)

@Suite struct LinkPacingTests {
    @Test func theNextEventIsTheFirstOneStrictlyAfter() {
        let anchor = ContinuousClock.now + .seconds(10)
        let e = ConnectionEvents(anchor: anchor, interval: .milliseconds(30))
        #expect(e.next(after: anchor - .seconds(1)) == anchor)
        #expect(e.next(after: anchor) == anchor + .milliseconds(30))
        #expect(e.next(after: anchor + .microseconds(29_999)) == anchor + .milliseconds(30))
        #expect(e.next(after: anchor + .milliseconds(30)) == anchor + .milliseconds(60))
        #expect(e.next(after: anchor + .seconds(3600) + .nanoseconds(1)) == anchor + .seconds(3600) + .milliseconds(30))
        // 7.5 ms, the shortest interval, stays exact in integers.
        let fast = ConnectionEvents(anchor: anchor, interval: .microseconds(7_500))
        #expect(fast.next(after: anchor + .milliseconds(15)) == anchor + .microseconds(22_500))
    }

    @Test func everyPDUWaitsForTheNextConnectionEventEachWayAndKeepsItsOrder() async throws {
        let interval = Duration.milliseconds(20)
        let events = ConnectionEvents(anchor: .now, interval: interval)
        let link = InMemoryLink(peer: BluetoothAddress(value: 1), adapterID: "test", credits: 8, events: events)
        let arrivals = Recorder<(pdu: [UInt8], at: ContinuousClock.Instant)>()
        let device = Task {
            for await pdu in link.device.incoming {
                arrivals.append((pdu, .now))
                link.device.consumed()
                if pdu == [0x0A, 0x03, 0x00] { link.device.send([0x0B, 0x2A]) }
            }
        }
        defer { device.cancel() }
        let sent = ContinuousClock.now
        try await link.bearer.send([0x52, 0x01, 0x00, 0x01])
        try await link.bearer.send([0x52, 0x01, 0x00, 0x02])
        try await link.bearer.send([0x0A, 0x03, 0x00])
        let items = try await arrivals.wait(count: 3, within: limit)
        #expect(items.map(\.pdu) == [[0x52, 0x01, 0x00, 0x01], [0x52, 0x01, 0x00, 0x02], [0x0A, 0x03, 0x00]])
        // Nothing arrives before the event after it was sent.
        for item in items { #expect(item.at >= events.next(after: sent)) }
        // The response waits for the event after the request arrived: a round trip spans two events.
        let incoming = link.bearer.incoming
        let response = try await withDeadline(limit, operation: "response") { () async -> [UInt8]? in
            var it = incoming.makeAsyncIterator()
            return await it.next()
        }
        let received = ContinuousClock.now
        #expect(response == [0x0B, 0x2A])
        if let arrived = items.last?.at { #expect(received >= events.next(after: arrived)) }
        #expect(received - sent >= interval)
        await link.disconnect()
    }

    @Test func aClosedPacedLinkDeliversNothingMore() async throws {
        let link = InMemoryLink(peer: BluetoothAddress(value: 2), adapterID: "test",
                                events: ConnectionEvents(anchor: .now, interval: .milliseconds(50)))
        try await link.bearer.send([0x0A, 0x03, 0x00])
        await link.disconnect()
        let incoming = link.device.incoming
        let next = try await withDeadline(limit, operation: "end of the device stream") { () async -> [UInt8]? in
            var it = incoming.makeAsyncIterator()
            return await it.next()
        }
        #expect(next == nil)
    }
}
