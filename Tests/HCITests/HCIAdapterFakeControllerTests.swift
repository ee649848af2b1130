import BLE
import HCI
import Testing

private func hex(_ s: String) -> [UInt8] { [UInt8](hex: s) ?? [] }
private let peer = BluetoothAddress("F0:00:00:00:00:01", kind: .random)!

private func open(_ fake: FakeController, _ options: HCIAdapter.Options = HCIAdapter.Options(log: { _ in })) async throws -> HCIAdapter {
    try await HCIAdapter.open(transport: fake, id: "fake", options: options)
}

@Suite struct HCIAdapterFakeControllerTests {
    @Test func bringUpFallsBackToSharedBuffersWhenLEHasNone() async throws {
        var script = FakeController.Script()
        script.leBuffer = LEBufferSizeReturn(aclLength: 0, aclPackets: 0)
        let adapter = try await open(FakeController(script))
        let info = try #require(await adapter.info)
        #expect(info.aclMaxLength == 64 && info.aclPackets == 6)
        await adapter.close()
    }

    @Test func aCommandTheControllerNeverAnswersFailsBringUpAtItsDeadline() async throws {
        var script = FakeController.Script()
        script.silent = [HCIOpcode.leSetEventMask.rawValue]
        let options = HCIAdapter.Options(commandTimeout: .milliseconds(200), log: { _ in })
        await #expect {
            _ = try await open(FakeController(script), options)
        } throws: { error in
            "\(error)".contains("LE Set Event Mask") && "\(error)".contains("timed out")
        }
    }

    @Test func hostileBytesAreDroppedAndTheAdapterKeepsWorking() async throws {
        let fake = FakeController()
        let adapter = try await open(fake)
        fake.inject(hex("ff ff 00"))                              // junk before an indicator
        fake.inject(hex("04 0503 00 4000"))                        // Disconnection Complete cut short
        fake.inject(hex("04 3e0c 01 00 4000 00 01 0100000000f0"))  // LE Connection Complete cut short
        fake.inject(hex("04 0505 00 7700 13 99"))                  // trailing byte
        fake.inject(hex("04 0504 00 7700 13"))                     // Disconnection Complete, unknown handle
        fake.inject(hex("04 1305 01 7700 0500"))                   // completed packets, unknown handle
        fake.inject(hex("02 7720 0500 0100 0400 01"))              // ACL for a dead connection
        fake.inject(hex("02 4120 0300 0500 04"))                   // ACL for a handle not yet connected
        fake.inject(hex("04 3e02 02 00"))                          // advertising report with no reports
        fake.inject(hex("04 3e0c 02 00 01 01 0100000000f0 00 c4"))  // framed right, but Num_Reports 0
        fake.inject(hex("04 0f04 00 01 3412"))                     // Command Status nobody waits for
        let link = try await adapter.connect(to: peer, options: ConnectOptions(timeout: .seconds(2)))
        let handle = (link as? HCILink)?.handle ?? 0
        // On the live link: an L2CAP frame that overruns its length, then a continuation without a start.
        fake.inject(acl: ACLDataPacket(handle: handle, boundary: .firstFlushable, data: hex("0100 0400 0102")))
        fake.inject(acl: ACLDataPacket(handle: handle, boundary: .continuation, data: hex("03")))
        fake.inject(acl: ACLDataPacket(handle: handle, boundary: .firstFlushable, data: hex("0100 0400 0b")))
        var incoming = link.bearer.incoming.makeAsyncIterator()
        let delivered = await incoming.next()
        #expect(delivered == [0x0B])
        let stats = await adapter.statistics
        // The junk (3 bytes), and the events whose length makes no sense for their code — cut short,
        // one byte too long, an advertising report too short to hold one — are refused by the framing
        // byte by byte (37 bytes in all); the well-framed report with no reports reaches the parser.
        #expect(stats.discardedH4Bytes == 37)
        #expect(stats.droppedACLPackets >= 4)
        #expect(stats.malformedEvents == 1)
        #expect(stats.ignoredCompletedPackets == 5)
        #expect(stats.unexpectedEvents >= 2)
        try await link.bearer.send([0x02, 0xF7, 0x00])
        let written = try await firstWritten(fake) { $0.type == .acl }
        #expect(written.bytes.count == 4 + 4 + 3)
        await adapter.close()
    }

    @Test func outgoingATTIsFragmentedAndWaitsForCredits() async throws {
        var script = FakeController.Script()
        script.leBuffer = LEBufferSizeReturn(aclLength: 27, aclPackets: 2)
        let fake = FakeController(script)
        let adapter = try await open(fake)
        let link = try await adapter.connect(to: peer, options: ConnectOptions(timeout: .seconds(2)))
        let handle = (link as? HCILink)?.handle ?? 0
        let pdu = [0x52, 0x10, 0x00] + Array(repeating: UInt8(0xAB), count: 97)   // 104 bytes with L2CAP
        let send = Task { try await link.bearer.send(pdu) }
        var fragments: [ACLDataPacket] = []
        for _ in 0..<2 {
            let p = try await firstWritten(fake) { $0.type == .acl }
            fragments.append(try ACLDataPacket(packet: p.bytes))
        }
        // Out of credits: the rest goes only after Number Of Completed Packets.
        fake.inject(event: .numberOfCompletedPackets(NumberOfCompletedPacketsEvent(entries: [.init(handle: handle, count: 2)])))
        for _ in 0..<2 {
            let p = try await firstWritten(fake) { $0.type == .acl }
            fragments.append(try ACLDataPacket(packet: p.bytes))
        }
        try await send.value
        #expect(fragments.map(\.data.count) == [27, 27, 27, 23])
        #expect(fragments.map(\.boundary) == [.firstNonFlushable, .continuation, .continuation, .continuation])
        #expect(fragments.flatMap(\.data) == L2CAPBasicFrame(channel: .att, payload: pdu).bytes)
        await adapter.close()
    }

    @Test func signallingAndSMPRequestsFromThePeerAreAnswered() async throws {
        let fake = FakeController()
        let adapter = try await open(fake)
        let link = try await adapter.connect(to: peer, options: ConnectOptions(timeout: .seconds(2)))
        let handle = (link as? HCILink)?.handle ?? 0
        fake.inject(acl: ACLDataPacket(handle: handle, boundary: .firstFlushable,
                                       data: L2CAPBasicFrame(channel: .leSignaling, payload: hex("12 07 0800 0600 0c00 0000 f401")).bytes))
        let response = try await firstWritten(fake) { $0.type == .acl }
        let frame = try L2CAPBasicFrame(bytes: try ACLDataPacket(packet: response.bytes).data)
        #expect(frame == L2CAPBasicFrame(channel: .leSignaling, payload: hex("13 07 0200 0000")))
        let update = try await firstWritten(fake) { $0.type == .command && Array($0.bytes.prefix(2)) == [0x13, 0x20] }
        #expect(update.bytes.count == 3 + 14)

        fake.inject(acl: ACLDataPacket(handle: handle, boundary: .firstFlushable,
                                       data: L2CAPBasicFrame(channel: .smp, payload: hex("01 03 00 01 10 07 07")).bytes))
        let smp = try await firstWritten(fake) { $0.type == .acl }
        #expect(try L2CAPBasicFrame(bytes: try ACLDataPacket(packet: smp.bytes).data) ==
                L2CAPBasicFrame(channel: .smp, payload: [0x05, 0x05]))
        await adapter.close()
    }

    @Test func remoteDisconnectReasonsReachTheLinkAndPendingSendsFail() async throws {
        let fake = FakeController()
        let adapter = try await open(fake)
        let link = try await adapter.connect(to: peer, options: ConnectOptions(timeout: .seconds(2)))
        let handle = (link as? HCILink)?.handle ?? 0
        fake.inject(event: .disconnectionComplete(DisconnectionCompleteEvent(handle: handle, reason: .connectionTimeout)))
        #expect(await link.waitForDisconnect() == .supervisionTimeout)
        await #expect(throws: BLEError.self) { try await link.bearer.send([0x0A, 0x01, 0x00]) }
        var incoming = link.bearer.incoming.makeAsyncIterator()
        let end = await incoming.next()
        #expect(end == nil)
        await adapter.close()
    }

    @Test func connectionSlotsAreEnforced() async throws {
        let adapter = try await open(FakeController(), HCIAdapter.Options(connectionSlots: 1, log: { _ in }))
        _ = try await adapter.connect(to: peer, options: ConnectOptions(timeout: .seconds(2)))
        await #expect {
            _ = try await adapter.connect(to: BluetoothAddress(value: 0xF0_0000_0002, kind: .random), options: ConnectOptions())
        } throws: { error in
            "\(error)".contains("slots")
        }
        await adapter.close()
    }

    @Test func aConnectThatNeverCompletesIsCancelledAtItsDeadline() async throws {
        var script = FakeController.Script()
        script.connects = false
        let fake = FakeController(script)
        let adapter = try await open(fake)
        await #expect {
            _ = try await adapter.connect(to: peer, options: ConnectOptions(timeout: .milliseconds(300)))
        } throws: { error in
            if case BLEError.timeout = error { return true }
            return false
        }
        _ = try await firstWritten(fake) { $0.type == .command && Array($0.bytes.prefix(2)) == [0x0E, 0x20] }
        await adapter.close()
    }
}

extension HCIAdapterFakeControllerTests {
    @Test func enhancedConnectionCompleteEstablishesTheLinkToo() async throws {
        var script = FakeController.Script()
        script.enhanced = true
        let fake = FakeController(script)
        let adapter = try await open(fake)
        let link = try await adapter.connect(to: peer, options: ConnectOptions(timeout: .seconds(2)))
        #expect(link.peer == peer)
        #expect((link as? HCILink)?.handle == 0x41)
        await adapter.close()
    }

    @Test func waitingForADisconnectEndsWhenTheWaitingTaskIsCancelled() async throws {
        let adapter = try await open(FakeController())
        let link = try await adapter.connect(to: peer, options: ConnectOptions(timeout: .seconds(2)))
        let waiting = Task { await link.waitForDisconnect() }
        waiting.cancel()
        #expect(await waiting.value == HCILink.waitCancelled)
        await link.disconnect()
        #expect(await link.waitForDisconnect() == .localHostTerminated)
        await adapter.close()
    }

    @Test func aConnectionThatWinsTheRaceWithItsCancelIsDropped() async throws {
        var script = FakeController.Script()
        script.connects = false
        script.connectsWhenCancelled = true
        let fake = FakeController(script)
        let adapter = try await open(fake)
        await #expect {
            _ = try await adapter.connect(to: peer, options: ConnectOptions(timeout: .milliseconds(200)))
        } throws: { error in
            if case BLEError.timeout = error { return true }
            return false
        }
        let disconnect = try await firstWritten(fake) { $0.type == .command && Array($0.bytes.prefix(2)) == [0x06, 0x04] }
        #expect(try DisconnectCommand(parameters: Array(disconnect.bytes.dropFirst(3))).handle == 0x41)
        // The adapter is consistent: the next connect works.
        fake.update { $0.connects = true }
        let link = try await adapter.connect(to: peer, options: ConnectOptions(timeout: .milliseconds(200)))
        _ = link
        await adapter.close()
    }
}

@Suite struct HCITransportOpenTests {
    @Test func openingAnAdapterThatIsNotThereSaysWhy() async throws {
        // Nothing listens on port 1.
        await #expect {
            _ = try await HCIAdapter.open(spec: "hci:tcp:127.0.0.1:1")
        } throws: { error in
            "\(error)".contains("connect to 127.0.0.1:1")
        }
        await #expect {
            _ = try await HCIAdapter.open(spec: "hci:serial:/dev/nonexistent-tty")
        } throws: { error in
            "\(error)".contains("/dev/nonexistent-tty")
        }
        // Without kernel Bluetooth, or without the device, or without CAP_NET_ADMIN: a clear message.
        await #expect {
            _ = try await HCIAdapter.open(spec: "hci:user:57")
        } throws: { error in
            let text = "\(error)"
            return text.contains("no Bluetooth support") || text.contains("hci57") || text.contains("CAP_NET_ADMIN")
        }
        await #expect(throws: AdapterSpecError.self) { _ = try await HCIAdapter.open(spec: "hci:bogus:1") }
    }
}
