import BLE
import CBOR
import Support
import Testing

@testable import McuMgr

/// The client's decisions, as golden event/action sequences: sequence numbers, matching, cutting
/// requests into writes, reassembling responses, falling back to version 1, losing the link.
@Suite struct SMPClientMachineTests {
    static let reassembly = SMPLinkLimits(maxWrite: 20, reassembly: true, bufferSize: 64, bufferCount: 2)

    private func response(_ seq: UInt8, group: SMPGroup = .os, command: UInt8 = 0, op: SMPOp = .writeResponse, version: SMPVersion = .v2,
                          body: CBOR = ["r": "hi"]) -> [UInt8] {
        SMPFrame(version: version, op: op, group: group, command: command, sequence: seq, body: body).encoded
    }

    @Test func aRequestThatFitsIsOneWriteAndItsResponseCompletesIt() {
        var m = SMPClientMachine(limits: .conservative(mtu: 247))
        let body = EchoRequest(text: "hi").body.encoded
        #expect(m.handle(.send(1, group: .os, command: 0, op: .write, body: body))
                == [.write(1, [[UInt8](hex: "0a00000600000000a16164626869") ?? []])])
        let answer = response(0)
        #expect(m.handle(.received(answer)) == [.completed(1, SMPFrame(header: SMPHeader(version: .v2, op: .writeResponse, length: 6, group: .os, sequence: 0, command: 0), data: Array(answer.dropFirst(8))))])
        #expect(m.inFlightCount == 0)
    }

    @Test func sequenceNumbersWrapAndSkipThoseStillWaiting() {
        var m = SMPClientMachine(limits: .conservative(mtu: 247), firstSequence: 254)
        var seqs: [UInt8] = []
        for id in 1...4 {
            if case .write(_, let pieces)? = m.handle(.send(UInt64(id), group: .os, command: 0, op: .write, body: [0xA0])).first {
                seqs.append(pieces[0][6])
            }
        }
        #expect(seqs == [254, 255, 0, 1])
        // After a wrap, a number still waiting is skipped: 250...255 sent, 252 answered, 0...249 sent; next is 252.
        var n = SMPClientMachine(limits: .conservative(mtu: 247), firstSequence: 250)
        for id in 1...6 { _ = n.handle(.send(UInt64(id), group: .os, command: 0, op: .write, body: [0xA0])) }
        _ = n.handle(.received(response(252, body: [:])))
        for id in 7...256 { _ = n.handle(.send(UInt64(id), group: .os, command: 0, op: .write, body: [0xA0])) }
        guard case .write(_, let pieces)? = n.handle(.send(257, group: .os, command: 0, op: .write, body: [0xA0])).first else {
            Issue.record("no write")
            return
        }
        #expect(pieces[0][6] == 252)
        #expect(n.handle(.send(258, group: .os, command: 0, op: .write, body: [0xA0])) == [.failed(258, .transport("256 SMP requests are already waiting for their responses"))])
    }

    @Test func aLongRequestIsCutIntoWritesOnlyWithReassembly() {
        var m = SMPClientMachine(limits: Self.reassembly)
        let body = CBOR.textMap(["d": .text(String(repeating: "x", count: 30))]).encoded
        guard case .write(1, let pieces)? = m.handle(.send(1, group: .os, command: 0, op: .write, body: body)).first else {
            Issue.record("no write")
            return
        }
        #expect(pieces.map(\.count) == [20, 20, 3])
        #expect(pieces.flatMap { $0 } == SMPFrame(header: SMPHeader(version: .v2, op: .write, length: UInt16(body.count), group: .os, sequence: 0, command: 0), data: body).encoded)
        var plain = SMPClientMachine(limits: SMPLinkLimits(maxWrite: 20, reassembly: false, bufferSize: 384, bufferCount: 1))
        #expect(plain.handle(.send(1, group: .os, command: 0, op: .write, body: body)) == [.failed(1, .tooLarge(size: 43, limit: 20))])
        #expect(m.handle(.send(2, group: .os, command: 0, op: .write, body: [UInt8](repeating: 0x40, count: 57))) == [.failed(2, .tooLarge(size: 65, limit: 64))])
    }

    @Test func aResponseSplitAcrossNotificationsIsReassembledByItsLength() throws {
        var m = SMPClientMachine(limits: SMPLinkLimits(maxWrite: 20, reassembly: true, bufferSize: 256, bufferCount: 2))
        _ = m.handle(.send(7, group: .image, command: 0, op: .read, body: [0xA0]))
        let state = ImageStateResponse(images: [ImageSlotState(slot: 0, version: "1.0.0", hash: Array(repeating: 1, count: 32), confirmed: true, active: true)])
        let bytes = SMPFrame(version: .v2, op: .readResponse, group: .image, command: 0, sequence: 0, body: state.body).encoded
        #expect(bytes.count > 40)
        #expect(m.handle(.received(Array(bytes[0..<5]))) == [])
        #expect(m.handle(.received(Array(bytes[5..<20]))) == [])
        guard case .completed(7, let frame)? = m.handle(.received(Array(bytes[20...]))).first else {
            Issue.record("not completed")
            return
        }
        #expect(try ImageStateResponse(body: CBORDecoder().decode(frame.data)) == state)
    }

    @Test func staleAndMismatchedResponsesAreDropped() {
        var m = SMPClientMachine(limits: .conservative(mtu: 247))
        _ = m.handle(.send(1, group: .os, command: 0, op: .write, body: [0xA0]))
        // Unknown sequence number, wrong command, wrong op: notes only; the request still waits.
        #expect(m.handle(.received(response(9))).count == 1)
        #expect(m.handle(.received(response(0, command: 6))).count == 1)
        #expect(m.handle(.received(response(0, op: .readResponse))).count == 1)
        #expect(m.inFlightCount == 1)
        // An abandoned request's late answer is stale too.
        #expect(m.handle(.abandon(1)) == [])
        guard case .note? = m.handle(.received(response(0))).first else {
            Issue.record("a late answer was not dropped")
            return
        }
    }

    @Test func aVersion1DeviceGetsTheRequestAgainAsVersion1() {
        var m = SMPClientMachine(limits: .conservative(mtu: 247))
        _ = m.handle(.send(1, group: .os, command: 0, op: .write, body: [0xA0]))
        let tooNew = SMPFrame(version: .v1, op: .writeResponse, group: .os, command: 0, sequence: 0, body: ["rc": 13]).encoded
        let actions = m.handle(.received(tooNew))
        #expect(actions.count == 2)
        #expect(actions.last == .write(1, [[0x02, 0, 0, 1, 0, 0, 1, 0, 0xA0]]))
        #expect(m.version == .v1)
    }

    @Test func aLostLinkFailsEveryRequestInFlight() {
        var m = SMPClientMachine(limits: .conservative(mtu: 247))
        _ = m.handle(.send(1, group: .os, command: 0, op: .write, body: [0xA0]))
        _ = m.handle(.send(2, group: .os, command: 0, op: .write, body: [0xA0]))
        _ = m.handle(.received(Array(response(0).prefix(4))))
        #expect(m.handle(.linkDown("supervision timeout")) == [.failed(1, .disconnected("supervision timeout")), .failed(2, .disconnected("supervision timeout"))])
        #expect(m.inFlightCount == 0)
    }

    @Test func garbageNotificationsAreDiscardedAndTheNextFrameStillWorks() {
        var m = SMPClientMachine(limits: .conservative(mtu: 247))
        _ = m.handle(.send(1, group: .os, command: 0, op: .write, body: [0xA0]))
        guard case .note? = m.handle(.received([0xFF, 0, 0, 0, 0, 0, 0, 0, 1])).first else {
            Issue.record("garbage was not reported")
            return
        }
        guard case .completed(1, _)? = m.handle(.received(response(0))).first else {
            Issue.record("the real answer was lost")
            return
        }
    }

    /// 100,000 hostile response pieces (random, and mutated from real responses) into the client and
    /// through the decoders the client uses: nothing traps, every piece is handled in bounded time.
    @Test func hundredThousandHostileResponsesNeverTrap() throws {
        var g = SplitMix64(seed: 0x5A17)
        var m = SMPClientMachine(limits: SMPLinkLimits(maxWrite: 244, reassembly: true, bufferSize: 2475, bufferCount: 4))
        let seeds: [[UInt8]] = [
            response(0, group: .image, command: 1, body: ImageUploadResponse(offset: 4096, match: true).body),
            response(1, group: .image, command: 0, op: .readResponse, body: ImageStateResponse(images: [ImageSlotState(slot: 0, version: "1.2.3", hash: Array(repeating: 7, count: 32), confirmed: true, active: true)]).body),
            response(2, group: .os, command: 6, op: .readResponse, body: ParametersResponse(bufferSize: 2475, bufferCount: 4).body),
            response(3, group: .image, command: 1, body: ["err": ["group": 1, "rc": 27]]),
            response(4, group: .file, command: 2, op: .readResponse, body: FileHashResponse(type: "sha256", length: 3, output: .bytes([1, 2])).body),
        ]
        let seedFrames = try seeds.map { try SMPFrame(bytes: $0) }
        var completed = 0
        var id: UInt64 = 0
        var waiting: [UInt8] = []
        for i in 0..<100_000 {
            // Keep requests in flight that the seeds answer (their group and command).
            if m.inFlightCount < 8 {
                id += 1
                let seed = seedFrames[Int(g.next() % UInt64(seedFrames.count))]
                let request = SMPOp(rawValue: seed.header.op.rawValue & 0xFE)
                if case .write(_, let pieces)? = m.handle(.send(id, group: seed.header.group, command: seed.header.command, op: request, body: [0xA0])).first {
                    waiting.append(pieces[0][6])
                }
            }
            var piece: [UInt8]
            if i % 2 == 0 {
                piece = (0..<Int(g.next() % 64)).map { _ in UInt8(truncatingIfNeeded: g.next()) }
            } else {
                piece = seeds[Int(g.next() % UInt64(seeds.count))]
                if !waiting.isEmpty { piece[6] = waiting[Int(g.next() % UInt64(waiting.count))] }
                if g.next() % 2 == 0 {
                    for _ in 0..<Int(1 + g.next() % 3) where !piece.isEmpty {
                        let at = Int(g.next() % UInt64(piece.count))
                        if g.next() % 3 == 0 { piece.removeSubrange(at...) } else { piece[at] = UInt8(truncatingIfNeeded: g.next()) }
                    }
                }
            }
            for action in m.handle(.received(piece)) {
                guard case .completed(_, let frame) = action else { continue }
                completed += 1
                waiting.removeAll { $0 == frame.header.sequence }
                // What a caller does with it: decode, look for errors, read the message.
                if let body = try? CBORDecoder(limits: SMPClient.responseLimits).decode(frame.data) {
                    _ = try? SMPDeviceError.reported(in: body)
                    _ = try? ImageUploadResponse(body: body)
                    _ = try? ImageStateResponse(body: body)
                    _ = try? ParametersResponse(body: body)
                    _ = try? FileHashResponse(body: body)
                }
            }
            if i % 1000 == 999 {
                // Requests given up now and then, as deadlines would.
                for old in max(1, id - 8)...id { _ = m.handle(.abandon(old)) }
                waiting = []
            }
        }
        #expect(completed > 100)
    }
}
