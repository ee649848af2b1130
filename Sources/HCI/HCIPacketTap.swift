import Synchronization

/// Sees every H4 packet between the host and its controller, both ways, as whole packets: what
/// `provision run --trace` writes to a btsnoop file.
///
/// The executor (`HCIAdapter`) hands it the bytes it writes and the bytes it reads, as they come; the
/// tap splits each direction into packets with its own `H4Decoder`, so a read that carries half a
/// packet, or a write that carries several ACL fragments, still gives one call per packet. Packets
/// are delivered in the order the executor saw them. The host's own decoder is not touched: a tap
/// changes nothing the host decides.
public final class HCIPacketTap: Sendable {
    /// Receives one H4 packet (its indicator byte first) and whether it came from the controller.
    public typealias Sink = @Sendable (_ packet: [UInt8], _ received: Bool) -> Void

    private let decoders = Mutex((sent: H4Decoder(), received: H4Decoder()))
    private let sink: Sink

    public init(_ sink: @escaping Sink) {
        self.sink = sink
    }

    /// Bytes the host wrote to the controller.
    public func sent(_ bytes: [UInt8]) {
        let packets = decoders.withLock { $0.sent.feed(bytes) }
        for p in packets { sink(p.framed, false) }
    }

    /// Bytes read from the controller.
    public func received(_ bytes: [UInt8]) {
        let packets = decoders.withLock { $0.received.feed(bytes) }
        for p in packets { sink(p.framed, true) }
    }
}
