import BLE
import CBOR

/// The decisions of an SMP client on one link, as a value: sequence numbers, which response answers
/// which request, how a request is cut into writes, version 2 with a fall back to version 1, and what
/// a lost link does to the requests in flight. The `SMPClient` actor performs its actions.
///
/// Several requests may be in flight (the upload engine pipelines); a sequence number is never reused
/// while its request waits. A response is matched by sequence number, group and command, and must
/// carry the response operation of its request; anything else is stale (an answer to a request given
/// up) and dropped.
public struct SMPClientMachine: Sendable {
    /// The caller's handle on one request.
    public typealias RequestID = UInt64

    public enum Event: Sendable, Equatable {
        /// Send a request: its group, command, operation and CBOR body.
        case send(RequestID, group: SMPGroup, command: UInt8, op: SMPOp, body: [UInt8])
        /// A piece of the device's responses (one notification).
        case received([UInt8])
        /// The caller gave up on a request (its deadline passed, or it was cancelled).
        case abandon(RequestID)
        /// The link went down.
        case linkDown(String)
        /// New limits (after MCUmgr parameters, or a new link's MTU).
        case limits(SMPLinkLimits)
    }

    public enum Action: Sendable, Equatable {
        /// Write these pieces, in order, without response (one request).
        case write(RequestID, [[UInt8]])
        /// The request's response frame (success or a device error: see `SMPClient`).
        case completed(RequestID, SMPFrame)
        case failed(RequestID, SMPError)
        /// Something dropped on the way (a stale response, bytes that were not a frame).
        case note(String)
    }

    private struct Pending: Sendable {
        var id: RequestID
        var group: SMPGroup
        var command: UInt8
        var op: SMPOp
        var body: [UInt8]
        var version: SMPVersion
    }

    public private(set) var limits: SMPLinkLimits
    /// The version requests are sent with: 2 until a device says it is too new.
    public private(set) var version: SMPVersion
    private var nextSequence: UInt8
    private var inFlight: [UInt8: Pending] = [:]
    private var reassembler: SMPReassembler

    public init(limits: SMPLinkLimits, version: SMPVersion = .v2, firstSequence: UInt8 = 0) {
        self.limits = limits
        self.version = version
        self.nextSequence = firstSequence
        self.reassembler = SMPReassembler(maxFrame: limits.maxResponseFrame)
    }

    /// Requests waiting for their response.
    public var inFlightCount: Int { inFlight.count }

    public mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .send(let id, let group, let command, let op, let body):
            return send(Pending(id: id, group: group, command: command, op: op, body: body, version: version))
        case .received(let piece):
            var actions: [Action] = []
            for output in reassembler.feed(piece) {
                switch output {
                case .frame(let frame): actions += answer(frame)
                case .discarded(let bytes, let reason): actions.append(.note("dropped \(bytes) byte(s) of SMP responses: \(reason)"))
                }
            }
            return actions
        case .abandon(let id):
            guard let seq = inFlight.first(where: { $0.value.id == id })?.key else { return [] }
            inFlight[seq] = nil
            if inFlight.isEmpty {
                let dropped = reassembler.reset()
                if dropped > 0 { return [.note("dropped a partial SMP response of \(dropped) byte(s)")] }
            }
            return []
        case .linkDown(let why):
            let pending = inFlight.values.sorted { $0.id < $1.id }
            inFlight = [:]
            _ = reassembler.reset()
            return pending.map { .failed($0.id, .disconnected(why)) }
        case .limits(let l):
            limits = l
            if inFlight.isEmpty { reassembler = SMPReassembler(maxFrame: l.maxResponseFrame) }
            return []
        }
    }

    private mutating func send(_ p: Pending) -> [Action] {
        let size = SMPHeader.size + p.body.count
        guard size <= limits.maxRequestFrame, p.body.count <= Int(UInt16.max) else {
            return [.failed(p.id, .tooLarge(size: size, limit: limits.maxRequestFrame))]
        }
        guard inFlight.count < 256 else {
            return [.failed(p.id, .transport("256 SMP requests are already waiting for their responses"))]
        }
        while inFlight[nextSequence] != nil { nextSequence &+= 1 }
        let seq = nextSequence
        nextSequence &+= 1
        inFlight[seq] = p
        let header = SMPHeader(version: p.version, op: p.op, length: UInt16(p.body.count), group: p.group, sequence: seq, command: p.command)
        let frame = SMPFrame(header: header, data: p.body).encoded
        return [.write(p.id, Self.pieces(frame, maxWrite: limits.maxWrite))]
    }

    /// A frame cut into writes of at most `maxWrite` bytes (one write when it fits).
    public static func pieces(_ frame: [UInt8], maxWrite: Int) -> [[UInt8]] {
        guard frame.count > maxWrite, maxWrite > 0 else { return [frame] }
        return stride(from: 0, to: frame.count, by: maxWrite).map { Array(frame[$0..<min($0 + maxWrite, frame.count)]) }
    }

    private mutating func answer(_ frame: SMPFrame) -> [Action] {
        let h = frame.header
        guard let p = inFlight[h.sequence] else {
            return [.note("dropped a stale SMP response: \(h)")]
        }
        guard h.group == p.group, h.command == p.command, h.op == p.op.response else {
            return [.note("dropped an SMP response that does not answer request seq \(h.sequence) (\(p.group)/\(p.command)): \(h)")]
        }
        inFlight[h.sequence] = nil
        // A server that only speaks version 1 says so; send the request again as version 1 (once).
        if p.version == .v2, Self.saysVersionTooNew(frame) {
            version = .v1
            var again = p
            again.version = .v1
            return [.note("the device speaks SMP version 1 only; sending version 1")] + send(again)
        }
        return [.completed(p.id, frame)]
    }

    /// True when a response reports `rc` UNSUPPORTED_TOO_NEW.
    private static func saysVersionTooNew(_ frame: SMPFrame) -> Bool {
        guard let body = try? CBORDecoder(limits: SMPClient.responseLimits).decode(frame.data),
              let reported = try? SMPDeviceError.reported(in: body) else { return false }
        return reported.code == .v1(.protocolTooNew)
    }
}
