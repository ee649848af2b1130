import Testing
@testable import BLE

private let fff0 = BluetoothUUID(0xFFF0)
private let fff1 = BluetoothUUID(0xFFF1)
private let fff3 = BluetoothUUID(0xFFF3)
private let fff4 = BluetoothUUID(0xFFF4)
private let fff5 = BluetoothUUID(0xFFF5)
private let fff6 = BluetoothUUID(0xFFF6)
private let fff7 = BluetoothUUID(0xFFF7)
private let dis = BluetoothUUID(0x180A)
private let fw = BluetoothUUID(0x2A26)
private let limit = Duration.seconds(5)

private func options(reconnect: ReconnectPolicy = .limited(maxAttempts: 3, delays: [.milliseconds(5)]),
                     discovery: DiscoveryMode = .targeted, lenient: Bool = false,
                     attTimeout: Duration = .seconds(5)) -> SessionOptions {
    SessionOptions(connect: ConnectOptions(timeout: .seconds(2), preferredMTU: 247), reconnect: reconnect,
                   discovery: discovery, allowUnsupportedProperties: lenient, attTimeout: attTimeout)
}

/// Collects a session's states as they are published.
private func recordStates(_ session: Session) -> (Recorder<ConnectionState>, Task<Void, Never>) {
    let r = Recorder<ConnectionState>()
    let stream = session.connectionStates()
    let t = Task { for await s in stream { r.append(s) } }
    return (r, t)
}

private func waitFor(_ r: Recorder<ConnectionState>, _ state: ConnectionState) async throws {
    try await r.wait(within: limit, "state \(state)") { $0.last == state }
}

/// Reads the next value of a notification stream, with a deadline.
private func next(_ stream: NotificationStream, within: Duration = limit) async throws -> [UInt8]? {
    try await withDeadline(within, operation: "next notification") {
        var it = stream.makeAsyncIterator()
        return try await it.next()
    }
}

@Suite struct SessionTests {
    @Test func connectsExchangesTheMTUAndReadsByUUID() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options())
        let (states, t) = recordStates(session)
        defer { t.cancel() }
        try await session.connect()
        #expect(await session.state == .ready)
        #expect(await session.mtu == 247)
        let value = try await session.read(service: dis, characteristic: fw, timeout: limit)
        #expect(value == Array("2.4.1".utf8))
        // MTU, Find By Type Value (180A, twice: found + continue), Read By Type x2, Read.
        #expect(await session.roundTrips >= 4)
        try await states.wait(within: limit, "ready") { $0.contains(.ready) }
        #expect(states.items.prefix(4) == [.disconnected, .connecting, .connected, .ready])
        await session.disconnect()
        #expect(await session.state == .disconnected)
    }

    @Test func readsLongValuesWithReadBlobAndWritesThemWithPreparedWrites() async throws {
        let device = TestPeripheral()
        var opts = options()
        opts.connect.preferredMTU = 23
        let session = Session(central: FakeCentral([device]), peer: device.address, options: opts)
        try await session.connect()
        let long = try await session.read(service: fff0, characteristic: fff7, timeout: limit)
        #expect(long == Array(repeating: 0x5A, count: 300))
        let value = (0..<100).map { UInt8($0) }
        try await session.write(service: fff0, characteristic: fff7, value: value, withResponse: true, timeout: limit)
        let h = try #require(device.valueHandle(fff0, fff7))
        try await device.events.wait { $0.contains(DeviceEvent(link: 1, event: .wrote(handle: h, value: value, withResponse: true))) }
        #expect(try await session.read(service: fff0, characteristic: fff7, timeout: limit) == value)
    }

    @Test func missingServicesAndCharacteristicsAreNamed() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options())
        try await session.connect()
        await #expect(throws: BLEError.attributeNotFound("service FFE0")) {
            try await session.read(service: BluetoothUUID(0xFFE0), characteristic: fff1, timeout: limit)
        }
        await #expect(throws: BLEError.attributeNotFound("characteristic FFE1 in service FFF0")) {
            try await session.read(service: fff0, characteristic: BluetoothUUID(0xFFE1), timeout: limit)
        }
    }

    @Test func strictModeRefusesUndeclaredPropertiesAndLenientModeAllowsThem() async throws {
        let device = TestPeripheral()
        let strict = Session(central: FakeCentral([device]), peer: device.address, options: options())
        try await strict.connect()
        await #expect(throws: BLEError.unsupportedProperty(characteristic: fff5, property: "notify")) {
            _ = try await strict.notifications(service: fff0, characteristic: fff5, timeout: limit)
        }
        await #expect(throws: BLEError.unsupportedProperty(characteristic: fff1, property: "write-without-response")) {
            try await strict.write(service: fff0, characteristic: fff1, value: [1], withResponse: false, timeout: limit)
        }
        await strict.disconnect()

        // FFF5 notifies without declaring notify and has no CCCD: lenient mode still routes its values.
        let lenient = Session(central: FakeCentral([device]), peer: device.address, options: options(lenient: true))
        try await lenient.connect()
        let stream = try await lenient.notifications(service: fff0, characteristic: fff5, timeout: limit)
        #expect(await device.notify(service: fff0, characteristic: fff5, [0x42]))
        #expect(try await next(stream) == [0x42])
    }

    @Test func fullDiscoveryModeFindsServicesWithReadByGroupType() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options(discovery: .all))
        try await session.connect()
        #expect(try await session.read(service: dis, characteristic: fw, timeout: limit) == Array("2.4.1".utf8))
        #expect(try await session.read(service: fff0, characteristic: BluetoothUUID(0xFFF2), timeout: limit) == [0])
    }

    @Test func targetedDiscoveryFallsBackToFullDiscoveryWhenFindByTypeValueIsNotSupported() async throws {
        let device = TestPeripheral(supportsFindByTypeValue: false)
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options())
        try await session.connect()
        #expect(try await session.read(service: dis, characteristic: fw, timeout: limit) == Array("2.4.1".utf8))
        #expect(device.received.items.contains { $0.first == 0x10 })   // Read By Group Type went out
    }

    @Test func aReadAndNotificationsOfTheSameCharacteristicAreKeptApart() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options())
        try await session.connect()
        let battery = BluetoothUUID(0x180F), level = BluetoothUUID(0x2A19)
        let s = try await session.notifications(service: battery, characteristic: level, timeout: limit)
        async let value = session.read(service: battery, characteristic: level, timeout: limit)
        for v in [UInt8(55), 54, 53] { #expect(await device.notify(service: battery, characteristic: level, [v])) }
        #expect(try await value == [87])
        #expect(try await next(s) == [55])
        #expect(try await next(s) == [54])
        #expect(try await next(s) == [53])
    }

    @Test func discoveringAheadOfUseLeavesReadsWithOneRoundTrip() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options())
        try await session.connect()
        try await session.discover(services: [dis, fff0], timeout: limit)
        let before = await session.roundTrips
        _ = try await session.read(service: dis, characteristic: fw, timeout: limit)
        _ = try await session.read(service: fff0, characteristic: BluetoothUUID(0xFFF2), timeout: limit)
        #expect(await session.roundTrips == before + 2)
        await #expect(throws: BLEError.attributeNotFound("service FFE0")) {
            try await session.discover(services: [BluetoothUUID(0xFFE0)], timeout: limit)
        }
        try await session.discover(services: [], timeout: limit)
        let afterAll = await session.roundTrips
        _ = try await session.read(service: BluetoothUUID(0x180F), characteristic: BluetoothUUID(0x2A19), timeout: limit)
        #expect(await session.roundTrips == afterAll + 1)
    }

    @Test func connectHasADeadline() async throws {
        let device = TestPeripheral()
        let central = FakeCentral([device])
        central.hangConnections(true)
        var opts = options()
        opts.connect.timeout = .milliseconds(100)
        let session = Session(central: central, peer: device.address, options: opts)
        // The error names the limit that ended the connect: the connect's own 100 ms, not another one.
        await #expect(throws: BLEError.timeout(operation: "connect \(device.address)", limit: .milliseconds(100))) {
            try await session.connect()
        }
        guard case .failed = await session.state else {
            Issue.record("expected failed")
            return
        }
    }

    @Test func aDeviceThatConnectsButNeverAnswersFailsConnectAtTheConnectDeadline() async throws {
        let device = TestPeripheral()
        await device.setAnswers(false)
        var opts = options()
        opts.connect.timeout = .milliseconds(200)
        let central = FakeCentral([device])
        let session = Session(central: central, peer: device.address, options: opts)
        await #expect(throws: BLEError.timeout(operation: "connect \(device.address)", limit: .milliseconds(200))) {
            try await session.connect()
        }
        guard case .failed = await session.state else {
            Issue.record("expected failed")
            return
        }
        // The half-made link was dropped.
        #expect(central.links.count == 1)
        #expect(central.links.first?.disconnectReason != nil)
    }

    @Test func anOperationWaitingForAReconnectEndsAtItsOwnDeadline() async throws {
        let device = TestPeripheral()
        let central = FakeCentral([device])
        let session = Session(central: central, peer: device.address,
                              options: options(reconnect: .limited(maxAttempts: 1, delays: [.seconds(30)])))
        let (states, t) = recordStates(session)
        defer { t.cancel() }
        try await session.connect()
        await device.drop()
        try await states.wait(within: limit, "reconnecting") { $0.contains(.reconnecting(attempt: 1)) }
        await #expect(throws: BLEError.timeout(operation: "read 2A26", limit: .milliseconds(100))) {
            _ = try await session.read(service: dis, characteristic: fw, timeout: .milliseconds(100))
        }
        // A manual disconnect ends the reconnect at once.
        await session.disconnect()
        #expect(await session.state == .disconnected)
        #expect(central.connectAttempts == 1)
    }

    @Test func aDroppedStreamUnsubscribes() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options())
        try await session.connect()
        do {
            let s = try await session.notifications(service: fff0, characteristic: fff3, timeout: limit)
            _ = s
        }
        let h = try #require(device.valueHandle(fff0, fff3))
        try await device.events.wait { TestPeripheral.cccdWrites($0, valueHandle: h).map(\.value) == [1, 0] }
    }

    @Test func cancellingTheIteratingTaskLeavesTheSubscription() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options())
        try await session.connect()
        let s = try await session.notifications(service: fff0, characteristic: fff3, timeout: limit)
        let consumer = Task { for try await _ in s {} }
        consumer.cancel()
        _ = await consumer.result
        let h = try #require(device.valueHandle(fff0, fff3))
        try await device.events.wait { TestPeripheral.cccdWrites($0, valueHandle: h).map(\.value) == [1, 0] }
    }

    @Test func withReconnectDisabledALinkLossEndsStreamsWithTheReason() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options(reconnect: .disabled))
        try await session.connect()
        let s = try await session.notifications(service: fff0, characteristic: fff3, timeout: limit)
        await device.drop(.remoteUserTerminated)
        await #expect(throws: BLEError.disconnected(.remoteUserTerminated)) { _ = try await next(s) }
        #expect(await session.state == .disconnected)
    }

    @Test func autoReconnectRestoresAnActiveNotificationStream() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options())
        let (states, t) = recordStates(session)
        defer { t.cancel() }
        try await session.connect()
        let acks = try await session.notifications(service: fff0, characteristic: fff3, timeout: limit)
        #expect(await device.notify(service: fff0, characteristic: fff3, [0x01, 0x00]))
        #expect(try await next(acks) == [0x01, 0x00])

        await device.drop()
        try await states.wait(within: limit, "ready again") { s in
            s.filter { $0 == .ready }.count >= 2
        }
        let seen = states.items
        #expect(seen.contains(.reconnecting(attempt: 1)))
        #expect(seen.contains(.discovering))
        // The device saw a second CCCD enable, on the second link.
        #expect(device.cccdWrites(fff0, fff3).map(\.link) == [1, 2])
        #expect(device.cccdWrites(fff0, fff3).map(\.value) == [1, 1])
        // The same stream object keeps delivering.
        #expect(await device.notify(service: fff0, characteristic: fff3, [0x02, 0x00]))
        #expect(try await next(acks) == [0x02, 0x00])
        await session.disconnect()
    }

    @Test func aLinkThatArrivesAsTheConnectDeadlinePassesIsDroppedNotLeaked() async throws {
        let device = TestPeripheral()
        let central = FakeCentral([device])
        central.completeConnectionsLate(true)
        let session = Session(central: central, peer: device.address, options: options())
        await #expect(throws: BLEError.timeout(operation: "connect \(device.address)", limit: .seconds(2))) {
            try await session.connect()
        }
        // The connect completed as the deadline cancelled it: that link belongs to nobody and is dropped
        // (otherwise the peripheral and the adapter's slot would stay taken).
        let late = try #require(central.links.first)
        #expect(late.disconnectReason == .localHostTerminated)
    }

    @Test func aLinkLostRightAfterItsRestoreStartsAnotherReconnect() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options())
        try await session.connect()
        let acks = try await session.notifications(service: fff0, characteristic: fff3, timeout: limit)
        // Link 2 is lost as soon as it has restored the subscription: the session must not stay
        // `ready` without a link, but reconnect again.
        await device.setDropAfterCCCDWrite(onLink: 2)
        await device.drop()
        let firmware = try await session.read(service: BluetoothUUID(0x180A), characteristic: BluetoothUUID(0x2A26), timeout: limit)
        #expect(firmware == Array("2.4.1".utf8))
        #expect(await device.linkCount == 3)
        #expect(device.cccdWrites(fff0, fff3).map(\.link) == [1, 2, 3])
        #expect(await device.notify(service: fff0, characteristic: fff3, [0x03, 0x00]))
        #expect(try await next(acks) == [0x03, 0x00])
        await session.disconnect()
    }

    @Test func reconnectEmitsFailedAfterExhaustingAttempts() async throws {
        let device = TestPeripheral()
        let central = FakeCentral([device])
        let session = Session(central: central, peer: device.address,
                              options: options(reconnect: .limited(maxAttempts: 2, delays: [.milliseconds(1), .milliseconds(2)])))
        let (states, t) = recordStates(session)
        defer { t.cancel() }
        try await session.connect()
        let acks = try await session.notifications(service: fff0, characteristic: fff3, timeout: limit)
        central.refuseConnections(true)
        await device.drop()
        try await states.wait(within: limit, "failed") { s in
            if case .failed = s.last { return true } else { return false }
        }
        #expect(states.items.contains(.reconnecting(attempt: 1)))
        #expect(states.items.contains(.reconnecting(attempt: 2)))
        #expect(!states.items.contains(.reconnecting(attempt: 3)))
        #expect(central.connectAttempts == 3)
        #expect(await session.state == .failed(.connectFailed("refused by the test")))
        await #expect(throws: BLEError.connectFailed("refused by the test")) {
            _ = try await next(acks)
        }
        await #expect(throws: BLEError.connectFailed("refused by the test")) {
            _ = try await session.read(service: dis, characteristic: fw, timeout: limit)
        }
    }

    @Test func aFailedRestoreIsAFailedReconnect() async throws {
        // The second link's device never answers: the CCCD rewrite times out, so each attempt fails.
        let device = TestPeripheral()
        let central = FakeCentral([device])
        let session = Session(central: central, peer: device.address,
                              options: options(reconnect: .limited(maxAttempts: 1, delays: []), attTimeout: .seconds(1)))
        let (states, t) = recordStates(session)
        defer { t.cancel() }
        try await session.connect()
        let acks = try await session.notifications(service: fff0, characteristic: fff3, timeout: limit)
        await device.setAnswers(false)
        await device.drop()
        let error = await #expect(throws: BLEError.self) { _ = try await next(acks) }
        guard case .failed = await session.state else {
            Issue.record("stream ended with \(String(describing: error)); states \(states.items)")
            Issue.record("expected failed, got \(await session.state)")
            return
        }
    }

    @Test func manualDisconnectDoesNotReconnect() async throws {
        let device = TestPeripheral()
        let central = FakeCentral([device])
        let session = Session(central: central, peer: device.address, options: options())
        let (states, t) = recordStates(session)
        defer { t.cancel() }
        try await session.connect()
        let acks = try await session.notifications(service: fff0, characteristic: fff3, timeout: limit)
        await session.disconnect()
        #expect(await session.state == .disconnected)
        // The stream ends; nothing reconnects (the attempt count stays at one).
        #expect(try await next(acks) == nil)
        #expect(central.connectAttempts == 1)
        #expect(!states.items.contains { if case .reconnecting = $0 { true } else { false } })
        await #expect(throws: BLEError.disconnected(.localHostTerminated)) {
            _ = try await session.read(service: dis, characteristic: fw, timeout: limit)
        }
    }

    @Test func disconnectFailsAPendingReadAtOnce() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options(reconnect: .disabled))
        try await session.connect()
        await device.setAnswers(false)
        let before = device.received.items.count
        let read = Task { try await session.read(service: dis, characteristic: fw, timeout: .seconds(30)) }
        // The read's first request reaches the device, which does not answer.
        try await device.received.wait(count: before + 1)
        // The read ends with the link's loss, not at its own 30 s deadline (which would throw `timeout`).
        await device.drop(.remoteUserTerminated)
        await #expect(throws: BLEError.disconnected(.remoteUserTerminated)) { _ = try await read.value }
        #expect(await session.state == .disconnected)
    }

    @Test func operationsIssuedWhileReconnectingWaitForReady() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address,
                              options: options(reconnect: .limited(maxAttempts: 2, delays: [.milliseconds(50)])))
        let (states, t) = recordStates(session)
        defer { t.cancel() }
        try await session.connect()
        await device.drop()
        try await states.wait(within: limit, "reconnecting") { $0.contains(.reconnecting(attempt: 1)) }
        let value = try await session.read(service: dis, characteristic: fw, timeout: limit)
        #expect(value == Array("2.4.1".utf8))
    }

    @Test func twoConsumersShareOneSubscriptionAndTheLastOneOutUnsubscribes() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options())
        try await session.connect()
        let a = try await session.notifications(service: fff0, characteristic: fff3, timeout: limit)
        let b = try await session.notifications(service: fff0, characteristic: fff3, timeout: limit)
        #expect(device.cccdWrites(fff0, fff3).map(\.value) == [1])
        #expect(await device.notify(service: fff0, characteristic: fff3, [7]))
        #expect(try await next(a) == [7])
        #expect(try await next(b) == [7])
        await a.cancel()
        #expect(device.cccdWrites(fff0, fff3).map(\.value) == [1])
        #expect(await device.notify(service: fff0, characteristic: fff3, [8]))
        #expect(try await next(b) == [8])
        await b.cancel()
        #expect(device.cccdWrites(fff0, fff3).map(\.value) == [1, 0])
    }

    @Test func aConsumerGetsEveryValueSentAfterItSubscribedEvenBeforeIterating() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options())
        try await session.connect()
        let acks = try await session.notifications(service: fff0, characteristic: fff3, timeout: limit)
        for i in 0..<50 { #expect(await device.notify(service: fff0, characteristic: fff3, [UInt8(i)])) }
        var got: [UInt8] = []
        for _ in 0..<50 { got += try await next(acks) ?? [] }
        #expect(got == (0..<50).map { UInt8($0) })
    }

    @Test func indicationsAreConfirmed() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options())
        try await session.connect()
        let s = try await session.notifications(service: fff0, characteristic: fff6, indicate: true, timeout: limit)
        #expect(device.cccdWrites(fff0, fff6).map(\.value) == [2])
        #expect(await device.indicate(service: fff0, characteristic: fff6, [9]))
        #expect(try await next(s) == [9])
        try await device.events.wait { $0.contains(DeviceEvent(link: 1, event: .confirmation)) }
    }

    @Test func writeWithoutResponseWaitsForCredits() async throws {
        let device = TestPeripheral()
        let central = FakeCentral([device], credits: 2)
        let session = Session(central: central, peer: device.address, options: options())
        try await session.connect()
        _ = try await session.read(service: fff0, characteristic: BluetoothUUID(0xFFF2), timeout: limit)  // resolves FFF0
        await device.setHoldCredits(true)
        let blob = (0..<(244 * 6)).map { UInt8(truncatingIfNeeded: $0) }
        let write = Task { try await session.writeBlob(service: fff0, characteristic: fff4, data: blob, timeout: limit) }
        let h = try #require(device.valueHandle(fff0, fff4))
        let isBlobWrite: @Sendable (DeviceEvent) -> Bool = {
            if case .wrote(let handle, _, false) = $0.event { return handle == h } else { return false }
        }
        // Two credits, both kept by the device once two chunks arrived: the sender cannot send a third
        // until they come back (a logical bound, not a wait).
        try await device.events.wait { $0.filter(isBlobWrite).count >= 2 }
        #expect(device.events.items.filter(isBlobWrite).count == 2)
        await device.setHoldCredits(false)
        await device.releaseCredits()
        try await write.value
        try await device.events.wait { $0.filter(isBlobWrite).count >= 6 }
        let chunks = device.events.items.filter(isBlobWrite).compactMap { e -> [UInt8]? in
            if case .wrote(_, let v, _) = e.event { return v } else { return nil }
        }
        #expect(chunks.count == 6)
        #expect(chunks.allSatisfy { $0.count == 244 })
        #expect(chunks.flatMap { $0 } == blob, "the device received the blob in order")
    }

    @Test func cancellingAWaitingOperationReleasesTheQueue() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options())
        try await session.connect()
        // Resolve first, so that each read is exactly one request.
        _ = try await session.read(service: dis, characteristic: fw, timeout: limit)
        let before = await session.roundTrips
        await device.setAnswers(false)
        let received = device.received.items.count
        let first = Task { try await session.read(service: dis, characteristic: fw, timeout: .milliseconds(300)) }
        // The first read's request is outstanding; the second waits in the queue. Cancel the second.
        try await device.received.wait(count: received + 1)
        let second = Task { try await session.read(service: dis, characteristic: fw, timeout: limit) }
        second.cancel()
        await #expect(throws: BLEError.cancelled) { _ = try await second.value }
        await #expect(throws: BLEError.timeout(operation: "read 2A26", limit: .milliseconds(300))) { _ = try await first.value }
        #expect(await session.roundTrips == before + 1)
    }

    @Test func aDeviceThatNeverAnswersTimesOutAndTheLinkIsDropped() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address,
                              options: options(reconnect: .disabled, attTimeout: .seconds(1)))
        try await session.connect()
        await device.setAnswers(false)
        // The ATT transaction timer (1 s) ends the read, not the read's own 5 s deadline.
        await #expect(throws: BLEError.timeout(operation: "ATT Find By Type Value Request", limit: .seconds(1))) {
            _ = try await session.read(service: dis, characteristic: fw, timeout: limit)
        }
        let states = session.connectionStates()
        _ = try await withDeadline(limit, operation: "disconnected") {
            for await s in states where s == .disconnected { return true }
            return false
        }
        await #expect(throws: BLEError.self) { _ = try await session.read(service: dis, characteristic: fw, timeout: limit) }
    }

    @Test func connectionStatesStartWithTheCurrentState() async throws {
        let device = TestPeripheral()
        let session = Session(central: FakeCentral([device]), peer: device.address, options: options())
        try await session.connect()
        var it = session.connectionStates().makeAsyncIterator()
        #expect(await it.next() == .ready)
    }
}

@Suite struct ReconnectPolicyTests {
    @Test func theLastDelayRepeats() {
        let p = ReconnectPolicy.limited(maxAttempts: 5, delays: [.milliseconds(10), .milliseconds(20)])
        #expect((1...5).map { p.delay(before: $0) } == [.milliseconds(10), .milliseconds(20), .milliseconds(20), .milliseconds(20), .milliseconds(20)])
        #expect(ReconnectPolicy.limited(maxAttempts: 2, delays: []).delay(before: 2) == .zero)
        #expect(ReconnectPolicy.disabled.delay(before: 1) == .zero)
    }
}
