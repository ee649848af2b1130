import Testing
@testable import BLE

private let limit = Duration.seconds(5)

/// A client over a scripted bearer, with its notifications recorded.
private func makeClient(timeout: Duration = .seconds(5), credits: Int? = nil) async -> (ATTClient, ScriptedBearer, Recorder<ATTValueEvent>) {
    let bearer = ScriptedBearer(credits: credits)
    let values = Recorder<ATTValueEvent>()
    let client = ATTClient(bearer: bearer, transactionTimeout: timeout) { values.append($0) }
    await client.start()
    return (client, bearer, values)
}

private func read(_ client: ATTClient, _ handle: UInt16) -> Task<ATTPDU, any Error> {
    Task { try await client.request(.readRequest(ATTReadRequest(handle: handle))) }
}

@Suite struct ATTClientTests {
    @Test func aRequestGetsItsResponse() async throws {
        let (client, bearer, _) = await makeClient()
        let r = read(client, 3)
        try await bearer.sent.wait(count: 1)
        #expect(bearer.sent.items == [[0x0A, 0x03, 0x00]])
        bearer.inject([0x0B, 0x41, 0x42])
        #expect(try await r.value == .readResponse([0x41, 0x42]))
        #expect(await client.requestsSent == 1)
    }

    /// Deterministic: b is started only once a is out, and c only once b waits in the queue (observed,
    /// not assumed from the order the tasks were created in); "nothing more goes out" is checked once
    /// both are known to wait, not by waiting a while.
    @Test func requestsWaitTheirTurnInOrder() async throws {
        let (client, bearer, _) = await makeClient()
        let queued = Recorder<Int>()
        await client.observeQueue { queued.append($0) }
        let a = read(client, 1)
        try await bearer.sent.wait(count: 1)
        let b = read(client, 2)
        try await queued.wait(count: 1)
        let c = read(client, 3)
        try await queued.wait(count: 2)
        #expect(queued.items == [1, 2])
        // Both wait while the first is unanswered: nothing more went out.
        #expect(bearer.sent.items.count == 1)
        bearer.inject([0x0B, 1])
        #expect(try await a.value == .readResponse([1]))
        // b's request goes next, and c's only once b has its answer.
        try await bearer.sent.wait(count: 2)
        #expect(bearer.sent.items == [[0x0A, 0x01, 0x00], [0x0A, 0x02, 0x00]])
        bearer.inject([0x0B, 2])
        #expect(try await b.value == .readResponse([2]))
        try await bearer.sent.wait(count: 3)
        #expect(bearer.sent.items[2] == [0x0A, 0x03, 0x00])
        bearer.inject([0x0B, 3])
        #expect(try await c.value == .readResponse([3]))
        #expect(bearer.sent.items.count == 3)
    }

    @Test func notificationsWhileARequestIsPendingAreDeliveredNotTakenAsTheResponse() async throws {
        let (client, bearer, values) = await makeClient()
        let r = read(client, 3)
        try await bearer.sent.wait(count: 1)
        bearer.inject([0x1B, 0x08, 0x00, 0x01, 0x00])
        bearer.inject([0x1D, 0x09, 0x00, 0x07])
        bearer.inject([0x0B, 0x55])
        #expect(try await r.value == .readResponse([0x55]))
        try await values.wait(count: 2)
        #expect(values.items == [ATTValueEvent(handle: 8, value: [1, 0], isIndication: false),
                                 ATTValueEvent(handle: 9, value: [7], isIndication: true)])
        // The indication was confirmed.
        try await bearer.sent.wait { $0.contains([0x1E]) }
    }

    @Test func errorResponsesMapToTypedATTErrors() async throws {
        let (client, bearer, _) = await makeClient()
        for (i, code) in [ATTErrorCode.insufficientAuthentication, .insufficientEncryption, .readNotPermitted].enumerated() {
            let r = read(client, 3)
            try await bearer.sent.wait(count: i + 1)
            bearer.inject(.errorResponse(ATTErrorResponse(requestOpcode: .readRequest, handle: 3, code: code)))
            await #expect(throws: BLEError.att(ATTError(code: code, handle: 3, requestOpcode: 0x0A))) { _ = try await r.value }
        }
    }

    @Test func aStrayResponseIsDroppedAndASecondResponseToo() async throws {
        let (client, bearer, values) = await makeClient()
        bearer.inject([0x13])   // Write Response, nothing outstanding
        bearer.inject([0x1B, 0x01, 0x00])   // a notification behind it shows it was handled
        try await values.wait(count: 1)
        #expect(await client.strayResponses == 1)
        let r = read(client, 3)
        try await bearer.sent.wait(count: 1)
        bearer.inject([0x0B, 1])
        bearer.inject([0x0B, 2])   // a second response
        bearer.inject([0x1B, 0x02, 0x00])   // and a notification behind it
        #expect(try await r.value == .readResponse([1]))
        // The notification is delivered once the second response was handled: dropped, with nothing
        // outstanding. (Had the next request gone out first, nothing could tell the duplicate from its
        // answer: ATT has no transaction ids, docs/ble.md.)
        try await values.wait(count: 2)
        #expect(await client.strayResponses == 2)
        let r2 = read(client, 4)
        try await bearer.sent.wait(count: 2)
        bearer.inject([0x0B, 3])
        // The second response to the first request was not taken for the second's.
        #expect(try await r2.value == .readResponse([3]))
        #expect(await client.strayResponses == 2)
    }

    @Test func aWrongOpcodeResponseFailsThePendingRequest() async throws {
        let (client, bearer, _) = await makeClient()
        let r = read(client, 3)
        try await bearer.sent.wait(count: 1)
        bearer.inject([0x13])   // Write Response to a Read Request
        await #expect(throws: BLEError.protocolError("Write Response in answer to Read Request")) { _ = try await r.value }
        // The client is still usable.
        let r2 = read(client, 3)
        try await bearer.sent.wait(count: 2)
        bearer.inject([0x0B, 9])
        #expect(try await r2.value == .readResponse([9]))
    }

    @Test func anErrorResponseForAnotherRequestIsAProtocolError() async throws {
        let (client, bearer, _) = await makeClient()
        let r = read(client, 3)
        try await bearer.sent.wait(count: 1)
        bearer.inject(.errorResponse(ATTErrorResponse(requestOpcode: .writeRequest, handle: 3, code: .invalidHandle)))
        await #expect(throws: BLEError.self) { _ = try await r.value }
    }

    @Test func truncatedAndOversizedResponsesFailThePendingRequest() async throws {
        let (client, bearer, _) = await makeClient()
        let r = read(client, 3)
        try await bearer.sent.wait(count: 1)
        bearer.inject([0x01, 0x0A, 0x03])   // Error Response cut short
        await #expect(throws: BLEError.self) { _ = try await r.value }
        let r2 = read(client, 3)
        try await bearer.sent.wait(count: 2)
        bearer.inject([0x0B] + Array(repeating: 0, count: 40))   // longer than ATT_MTU 23
        await #expect(throws: BLEError.protocolError("Read Response of 41 bytes exceeds ATT_MTU 23")) { _ = try await r2.value }
    }

    @Test func aNotificationBiggerThanTheMTUIsDropped() async throws {
        let (client, bearer, values) = await makeClient()
        bearer.inject([0x1B, 0x08, 0x00] + Array(repeating: 1, count: 30))
        bearer.inject([0x1B, 0x08])   // truncated
        bearer.inject([0x1B, 0x08, 0x00, 0x02])
        try await values.wait(count: 1)
        #expect(values.items == [ATTValueEvent(handle: 8, value: [2], isIndication: false)])
        #expect(await client.droppedPDUs == 2)
    }

    @Test func anIndicationStormIsConfirmedInFullWithoutHanging() async throws {
        let (client, bearer, values) = await makeClient()
        for i in 0..<2000 { bearer.inject([0x1D, 0x09, 0x00, UInt8(truncatingIfNeeded: i)]) }
        let r = read(client, 3)
        try await values.wait(count: 2000)
        try await bearer.sent.wait(within: limit, "confirmations") { $0.filter { $0 == [0x1E] }.count == 2000 }
        bearer.inject([0x0B, 1])
        #expect(try await r.value == .readResponse([1]))
    }

    @Test func theMTUIsExchangedOnce() async throws {
        let (client, bearer, _) = await makeClient()
        let first = Task { try await client.exchangeMTU(preferred: 247) }
        try await bearer.sent.wait(count: 1)
        #expect(bearer.sent.items[0] == [0x02, 0xF7, 0x00])
        bearer.inject([0x03, 0x00, 0x01])   // the server can take 256
        #expect(try await first.value == 247)
        #expect(try await client.exchangeMTU(preferred: 512) == 247)
        #expect(bearer.sent.items.count == 1)
        #expect(client.mtu == 247)
    }

    @Test func aDeviceThatNeverAnswersTimesOutAndTheBearerIsClosed() async throws {
        let (client, bearer, _) = await makeClient(timeout: .milliseconds(100))
        let r = read(client, 3)
        try await bearer.sent.wait(count: 1)
        let queued = read(client, 4)
        await #expect(throws: BLEError.timeout(operation: "ATT Read Request", limit: .milliseconds(100))) { _ = try await r.value }
        await #expect(throws: BLEError.disconnected(.attTimeout)) { _ = try await queued.value }
        #expect(bearer.closedReason == .attTimeout)
        await #expect(throws: BLEError.disconnected(.attTimeout)) {
            _ = try await client.request(.readRequest(ATTReadRequest(handle: 5)))
        }
    }

    @Test func whenIncomingEndsEveryPendingOperationFailsAtOnce() async throws {
        let (client, bearer, _) = await makeClient(timeout: .seconds(30))
        let a = read(client, 1)
        try await bearer.sent.wait(count: 1)
        let b = read(client, 2)
        bearer.endIncoming()
        await #expect(throws: BLEError.disconnected(.bearerClosed)) { _ = try await a.value }
        await #expect(throws: BLEError.disconnected(.bearerClosed)) { _ = try await b.value }
    }

    @Test func cancellingAQueuedRequestFreesItsPlace() async throws {
        let (client, bearer, _) = await makeClient()
        let a = read(client, 1)
        try await bearer.sent.wait(count: 1)
        let b = read(client, 2)
        let c = read(client, 3)
        b.cancel()
        await #expect(throws: BLEError.cancelled) { _ = try await b.value }
        bearer.inject([0x0B, 1])
        _ = try await a.value
        try await bearer.sent.wait(count: 2)
        #expect(bearer.sent.items[1] == [0x0A, 0x03, 0x00])   // c went next, b never did
        bearer.inject([0x0B, 3])
        #expect(try await c.value == .readResponse([3]))
    }

    @Test func cancellingAnInFlightRequestKeepsTheSlotUntilItsResponse() async throws {
        let (client, bearer, _) = await makeClient()
        let a = read(client, 1)
        try await bearer.sent.wait(count: 1)
        a.cancel()
        await #expect(throws: BLEError.cancelled) { _ = try await a.value }
        let queued = Recorder<Int>()
        await client.observeQueue { queued.append($0) }
        let b = read(client, 2)
        // b waits for the slot the cancelled request still holds: nothing more went out.
        try await queued.wait(count: 1)
        #expect(bearer.sent.items.count == 1)
        bearer.inject([0x0B, 1])   // a's late response: consumed, not given to b
        try await bearer.sent.wait(count: 2)
        bearer.inject([0x0B, 2])
        #expect(try await b.value == .readResponse([2]))
    }

    @Test func writeCommandsWaitForCredits() async throws {
        let (client, bearer, _) = await makeClient(credits: 2)
        let writes = Task {
            for i in 0..<5 { try await client.command(.writeCommand(ATTHandleValue(handle: 7, value: [UInt8(i)]))) }
        }
        // Two credits, two writes out; the third waits for a credit (observed), and nothing more went out.
        try await bearer.creditWaits.wait(count: 1)
        #expect(bearer.sent.items.count == 2)
        bearer.gate?.release(3)
        try await writes.value
        #expect(bearer.sent.items.map { $0.last } == [0, 1, 2, 3, 4])
    }

    @Test func requestsFromThePeerGetRequestNotSupported() async throws {
        let (_, bearer, _) = await makeClient()
        bearer.inject([0x0A, 0x01, 0x00])
        try await bearer.sent.wait(count: 1)
        #expect(bearer.sent.items[0].hexString == "010a000006")
    }
}
