import BLE
import McuMgr
import Synchronization

/// The SMP transport of one link of a simulated device, as Zephyr's Bluetooth transport behaves: writes
/// to the SMP characteristic become requests (reassembled from several writes when the device has
/// reassembly), each held in one of a bounded number of buffers — a request that finds none free is
/// dropped, silently — and served in order by one worker that first takes a buffer for its response (or
/// drops the request unanswered), does the flash work (its time), answers in notifications of at most
/// ATT_MTU - 3 bytes, and frees both buffers.
///
/// Faults: `buffer_overflow` (fewer buffers than MCUmgr parameters report), `lose_responses` (an answer
/// is not sent), `drop_mid_upload` (once, the device drops the link instead of answering an upload chunk
/// past a fraction of the image). A reset answers, waits `reset_delay`, drops the link, and keeps the
/// device off the air for `boot`.
final class SMPDeviceLink: Sendable {
    let device: VirtualDevice
    let config: McuMgrConfig
    let valueHandle: UInt16
    let peer: InMemoryLink.Peer
    let factor: Double

    private struct State {
        /// Buffers in use (requests held, responses being sent).
        var inUse = 0
        /// A request being reassembled: its bytes, its total length, whether it holds a buffer.
        var partial: [UInt8] = []
        var expected = 0
        var holdsBuffer = false
        /// Bytes of a dropped request still to come (its later writes are dropped too).
        var discarding = 0
        var mtu = 23
        var notifying = false
        var rng: SimulatorRandom
    }

    private let state: Mutex<State>
    private let queue: AsyncStream<SMPFrame>
    private let sink: AsyncStream<SMPFrame>.Continuation

    init(device: VirtualDevice, config: McuMgrConfig, valueHandle: UInt16, peer: InMemoryLink.Peer, factor: Double, rng: SimulatorRandom) {
        self.device = device
        self.config = config
        self.valueHandle = valueHandle
        self.peer = peer
        self.factor = factor
        state = Mutex(State(rng: rng))
        (queue, sink) = AsyncStream.makeStream(of: SMPFrame.self)
    }

    /// The buffers the device really has (`buffer_overflow` makes them fewer than reported).
    var capacity: Int { device.faults.smpBuffers.map { max(1, min($0, config.bufferCount)) } ?? config.bufferCount }

    /// The link's ATT state after each PDU: its MTU and whether the central enabled notifications.
    func linkState(mtu: Int, notifying: Bool) {
        state.withLock {
            $0.mtu = mtu
            $0.notifying = notifying
        }
    }

    /// One write to the SMP characteristic.
    func write(_ value: [UInt8]) {
        let frames: [SMPFrame] = state.withLock { s in
            var out: [SMPFrame] = []
            var piece = value[...]
            if s.discarding > 0 {
                let n = min(s.discarding, piece.count)
                s.discarding -= n
                piece = piece.dropFirst(n)
                if piece.isEmpty { return [] }
            }
            if s.partial.isEmpty {
                guard piece.count >= SMPHeader.size else {
                    device.record(.fault("smp_short_write"))
                    return []
                }
                var reader = ByteReader(Array(piece.prefix(SMPHeader.size)))
                guard let header = try? SMPHeader(from: &reader) else {
                    device.record(.fault("smp_bad_header"))
                    return []
                }
                let total = SMPHeader.size + Int(header.length)
                let spans = total > piece.count
                if total > config.bufferSize || (spans && !config.reassembly) || s.inUse >= capacity {
                    device.record(.fault(s.inUse >= capacity ? "smp_buffer_overflow" : "smp_request_too_long"))
                    if config.reassembly && spans { s.discarding = total - piece.count }
                    return []
                }
                s.inUse += 1
                s.holdsBuffer = true
                s.expected = total
            }
            s.partial += piece
            if s.partial.count >= s.expected {
                let bytes = Array(s.partial.prefix(s.expected))
                s.partial = []
                s.holdsBuffer = false
                if let frame = try? SMPFrame(bytes: bytes) {
                    out.append(frame)
                } else {
                    s.inUse -= 1
                }
            }
            return out
        }
        for f in frames { sink.yield(f) }
    }

    /// The link closed: the worker ends; requests still queued are lost with their buffers.
    func close() {
        sink.finish()
    }

    /// Serves the queued requests in order until the link closes.
    func serve() async {
        for await frame in queue {
            let answered = state.withLock { s -> Bool in
                guard s.inUse < capacity else { return false }
                s.inUse += 1
                return true
            }
            guard answered else {
                device.record(.fault("smp_no_response_buffer"))
                state.withLock { $0.inUse -= 1 }
                continue
            }
            guard let outcome = device.serveSMP(frame, config: config) else {
                // `drop_mid_upload`: the device drops the link instead of answering.
                peer.drop(.supervisionTimeout)
                state.withLock { $0.inUse -= 2 }
                return
            }
            let work = outcome.flashTime.scaled(factor)
            if work > .zero {
                do {
                    try await Task.sleep(for: work)
                } catch {
                    return
                }
            }
            if let response = outcome.response { send(response.encoded) }
            state.withLock { $0.inUse -= 2 }
            if outcome.reset {
                let delay = config.resetDelay.scaled(factor)
                if delay > .zero { try? await Task.sleep(for: delay) }
                device.powerOff(for: config.bootTime.scaled(factor))
                peer.drop(.supervisionTimeout)
                return
            }
        }
    }

    /// Sends a response as notifications of at most ATT_MTU - 3 bytes (when notifications are enabled).
    private func send(_ bytes: [UInt8]) {
        let (mtu, notifying, lost) = state.withLock { s -> (Int, Bool, Bool) in
            let p = device.faults.smpLoseResponses
            return (s.mtu, s.notifying, p > 0 && s.rng.chance(p))
        }
        guard notifying else { return }
        if lost {
            device.record(.fault("smp_response_lost"))
            return
        }
        let size = max(1, mtu - 3)
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + size, bytes.count)
            let pdu = [0x1B, UInt8(truncatingIfNeeded: valueHandle), UInt8(truncatingIfNeeded: valueHandle >> 8)] + bytes[offset..<end]
            guard peer.send(pdu) else { return }
            offset = end
        }
    }
}
