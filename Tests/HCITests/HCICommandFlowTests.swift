import BLE
import HCI
import Testing

private func packet<C: HCICommand>(_ c: C) -> HCICommandPacket { HCICommandPacket(command: c) }
private let limit = Duration.seconds(3)

private func sent(_ actions: [HCICommandFlow.Action]) -> [String] {
    actions.compactMap { if case .send(let bytes) = $0 { return bytes.hexString } else { return nil } }
}

@Suite struct HCICommandFlowTests {
    @Test func commandsWaitForCreditsAndGoInOrder() {
        var flow = HCICommandFlow()
        #expect(sent(flow.handle(.submit(1, packet(ResetCommand()), timeout: limit))) == ["030c00"])
        // No room until the controller answers.
        #expect(flow.handle(.submit(2, packet(ReadBDADDRCommand()), timeout: limit)).isEmpty)
        #expect(flow.handle(.submit(3, packet(LEReadBufferSizeCommand()), timeout: limit)).isEmpty)
        #expect(flow.queued == 2)
        let answer = flow.handle(.commandComplete(CommandCompleteEvent(numCommandPackets: 1, opcode: .reset, returnParameters: [0])))
        #expect(answer == [.disarmTimeout(1), .finished(1, packet(ResetCommand()), .complete([0])),
                           .send([0x09, 0x10, 0x00]), .armTimeout(2, limit)])
        // Room for two: the rest goes at once.
        let two = flow.handle(.commandComplete(CommandCompleteEvent(numCommandPackets: 2, opcode: .readBDADDR, returnParameters: [0])))
        #expect(sent(two) == ["022000"])
        #expect(flow.credits == 1 && flow.outstanding == 1)
    }

    @Test func answersGoToTheOldestCommandWithTheirOpcode() {
        var flow = HCICommandFlow(credits: 3)
        let a = LEAddDeviceToFilterAcceptListCommand(address: BluetoothAddress(value: 1, kind: .random))
        let b = LEAddDeviceToFilterAcceptListCommand(address: BluetoothAddress(value: 2, kind: .random))
        _ = flow.handle(.submit(1, packet(a), timeout: limit))
        _ = flow.handle(.submit(2, packet(LECreateConnectionCancelCommand()), timeout: limit))
        _ = flow.handle(.submit(3, packet(b), timeout: limit))
        let first = flow.handle(.commandComplete(CommandCompleteEvent(opcode: .leAddDeviceToFilterAcceptList, returnParameters: [0])))
        #expect(first.contains(.finished(1, packet(a), .complete([0]))))
        let status = flow.handle(.commandStatus(CommandStatusEvent(status: .commandDisallowed, opcode: .leCreateConnectionCancel)))
        #expect(status.contains(.finished(2, packet(LECreateConnectionCancelCommand()), .status(.commandDisallowed))))
        let second = flow.handle(.commandComplete(CommandCompleteEvent(opcode: .leAddDeviceToFilterAcceptList, returnParameters: [0x07])))
        #expect(second.contains(.finished(3, packet(b), .complete([0x07]))))
    }

    @Test func aCommandWithoutAnswerTimesOutAndItsCreditIsRecovered() {
        var flow = HCICommandFlow()
        _ = flow.handle(.submit(1, packet(LESetPHYCommand(handle: 0x40)), timeout: .milliseconds(500)))
        _ = flow.handle(.submit(2, packet(LECreateConnectionCancelCommand()), timeout: limit))
        let expired = flow.handle(.timedOut(1))
        #expect(expired.contains(.finished(1, packet(LESetPHYCommand(handle: 0x40)), .timedOut)))
        // The queue moves on without an answer.
        #expect(sent(expired) == ["0e2000"])
        #expect(flow.counters.timeouts == 1)
        // A deadline of a command that was answered meanwhile is stale.
        _ = flow.handle(.commandComplete(CommandCompleteEvent(opcode: .leCreateConnectionCancel, returnParameters: [0])))
        #expect(flow.handle(.timedOut(2)).isEmpty)
    }

    @Test func answersNobodyWaitsForAreCountedAndCreditsStillFollowTheController() {
        var flow = HCICommandFlow()
        let stray = flow.handle(.commandComplete(CommandCompleteEvent(numCommandPackets: 0, opcode: .reset, returnParameters: [0])))
        #expect(stray.count == 1)
        #expect(flow.counters.unexpectedAnswers == 1)
        // Zero room: nothing goes until a no-operation Command Complete gives some.
        #expect(flow.handle(.submit(1, packet(ResetCommand()), timeout: limit)).isEmpty)
        let nop = flow.handle(.commandComplete(CommandCompleteEvent(numCommandPackets: 1, opcode: HCIOpcode(rawValue: 0), returnParameters: [])))
        #expect(sent(nop) == ["030c00"])
        #expect(flow.counters.unexpectedAnswers == 1)
    }

    @Test func anAbandonedCommandLeavesTheQueueOrHasItsAnswerConsumed() {
        var flow = HCICommandFlow()
        _ = flow.handle(.submit(1, packet(ResetCommand()), timeout: limit))
        _ = flow.handle(.submit(2, packet(ReadBDADDRCommand()), timeout: limit))
        _ = flow.handle(.abandon(2))
        _ = flow.handle(.abandon(1))
        let answer = flow.handle(.commandComplete(CommandCompleteEvent(opcode: .reset, returnParameters: [0])))
        // Nobody is told, and the abandoned queued command never goes out.
        #expect(answer == [.disarmTimeout(1)])
        #expect(flow.queued == 0 && flow.outstanding == 0)
    }
}
