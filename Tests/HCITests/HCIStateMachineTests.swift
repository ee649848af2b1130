import BLE
import HCI
import Testing

private func hex(_ s: String) -> [UInt8] { [UInt8](hex: s) ?? [] }

@Suite struct H4DecoderTests {
    @Test func decoderReassemblesPacketsSplitAcrossReads() {
        var decoder = H4Decoder()
        let stream = hex("04 0e04 01030c00") + hex("02 4020 0700 0300 0400 02f700")
        var packets: [H4Packet] = []
        for byte in stream { packets += decoder.feed([byte]) }
        #expect(packets == [H4Packet(type: .event, bytes: hex("0e04 01030c00")),
                            H4Packet(type: .acl, bytes: hex("4020 0700 0300 0400 02f700"))])
        #expect(decoder.pendingBytes == 0)
    }

    @Test func decoderReturnsSeveralPacketsFromOneRead() {
        var decoder = H4Decoder()
        let packets = decoder.feed(hex("04 0e04 01030c00 04 0f04 0001 0d20 04 0504"))
        #expect(packets.count == 2)
        #expect(decoder.pendingBytes == 3)
    }

    @Test func decoderSkipsJunkAndResynchronises() {
        var decoder = H4Decoder()
        let packets = decoder.feed(hex("ff 00 77 04 0e04 01030c00"))
        #expect(packets == [H4Packet(type: .event, bytes: hex("0e04 01030c00"))])
        #expect(decoder.discardedBytes == 3)
    }
}

@Suite struct ACLFlowControlTests {
    @Test func framesAreFragmentedToTheBufferSizeWithBoundaryFlags() {
        let flow = ACLFlowControl(maxFragment: 27, credits: 4)
        let fragments = flow.fragments(handle: 0x40, frame: Array(repeating: 0xAB, count: 60))
        #expect(fragments.map(\.data.count) == [27, 27, 6])
        #expect(fragments.map(\.boundary) == [.firstNonFlushable, .continuation, .continuation])
    }

    @Test func fragmentsWaitForCreditsAndTheSenderIsToldWhenAllAreOut() {
        var flow = ACLFlowControl(maxFragment: 10, credits: 2)
        var actions = flow.enqueue(token: 1, handle: 0x40, frame: Array(repeating: 1, count: 25))
        #expect(actions.filter { if case .transmit = $0 { return true }; return false }.count == 2)
        #expect(!actions.contains(.sent(token: 1)))
        #expect(flow.credits == 0)
        actions = flow.completed(handle: 0x40, count: 1).actions
        #expect(actions.count == 2)
        #expect(actions.last == .sent(token: 1))
        #expect(flow.inFlight(0x40) == 2)
    }

    @Test func connectionsTakeTurnsFragmentByFragment() {
        var flow = ACLFlowControl(maxFragment: 10, credits: 1)
        _ = flow.enqueue(token: 1, handle: 1, frame: Array(repeating: 1, count: 30))
        _ = flow.enqueue(token: 2, handle: 2, frame: Array(repeating: 2, count: 30))
        var order: [UInt16] = []
        var handle: UInt16 = 1
        for _ in 0..<5 {
            let actions = flow.completed(handle: handle, count: 1).actions
            for case .transmit(let p) in actions {
                order.append(p.handle)
                handle = p.handle
            }
        }
        #expect(order == [2, 1, 2, 1, 2])
    }

    @Test func completionsForUnknownHandlesOrTooManyPacketsAreIgnored() {
        var flow = ACLFlowControl(maxFragment: 10, credits: 2)
        _ = flow.enqueue(token: 1, handle: 1, frame: [1, 2, 3])
        #expect(flow.completed(handle: 9, count: 5).ignored == 5)
        #expect(flow.completed(handle: 1, count: 3).ignored == 2)
        #expect(flow.credits == 2)
    }

    @Test func closingAConnectionReturnsItsCreditsAndFailsItsQueue() {
        var flow = ACLFlowControl(maxFragment: 10, credits: 1)
        _ = flow.enqueue(token: 1, handle: 1, frame: Array(repeating: 1, count: 15))
        _ = flow.enqueue(token: 2, handle: 1, frame: [1])
        let actions = flow.connectionClosed(handle: 1)
        #expect(actions == [.failed(token: 1), .failed(token: 2)])
        #expect(flow.credits == 1)
    }

    @Test func aFrameNotYetStartedCanBeCancelled() {
        var flow = ACLFlowControl(maxFragment: 10, credits: 1)
        _ = flow.enqueue(token: 1, handle: 1, frame: Array(repeating: 1, count: 15))
        _ = flow.enqueue(token: 2, handle: 1, frame: [1])
        let first = flow.cancel(token: 1)
        let second = flow.cancel(token: 2)
        #expect(!first)
        #expect(second)
        #expect(flow.queued(1) == 1)
    }
}

@Suite struct ACLReassemblerTests {
    @Test func fragmentsBecomeOneFrame() {
        var r = ACLReassembler()
        #expect(r.push(ACLDataPacket(handle: 1, boundary: .firstFlushable, data: hex("0500 0400 0102"))) == [])
        #expect(r.push(ACLDataPacket(handle: 1, boundary: .continuation, data: hex("030405"))) ==
                [.frame(L2CAPBasicFrame(channel: .att, payload: hex("0102030405")))])
        #expect(r.isIdle)
    }

    @Test func packetsLongerThanTheBufferSizeAreAccepted() {
        var r = ACLReassembler()
        let payload = Array(repeating: UInt8(0x5A), count: 600)
        let frame = L2CAPBasicFrame(channel: .att, payload: payload)
        #expect(r.push(ACLDataPacket(handle: 1, boundary: .firstFlushable, data: frame.bytes)) == [.frame(frame)])
    }

    @Test func orphanContinuationsAndOverrunsAreDroppedNotTrapped() {
        var r = ACLReassembler()
        #expect(r.push(ACLDataPacket(handle: 1, boundary: .continuation, data: [1, 2])).count == 1)
        _ = r.push(ACLDataPacket(handle: 1, boundary: .firstFlushable, data: hex("0200 0400")))
        let out = r.push(ACLDataPacket(handle: 1, boundary: .continuation, data: [1, 2, 3]))
        guard case .dropped = out.first else { Issue.record("expected a drop"); return }
        #expect(r.isIdle)
        // A header split across fragments still works.
        _ = r.push(ACLDataPacket(handle: 1, boundary: .firstFlushable, data: hex("01")))
        #expect(r.push(ACLDataPacket(handle: 1, boundary: .continuation, data: hex("00 0400 09"))) ==
                [.frame(L2CAPBasicFrame(channel: .att, payload: [9]))])
    }
}

@Suite struct AdapterSpecTests {
    @Test func specsParse() throws {
        #expect(try AdapterSpec(parsing: "hci:tcp:127.0.0.1:9000") == .tcp(host: "127.0.0.1", port: 9000))
        #expect(try AdapterSpec(parsing: "hci:tcp:[::1]:9000") == .tcp(host: "::1", port: 9000))
        #expect(try AdapterSpec(parsing: "hci:serial:/dev/ttyACM0") == .serial(path: "/dev/ttyACM0", baud: 1_000_000))
        #expect(try AdapterSpec(parsing: "hci:serial:/dev/ttyUSB1@115200") == .serial(path: "/dev/ttyUSB1", baud: 115200))
        #expect(try AdapterSpec(parsing: "hci:user:0") == .user(index: 0))
        #expect(try AdapterSpec(parsing: "hci:user:hci1") == .user(index: 1))
        // The serial settings as a query: speed and flow control.
        #expect(try AdapterSpec(parsing: "hci:serial:/dev/ttyACM0?baud=1000000&flow=rtscts")
                == .serial(path: "/dev/ttyACM0", baud: 1_000_000, flowControl: true))
        let none = try AdapterSpec(parsing: "hci:serial:/dev/serial/by-id/usb-ZEPHYR-if00?flow=none&baud=115200")
        #expect(none == .serial(path: "/dev/serial/by-id/usb-ZEPHYR-if00", baud: 115200, flowControl: false))
        #expect(none.description == "hci:serial:/dev/serial/by-id/usb-ZEPHYR-if00?baud=115200&flow=none")
        #expect(none.identityKey == "hci:serial:/dev/serial/by-id/usb-ZEPHYR-if00")
    }

    @Test func badSpecsSayWhatIsWrong() {
        for (spec, words) in [("tcp:1:2", "hci:"), ("hci:tcp:localhost", "PORT"), ("hci:tcp:h:99999", "port"),
                              ("hci:serial:ttyACM0", "absolute"), ("hci:serial:/dev/x@12", "not supported"),
                              ("hci:user:x", "index"), ("hci:usb:0", "unknown transport"),
                              ("hci:serial:/dev/x?baud=12", "not supported"), ("hci:serial:/dev/x?bad=1", "unknown serial option 'bad' (did you mean"),
                              ("hci:serial:/dev/x?flow=xon", "rtscts or none"), ("hci:serial:/dev/x@115200?baud=9600", "given twice"),
                              ("hci:serial:/dev/x?baud", "name=value"), ("hci:serial:/dev/x?flow=none&flow=none", "twice")] {
            #expect {
                _ = try AdapterSpec(parsing: spec)
            } throws: { error in
                "\(error)".contains(words)
            }
        }
    }
}
