import Testing
@testable import BLE

private func x(_ hex: String) -> [UInt8] { [UInt8](hex: hex) ?? [] }

@Suite struct ATTInboundTests {
    @Test func theMatchingResponseCompletesThePendingRequest() {
        #expect(ATTInbound.classify(x("0b 4142"), pending: .readRequest, mtu: 23) == .response(.readResponse([0x41, 0x42])))
        #expect(ATTInbound.classify(x("13"), pending: .writeRequest, mtu: 23) == .response(.writeResponse))
    }

    @Test func aResponseWithNothingPendingIsStray() {
        guard case .stray = ATTInbound.classify(x("13"), pending: nil, mtu: 23) else {
            Issue.record("expected stray")
            return
        }
    }

    @Test func wrongOpcodesAndForeignErrorResponsesFailThePendingRequest() {
        #expect(ATTInbound.classify(x("13"), pending: .readRequest, mtu: 23)
                == .failPending(.protocolError("Write Response in answer to Read Request")))
        #expect(ATTInbound.classify(x("01 12 0300 01"), pending: .readRequest, mtu: 23)
                == .failPending(.protocolError("Error Response for Write Request while Read Request was pending")))
    }

    @Test func errorResponsesKeepTheirCodes() {
        #expect(ATTInbound.classify(x("01 0a 0300 05"), pending: .readRequest, mtu: 23)
                == .failPending(.att(ATTError(code: .insufficientAuthentication, handle: 3, requestOpcode: 0x0A))))
        #expect(ATTInbound.classify(x("01 0a 0300 0f"), pending: .readRequest, mtu: 23)
                == .failPending(.att(ATTError(code: .insufficientEncryption, handle: 3, requestOpcode: 0x0A))))
    }

    @Test func malformedOrOversizedResponsesFailThePendingRequest() {
        guard case .failPending(.protocolError) = ATTInbound.classify(x("01 0a 03"), pending: .readRequest, mtu: 23) else {
            Issue.record("truncated error response")
            return
        }
        let big = [UInt8(0x0B)] + Array(repeating: 0, count: 23)
        #expect(ATTInbound.classify(big, pending: .readRequest, mtu: 23)
                == .failPending(.protocolError("Read Response of 24 bytes exceeds ATT_MTU 23")))
    }

    @Test func notificationsAndIndicationsBecomeValuesOrAreDropped() {
        #expect(ATTInbound.classify(x("1b 0800 01"), pending: .readRequest, mtu: 23)
                == .value(ATTValueEvent(handle: 8, value: [1], isIndication: false)))
        #expect(ATTInbound.classify(x("1d 0800"), pending: nil, mtu: 23)
                == .value(ATTValueEvent(handle: 8, value: [], isIndication: true)))
        guard case .drop = ATTInbound.classify(x("1b 08"), pending: nil, mtu: 23) else {
            Issue.record("truncated notification")
            return
        }
        guard case .drop = ATTInbound.classify([0x1B, 8, 0] + Array(repeating: 0, count: 21), pending: nil, mtu: 23) else {
            Issue.record("oversized notification")
            return
        }
        #expect(ATTInbound.needsConfirmation(x("1d 08")))
        #expect(!ATTInbound.needsConfirmation(x("1b 0800")))
    }

    @Test func requestsFromThePeerAreAnsweredAndCommandsIgnored() {
        #expect(ATTInbound.classify(x("0a 0100"), pending: nil, mtu: 23) == .answerNotSupported(.readRequest))
        #expect(ATTInbound.classify(x("3f"), pending: nil, mtu: 23) == .answerNotSupported(ATTOpcode(0x3F)))
        guard case .drop = ATTInbound.classify(x("52 0100 ff"), pending: nil, mtu: 23) else {
            Issue.record("command")
            return
        }
        guard case .drop = ATTInbound.classify([], pending: nil, mtu: 23) else {
            Issue.record("empty")
            return
        }
    }
}
