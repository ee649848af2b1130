/// What one device can take: the largest write on its link, whether it reassembles a request from
/// several writes, and its SMP buffers. Every request is sized and pipelined from these.
public struct SMPLinkLimits: Sendable, Equatable, CustomStringConvertible {
    /// The largest single write without response: ATT_MTU - 3.
    public var maxWrite: Int
    /// True when the device reassembles a request from several writes (it answered MCUmgr parameters).
    public var reassembly: Bool
    /// `buf_size`: the largest SMP frame the device holds.
    public var bufferSize: Int
    /// `buf_count`: the device's SMP buffers (requests and their responses share them).
    public var bufferCount: Int

    public init(maxWrite: Int, reassembly: Bool, bufferSize: Int, bufferCount: Int) {
        self.maxWrite = max(maxWrite, 20)
        self.reassembly = reassembly
        self.bufferSize = max(bufferSize, SMPHeader.size + 16)
        self.bufferCount = max(bufferCount, 1)
    }

    /// Zephyr's default SMP buffer (CONFIG_MCUMGR_TRANSPORT_NETBUF_SIZE).
    public static let defaultBufferSize = 384

    /// A device that did not answer MCUmgr parameters: one request at a time, each within one write and
    /// Zephyr's default buffer.
    public static func conservative(mtu: Int) -> SMPLinkLimits {
        SMPLinkLimits(maxWrite: mtu - 3, reassembly: false, bufferSize: defaultBufferSize, bufferCount: 1)
    }

    /// A device that answered MCUmgr parameters: requests up to its buffer size, split across writes.
    public static func learned(mtu: Int, parameters: ParametersResponse) -> SMPLinkLimits {
        SMPLinkLimits(maxWrite: mtu - 3, reassembly: true, bufferSize: parameters.bufferSize, bufferCount: parameters.bufferCount)
    }

    /// The largest request frame (header included) the device takes.
    public var maxRequestFrame: Int { reassembly ? bufferSize : min(maxWrite, bufferSize) }

    /// The largest response frame expected: the device's buffer (never below one notification).
    public var maxResponseFrame: Int { max(bufferSize, maxWrite) }

    /// How many requests may be in flight at first: one less than the buffers the device reports, since
    /// Zephyr takes the buffer of each response from the same pool (a request being served needs a
    /// second one). The upload engine lowers it further when requests still get dropped (a device that
    /// has fewer buffers than it reports, or holds responses longer).
    public var initialWindow: Int { reassembly ? max(1, bufferCount - 1) : 1 }

    public var description: String {
        "write \(maxWrite) B, \(reassembly ? "reassembly" : "no reassembly"), \(bufferCount) × \(bufferSize) B buffers"
    }
}
