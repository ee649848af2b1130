import BLE
import Testing

@testable import McuMgr

/// Golden event/action sequences of the upload engine: what it sends (offset, length, first or not),
/// what it reports, how it recovers.
@Suite struct UploadMachineTests {
    static let sha = [UInt8](repeating: 0x5A, count: 32)
    static let data = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    /// A Zephyr device with reassembly: 5 buffers of 2475 bytes (so 4 requests in flight: one buffer is
    /// the response's), ATT_MTU 247.
    static let device = SMPLinkLimits(maxWrite: 244, reassembly: true, bufferSize: 2475, bufferCount: 5)

    private func image(upgrade: Bool = false, configuration: UploadMachine.Configuration = .init()) -> UploadMachine {
        UploadMachine(target: .image(number: 0, sha: Self.sha, upgrade: upgrade), data: Self.data, configuration: configuration)
    }

    /// One line per action: `send 1 @0+2396 first`, `progress 2396 sent 2396`, `finished`.
    private func lines(_ actions: [UploadMachine.Action]) -> [String] {
        actions.map { a in
            switch a {
            case .send(let tag, let r, let timeout):
                var first = false
                if case .image(let i) = r { first = i.sha != nil }
                if case .file(let f) = r { first = f.length != nil }
                return "send \(tag) @\(r.offset)+\(r.dataCount)\(first ? " first" : "")\(timeout == .seconds(30) ? " 30s" : "")"
            case .progress(let acked, let sent): return "progress \(acked) sent \(sent)"
            case .finished(let match): return "finished\(match.map { " match \($0)" } ?? "")"
            case .failed(let f): return "failed \(f)"
            case .note: return "note"
            }
        }
    }

    @Test func theFirstChunkGoesAloneThenTheWindowFillsWithBufferSizedChunks() {
        var m = image()
        #expect(lines(m.handle(.start(Self.device))) == ["send 1 @0+2408 first 30s"])
        #expect(lines(m.handle(.response(1, offset: 2408, match: nil)))
                == ["progress 2408 sent 2408", "send 2 @2408+2448", "send 3 @4856+2448", "send 4 @7304+2448", "send 5 @9752+248"])
        #expect(m.inFlightCount == 4)
        #expect(lines(m.handle(.response(2, offset: 4856, match: nil))) == ["progress 4856 sent 10000"])
        #expect(lines(m.handle(.response(3, offset: 7304, match: nil))) == ["progress 7304 sent 10000"])
        #expect(lines(m.handle(.response(4, offset: 9752, match: nil))) == ["progress 9752 sent 10000"])
        #expect(lines(m.handle(.response(5, offset: 10_000, match: true))) == ["progress 10000 sent 10000", "finished match true"])
        #expect(m.phase == .finished && m.bytesSent == 10_000 && m.drops == 0)
        // Every frame fits the device's 2475-byte buffer (data lengths a multiple of 4 but the last).
        #expect(m.makeRequest(offset: 2408, first: false, frameLimit: 2475)?.frameSize == 2472)
        #expect(m.makeRequest(offset: 0, first: true, frameLimit: 2475)?.frameSize == 2475)
        #expect(m.makeRequest(offset: 9752, first: false, frameLimit: 2475)?.frameSize == 271)
    }

    @Test func theFirstRequestCarriesLengthShaImageAndUpgrade() {
        var m = UploadMachine(target: .image(number: 1, sha: Self.sha, upgrade: true), data: Self.data)
        guard case .send(_, .image(let r), _)? = m.handle(.start(Self.device)).first else {
            Issue.record("no first request")
            return
        }
        #expect(r.offset == 0 && r.length == 10_000 && r.sha == Self.sha && r.image == 1 && r.upgrade == true && r.data.count == 2392)
        #expect(m.makeRequest(offset: 2392, first: false, frameLimit: 2475) == .image(ImageUploadRequest(offset: 2392, data: Array(Self.data[2392..<4840]))))
    }

    @Test func withoutReassemblyEachRequestFitsOneWriteAndGoesAlone() {
        var m = image()
        let plain = SMPLinkLimits.conservative(mtu: 247)
        #expect(plain.maxRequestFrame == 244 && plain.initialWindow == 1)
        #expect(lines(m.handle(.start(plain))) == ["send 1 @0+176 first 30s"])
        #expect(lines(m.handle(.response(1, offset: 176, match: nil))) == ["progress 176 sent 176", "send 2 @176+220"])
        #expect(lines(m.handle(.response(2, offset: 396, match: nil))) == ["progress 396 sent 396", "send 3 @396+220"])
    }

    @Test func aDroppedRequestRewindsToTheDevicesOffsetAndNarrowsTheWindow() {
        var m = image()
        _ = m.handle(.start(Self.device))
        _ = m.handle(.response(1, offset: 2408, match: nil))
        // Request 2 (at 2408) found no buffer: request 3's answer still says 2408. Request 2 holds no
        // buffer any more (the device answers in order), so one slot of the narrowed window is free.
        #expect(lines(m.handle(.response(3, offset: 2408, match: nil))) == ["note", "send 6 @2408+2448"])
        #expect(m.window == 3 && m.drops == 1 && m.inFlightCount == 3)
        // Request 4 was sent before the rewind: its answer frees its buffer and is not acted on again.
        #expect(lines(m.handle(.response(4, offset: 2408, match: nil))) == ["send 7 @4856+2448"])
        #expect(lines(m.handle(.lost(2))) == [])
        #expect(lines(m.handle(.response(5, offset: 2408, match: nil))) == ["send 8 @7304+2448"])
        #expect(lines(m.handle(.response(6, offset: 4856, match: nil))) == ["progress 4856 sent 17344", "send 9 @9752+248"])
        _ = m.handle(.response(7, offset: 7304, match: nil))
        _ = m.handle(.response(8, offset: 9752, match: nil))
        #expect(lines(m.handle(.response(9, offset: 10_000, match: nil))) == ["progress 10000 sent 17592", "finished"])
        #expect(m.window == 3 && m.drops == 1)
    }

    @Test func aLostResponseIsRecoveredBySendingAgainFromTheLastAcknowledgedOffset() {
        var m = image(configuration: .init(maxWindow: 2))
        _ = m.handle(.start(Self.device))
        #expect(lines(m.handle(.response(1, offset: 2408, match: nil))) == ["progress 2408 sent 2408", "send 2 @2408+2448", "send 3 @4856+2448"])
        // Neither answer comes: the first deadline rewinds and narrows the window; the request still in
        // flight holds its buffer until its own deadline.
        #expect(lines(m.handle(.lost(2))) == ["note"])
        #expect(m.window == 1)
        #expect(lines(m.handle(.lost(3))) == ["send 4 @2408+2448"])
        // The device had written both: it answers with its offset, and the upload goes on from there.
        #expect(lines(m.handle(.response(4, offset: 7304, match: nil))) == ["progress 7304 sent 9752", "send 5 @7304+2448"])
    }

    @Test func requestsLostWithoutProgressFailAfterTheStallLimit() {
        var m = image(configuration: .init(maxStalls: 2))
        _ = m.handle(.start(Self.device))
        #expect(lines(m.handle(.lost(1))) == ["note", "send 2 @0+2408 first 30s"])
        #expect(lines(m.handle(.lost(2))) == ["note", "send 3 @0+2408 first 30s"])
        #expect(lines(m.handle(.lost(3))) == ["failed the upload made no progress at byte 0 after 3 lost requests"])
        #expect(m.phase == .failed)
    }

    @Test func theInitialWindowLeavesOneBufferForTheResponse() {
        #expect(SMPLinkLimits(maxWrite: 244, reassembly: true, bufferSize: 2475, bufferCount: 4).initialWindow == 3)
        #expect(SMPLinkLimits(maxWrite: 244, reassembly: true, bufferSize: 2475, bufferCount: 1).initialWindow == 1)
        #expect(SMPLinkLimits(maxWrite: 244, reassembly: false, bufferSize: 2475, bufferCount: 8).initialWindow == 1)
    }

    @Test func aWindowLearnedFromDropsOutlivesALostLink() {
        var m = image()
        _ = m.handle(.start(Self.device))
        _ = m.handle(.response(1, offset: 2408, match: nil))
        _ = m.handle(.response(3, offset: 2408, match: nil))
        #expect(m.window == 3)
        _ = m.handle(.linkDown)
        _ = m.handle(.start(Self.device))
        #expect(m.window == 3)
    }

    @Test func aLostLinkResumesFromTheDevicesOffsetForTheSameSha() {
        var m = image()
        _ = m.handle(.start(Self.device))
        _ = m.handle(.response(1, offset: 2408, match: nil))
        _ = m.handle(.response(2, offset: 4856, match: nil))
        #expect(lines(m.handle(.linkDown)) == ["note"])
        #expect(m.phase == .waitingForLink && m.acknowledged == 4856)
        #expect(lines(m.handle(.response(3, offset: 7304, match: nil))) == [])
        // The new link: the first request again; the device that kept the upload answers with its offset.
        // The device holds bytes of this upload: the first request is a probe with the header's worth of data.
        #expect(lines(m.handle(.start(Self.device))) == ["send 6 @0+256 first 30s"])
        #expect(lines(m.handle(.response(6, offset: 7304, match: nil)))
                == ["progress 7304 sent 10256", "send 7 @7304+2448", "send 8 @9752+248"])
        _ = m.handle(.response(7, offset: 9752, match: nil))
        #expect(lines(m.handle(.response(8, offset: 10_000, match: nil))) == ["progress 10000 sent 12952", "finished"])
        #expect(m.linkLosses == 1)
    }

    @Test func aDeviceThatLostTheUploadStartsOverWithTheFirstRequest() {
        var m = image()
        _ = m.handle(.start(Self.device))
        _ = m.handle(.response(1, offset: 2408, match: nil))
        _ = m.handle(.linkDown)
        _ = m.handle(.start(Self.device))
        // It rebooted after our first chunk: that is all it has.
        #expect(lines(m.handle(.response(6, offset: 2408, match: nil))).first == "send 7 @2408+2448")
        var n = image()
        _ = n.handle(.start(Self.device))
        _ = n.handle(.response(1, offset: 2408, match: nil))
        #expect(lines(n.handle(.response(2, offset: 0, match: nil))) == ["note", "progress 0 sent 10000", "send 6 @0+2408 first 30s"])
    }

    @Test func aRefusedDowngradeFailsWithTheDevicesError() {
        var m = image(upgrade: true)
        _ = m.handle(.start(Self.device))
        let refusal = SMPDeviceError(.v2(group: .image, rc: 27))
        #expect(lines(m.handle(.rejected(1, refusal, length: nil))) == ["failed device returned image error 27 [downgrade]"])
        var h = image()
        _ = h.handle(.start(Self.device))
        _ = h.handle(.response(1, offset: 2396, match: nil))
        for tag in 2...4 { _ = h.handle(.response(UInt64(tag), offset: 2408 + (tag - 1) * 2448, match: nil)) }
        #expect(lines(h.handle(.response(5, offset: 10_000, match: false))).last == "failed the device reports that the uploaded image does not match its SHA-256")
    }

    @Test func hostileOffsetsFailTheUpload() {
        var m = image()
        _ = m.handle(.start(Self.device))
        #expect(lines(m.handle(.response(1, offset: 10_001, match: nil))) == ["failed malformed upload response: the device reports offset 10001 of a 10000-byte upload"])
        var n = image()
        _ = n.handle(.start(Self.device))
        #expect(lines(n.handle(.response(1, offset: nil, match: nil))) == ["failed malformed upload response: a response without `off`"])
        var e = UploadMachine(target: .image(number: 0, sha: Self.sha, upgrade: false), data: [])
        #expect(lines(e.handle(.start(Self.device))) == ["failed nothing to upload"])
    }

    @Test func aFileUploadResumesAtTheDevicesFileLength() {
        var m = UploadMachine(target: .file(name: "/lfs/cert.der"), data: Self.data)
        #expect(lines(m.handle(.start(Self.device))) == ["send 1 @0+2424 first 30s"])
        _ = m.handle(.response(1, offset: 2424, match: nil))
        _ = m.handle(.linkDown)
        // After the reconnect the file goes on where the device acknowledged (no first request: that
        // would replace the file).
        #expect(lines(m.handle(.start(Self.device))) == ["send 6 @2424+2432", "send 7 @4856+2432", "send 8 @7288+2432", "send 9 @9720+280"])
        // The device's file is shorter than we thought: it says so with `len`.
        let notValid = SMPDeviceError(.v2(group: .file, rc: 11))
        #expect(lines(m.handle(.rejected(6, notValid, length: 1000))) == ["note", "send 10 @1000+2432"])
    }
}
