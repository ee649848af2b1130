import Testing
@testable import BLE

/// Golden event → action sequences of the ATT client's transaction machine: no bearer, no clock.
private typealias M = ATTClientMachine

private func x(_ hex: String) -> [UInt8] { [UInt8](hex: hex) ?? [] }
private func read(_ handle: UInt16) -> ATTPDU { .readRequest(ATTReadRequest(handle: handle)) }
private func readBytes(_ handle: UInt16) -> [UInt8] { read(handle).bytes }
private let limit = Duration.seconds(30)

/// Feeds events one at a time and checks each step's actions.
private struct Script {
    var machine = M(transactionTimeout: limit)

    mutating func on(_ event: M.Event, _ expected: [M.Action], sourceLocation: SourceLocation = #_sourceLocation) {
        let actions = machine.handle(event)
        #expect(actions == expected, "after \(event)", sourceLocation: sourceLocation)
    }
}

@Suite struct ATTClientMachineTests {
    @Test func requestsTakeTurnsInTheOrderTheyCame() {
        var s = Script()
        s.on(.request(1, read(1)), [.transmit(1, readBytes(1))])
        s.on(.request(2, read(2)), [])
        s.on(.request(3, read(3)), [])
        #expect(s.machine.waiting == 2)
        s.on(.sent(1), [.arm(1, limit)])
        s.on(.received(x("0b 01")), [.disarm(1), .finish(1, .response(.readResponse([1]))), .transmit(2, readBytes(2))])
        s.on(.sent(2), [.arm(2, limit)])
        s.on(.received(x("0b 02")), [.disarm(2), .finish(2, .response(.readResponse([2]))), .transmit(3, readBytes(3))])
        s.on(.sent(3), [.arm(3, limit)])
        s.on(.received(x("0b 03")), [.disarm(3), .finish(3, .response(.readResponse([3])))])
        #expect(s.machine.statistics == M.Statistics(requestsSent: 3, strayResponses: 0, droppedPDUs: 0))
        // The turn is free again: the next request goes out at once.
        s.on(.request(4, read(4)), [.transmit(4, readBytes(4))])
    }

    @Test func aResponseThatComesWhileTheCallerIsStillSendingIsKeptForIt() {
        var s = Script()
        s.on(.request(1, read(1)), [.transmit(1, readBytes(1))])
        s.on(.request(2, read(2)), [])
        // The peer answered before `send` returned (an in-memory link delivers at once): no timer.
        s.on(.received(x("0b 07")), [])
        s.on(.sent(1), [.finish(1, .response(.readResponse([7]))), .transmit(2, readBytes(2))])
        // A duplicate of 1's response once 2 has its turn cannot be told from 2's answer: ATT has no
        // transaction ids (docs/ble.md).
        s.on(.received(x("0b 07")), [])
        s.on(.sent(2), [.finish(2, .response(.readResponse([7])))])
        #expect(s.machine.statistics.strayResponses == 0)
    }

    @Test func notificationsAndIndicationsBetweenARequestAndItsResponseAreDelivered() {
        var s = Script()
        s.on(.request(1, read(3)), [.transmit(1, readBytes(3))])
        s.on(.sent(1), [.arm(1, limit)])
        s.on(.received(x("1b 0800 0100")), [.deliver(ATTValueEvent(handle: 8, value: [1, 0], isIndication: false))])
        s.on(.received(x("1d 0900 07")), [.deliver(ATTValueEvent(handle: 9, value: [7], isIndication: true)), .reply([0x1E])])
        s.on(.received(x("0b 55")), [.disarm(1), .finish(1, .response(.readResponse([0x55])))])
    }

    @Test func everyIndicationIsConfirmedEvenWhenDropped() {
        var s = Script()
        s.on(.received(x("1d 08")), [.log("dropped: truncated Handle Value Indication (2 bytes)"), .reply([0x1E])])
        s.on(.received([0x1D, 0x08, 0x00] + Array(repeating: 1, count: 30)),
             [.log("dropped: Handle Value Indication of 33 bytes exceeds ATT_MTU 23"), .reply([0x1E])])
        s.on(.received(x("1b 0800")), [.deliver(ATTValueEvent(handle: 8, value: [], isIndication: false))])
        #expect(s.machine.statistics.droppedPDUs == 2)
    }

    @Test func strayResponsesAreDroppedAndCounted() {
        var s = Script()
        s.on(.received(x("13")), [.log("dropped Write Response with no request outstanding")])
        s.on(.request(1, read(3)), [.transmit(1, readBytes(3))])
        s.on(.sent(1), [.arm(1, limit)])
        s.on(.received(x("0b 01")), [.disarm(1), .finish(1, .response(.readResponse([1])))])
        // A second response to an answered request, before the next request went out.
        s.on(.received(x("0b 02")), [.log("dropped Read Response with no request outstanding")])
        s.on(.request(2, read(4)), [.transmit(2, readBytes(4))])
        s.on(.sent(2), [.arm(2, limit)])
        s.on(.received(x("0b 03")), [.disarm(2), .finish(2, .response(.readResponse([3])))])
        #expect(s.machine.statistics == M.Statistics(requestsSent: 2, strayResponses: 2, droppedPDUs: 0))
    }

    @Test func mismatchedMalformedAndOversizedResponsesFailThePendingRequestOnly() {
        var s = Script()
        s.on(.request(1, read(3)), [.transmit(1, readBytes(3))])
        s.on(.request(2, read(3)), [])
        s.on(.sent(1), [.arm(1, limit)])
        s.on(.received(x("13")), [.disarm(1), .finish(1, .failed(.protocolError("Write Response in answer to Read Request"))),
                                  .transmit(2, readBytes(3))])
        s.on(.sent(2), [.arm(2, limit)])
        s.on(.received(x("01 12 0300 01")),
             [.disarm(2), .finish(2, .failed(.protocolError("Error Response for Write Request while Read Request was pending")))])
        s.on(.request(3, read(3)), [.transmit(3, readBytes(3))])
        s.on(.sent(3), [.arm(3, limit)])
        s.on(.received([0x0B] + Array(repeating: 0, count: 40)),
             [.disarm(3), .finish(3, .failed(.protocolError("Read Response of 41 bytes exceeds ATT_MTU 23")))])
        s.on(.request(4, read(3)), [.transmit(4, readBytes(3))])
        s.on(.sent(4), [.arm(4, limit)])
        s.on(.received(x("01 0a 0300 05")),
             [.disarm(4), .finish(4, .failed(.att(ATTError(code: .insufficientAuthentication, handle: 3, requestOpcode: 0x0A))))])
        // The late real answer to 4 is stray; the client stays usable.
        s.on(.received(x("0b 09")), [.log("dropped Read Response with no request outstanding")])
        s.on(.request(5, read(3)), [.transmit(5, readBytes(3))])
    }

    @Test func aCallerThatGivesUpWhileQueuedLeavesTheQueue() {
        var s = Script()
        s.on(.request(1, read(1)), [.transmit(1, readBytes(1))])
        s.on(.request(2, read(2)), [])
        s.on(.request(3, read(3)), [])
        s.on(.cancel(2), [.finish(2, .failed(.cancelled))])
        s.on(.cancel(2), [])
        s.on(.sent(1), [.arm(1, limit)])
        s.on(.received(x("0b 01")), [.disarm(1), .finish(1, .response(.readResponse([1]))), .transmit(3, readBytes(3))])
        #expect(s.machine.statistics.requestsSent == 2)
    }

    @Test func aCallerThatGivesUpAfterItsRequestWentOutKeepsTheTurnUntilTheResponse() {
        var s = Script()
        s.on(.request(1, read(1)), [.transmit(1, readBytes(1))])
        s.on(.sent(1), [.arm(1, limit)])
        s.on(.cancel(1), [.finish(1, .failed(.cancelled))])
        s.on(.request(2, read(2)), [])
        // The late response ends 1's transaction; it is never given to 2.
        s.on(.received(x("0b 01")), [.disarm(1), .transmit(2, readBytes(2))])
        s.on(.sent(2), [.arm(2, limit)])
        s.on(.received(x("0b 02")), [.disarm(2), .finish(2, .response(.readResponse([2])))])
    }

    @Test func aCallerThatGivesUpWithItsTurnPassesItOn() {
        var s = Script()
        s.on(.request(1, read(1)), [.transmit(1, readBytes(1))])
        s.on(.request(2, read(2)), [])
        s.on(.cancel(1), [.transmit(2, readBytes(2))])
        s.on(.sent(1), [])
        s.on(.sent(2), [.arm(2, limit)])
        #expect(s.machine.statistics.requestsSent == 2)
    }

    @Test func aRequestThatDidNotGoOutPassesTheTurnOn() {
        var s = Script()
        s.on(.request(1, read(1)), [.transmit(1, readBytes(1))])
        s.on(.request(2, read(2)), [])
        s.on(.notSent(1), [.transmit(2, readBytes(2))])
        s.on(.notSent(1), [])
        #expect(s.machine.statistics.requestsSent == 2)
    }

    @Test func theTransactionTimerKillsTheBearer() {
        var s = Script()
        s.on(.request(1, read(3)), [.transmit(1, readBytes(3))])
        s.on(.sent(1), [.arm(1, limit)])
        s.on(.request(2, read(4)), [])
        s.on(.timerExpired(9), [])
        s.on(.timerExpired(1), [.log("ATT transaction timeout: Read Request unanswered after 30.0 seconds; dropping the link"),
                                .finish(1, .failed(.timeout(operation: "ATT Read Request", limit: limit))),
                                .finish(2, .failed(.disconnected(.attTimeout))),
                                .closeBearer(.attTimeout)])
        #expect(s.machine.closed == .disconnected(.attTimeout))
        s.on(.request(3, read(5)), [.finish(3, .failed(.disconnected(.attTimeout)))])
        s.on(.received(x("0b 01")), [])
        s.on(.received(x("1d 0900 07")), [])
        s.on(.timerExpired(1), [])
    }

    @Test func whenTheBearerEndsEveryWaitEndsAtOnce() {
        var s = Script()
        s.on(.request(1, read(1)), [.transmit(1, readBytes(1))])
        s.on(.sent(1), [.arm(1, limit)])
        s.on(.request(2, read(2)), [])
        s.on(.request(3, read(3)), [])
        let gone = BLEError.disconnected(.bearerClosed)
        s.on(.fail(gone), [.disarm(1), .finish(1, .failed(gone)), .finish(2, .failed(gone)), .finish(3, .failed(gone))])
        s.on(.fail(.disconnected(.localHostTerminated)), [])
        s.on(.request(4, read(4)), [.finish(4, .failed(gone))])
        s.on(.exchangeMTU(5, preferred: 247), [.finish(5, .failed(gone))])
    }

    @Test func aBearerThatEndsWhileTheCallerSendsFailsItWhenItReportsTheSend() {
        var s = Script()
        s.on(.request(1, read(1)), [.transmit(1, readBytes(1))])
        let gone = BLEError.disconnected(.remoteUserTerminated)
        s.on(.fail(gone), [])
        s.on(.sent(1), [.finish(1, .failed(gone))])
        s.on(.request(2, read(2)), [.finish(2, .failed(gone))])
    }

    @Test func theMTUIsExchangedOnce() {
        var s = Script()
        s.on(.exchangeMTU(1, preferred: 247), [.transmit(1, x("02 f700"))])
        // Asked again while the first exchange runs: no second request.
        s.on(.exchangeMTU(2, preferred: 512), [.finish(2, .mtu(23))])
        s.on(.sent(1), [.arm(1, limit)])
        s.on(.received(x("03 0001")), [.mtu(247), .disarm(1), .finish(1, .mtu(247))])
        s.on(.exchangeMTU(3, preferred: 512), [.finish(3, .mtu(247))])
        #expect(s.machine.mtu == 247)
        // Values up to the new MTU are accepted now.
        s.on(.received([0x1B, 0x08, 0x00] + Array(repeating: 1, count: 100)),
             [.deliver(ATTValueEvent(handle: 8, value: Array(repeating: 1, count: 100), isIndication: false))])
    }

    @Test func theExchangedMTUIsTheSmallerOfBothSidesAndNeverBelow23() {
        var small = Script()
        small.on(.exchangeMTU(1, preferred: 247), [.transmit(1, x("02 f700"))])
        small.on(.sent(1), [.arm(1, limit)])
        small.on(.received(x("03 6400")), [.mtu(100), .disarm(1), .finish(1, .mtu(100))])

        var tiny = Script()
        tiny.on(.exchangeMTU(1, preferred: 247), [.transmit(1, x("02 f700"))])
        tiny.on(.sent(1), [.arm(1, limit)])
        tiny.on(.received(x("03 0500")), [.mtu(23), .disarm(1), .finish(1, .mtu(23))])

        var none = Script()
        none.on(.exchangeMTU(1, preferred: 23), [.finish(1, .mtu(23))])
    }

    @Test func whatCannotBeARequestIsRefusedBeforeItWaits() {
        var s = Script()
        s.on(.request(1, .readResponse([1])), [.finish(1, .failed(.protocolError("Read Response is not a request")))])
        let long = ATTPDU.writeRequest(ATTHandleValue(handle: 3, value: Array(repeating: 0, count: 30)))
        s.on(.request(2, long), [.finish(2, .failed(.protocolError("Write Request of 33 bytes exceeds ATT_MTU 23")))])
        #expect(s.machine.statistics.requestsSent == 0)
    }

    @Test func requestsFromThePeerGetRequestNotSupported() {
        var s = Script()
        s.on(.received(x("0a 0100")), [.log("dropped: unsupported Read Request from the peer; answering Request Not Supported"),
                                       .reply(x("01 0a 0000 06"))])
        s.on(.received(x("52 0100 01")), [.log("dropped: unexpected Write Command")])
        #expect(s.machine.statistics.droppedPDUs == 2)
    }
}
