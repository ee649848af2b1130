import BLE

/// The LE fixed channels of one link (Core v5.4 Vol 3 Part A 2.1) as a value state machine: ACL
/// fragments in, whole L2CAP frames routed out.
///
/// - ATT (CID 4) goes to the link's bearer.
/// - LE signalling (CID 5) is answered here (`LESignalingResponder`); a connection parameter update
///   is accepted within the link's limits (`LinkTuning`), and then asks the controller for the new
///   parameters.
/// - SMP (CID 6) goes to the pluggable security handler when one is installed; without one every
///   request is answered Pairing Failed / Pairing Not Supported (`SMPResponder`).
/// - Other channels are dropped and counted.
public struct FixedChannelRouter: Sendable {
    public enum Output: Sendable, Equatable {
        /// An ATT PDU for the link's bearer.
        case att([UInt8])
        /// An SMP PDU for the installed security handler.
        case smp([UInt8])
        /// Send this payload back on this channel.
        case reply(L2CAPBasicFrame.ChannelID, [UInt8])
        /// The peer's connection parameter update was accepted: ask the controller for these.
        case updateParameters(ConnectionParameterUpdateRequest)
        /// The peer asked for connection parameters outside the link's limits (or invalid ones): refused.
        case refusedParameters
        /// Bytes were dropped; the text says why.
        case dropped(String)
    }

    /// Whether SMP PDUs go to a security handler (true) or are answered "pairing not supported".
    public let securityHandler: Bool
    /// The link's limits for a peer's connection parameter update (nil: anything valid).
    public var target: LinkTuning.Target?
    private var reassembler = ACLReassembler()

    public init(securityHandler: Bool = false, target: LinkTuning.Target? = nil) {
        self.securityHandler = securityHandler
        self.target = target
    }

    /// Takes one ACL packet of the link.
    public mutating func receive(_ packet: ACLDataPacket) -> [Output] {
        var out: [Output] = []
        for piece in reassembler.push(packet) {
            switch piece {
            case .dropped(let why):
                out.append(.dropped(why))
            case .frame(let frame):
                out += route(frame)
            }
        }
        return out
    }

    /// Routes one whole frame.
    public func route(_ frame: L2CAPBasicFrame) -> [Output] {
        switch frame.channel {
        case .att:
            return [.att(frame.payload)]
        case .leSignaling:
            let (response, accepted) = LESignalingResponder.respond(to: frame.payload, target: target)
            var out: [Output] = []
            if let response { out.append(.reply(.leSignaling, response.bytes)) }
            if let accepted {
                out.append(.updateParameters(accepted))
            } else if response?.code == .connectionParameterUpdateResponse {
                out.append(.refusedParameters)
            }
            return out
        case .smp:
            if securityHandler { return [.smp(frame.payload)] }
            return SMPResponder.respond(to: frame.payload).map { [.reply(.smp, $0)] } ?? []
        default:
            return [.dropped("L2CAP frame on unsupported CID 0x\(String(frame.channel.rawValue, radix: 16))")]
        }
    }
}
