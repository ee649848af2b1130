import AsyncSupport
import BLE
import Synchronization

/// One LE connection held by an `HCIAdapter`.
public final class HCILink: Link {

    /// What `waitForDisconnect()` returns to a task cancelled while the link is still up (the shared
    /// `DisconnectReason.waitCancelled`).
    public static let waitCancelled = DisconnectReason.waitCancelled

    public let peer: BluetoothAddress
    public let adapterID: String
    /// The controller's connection handle (reused by the controller after the link goes down).
    public let handle: UInt16
    /// RSSI of the last advertisement the adapter heard from the peer before the link came up.
    public let heardRSSI: Int?
    /// Unique for the adapter's lifetime, unlike `handle`.
    let linkID: UInt64
    private let adapter: HCIAdapter
    private let attBearer: HCIATTBearer
    /// Why the link went down (nil while it is up), and the tasks waiting for it.
    private let state = WaiterQueue<DisconnectReason?, DisconnectReason>(nil)
    /// What the link got from the radio, as the controller last reported it.
    private let linkParameters: Mutex<LinkParameters>

    init(peer: BluetoothAddress, adapter: HCIAdapter, adapterID: String, handle: UInt16, linkID: UInt64, heardRSSI: Int?,
         parameters: LinkParameters) {
        self.linkParameters = Mutex(parameters)
        self.peer = peer
        self.adapterID = adapterID
        self.handle = handle
        self.linkID = linkID
        self.heardRSSI = heardRSSI
        self.adapter = adapter
        self.attBearer = HCIATTBearer(adapter: adapter, linkID: linkID)
    }

    public var bearer: any ATTBearer { attBearer }

    /// Why the link went down, or nil while it is up.
    public var disconnectReason: DisconnectReason? { state.withLock { reason, _ in reason } }

    /// What the link got from the radio: interval, latency and supervision timeout (LE Connection
    /// Complete, LE Connection Update Complete), PHY (LE PHY Update Complete) and data length (LE Data
    /// Length Change), as the controller last reported them — kept after the link went down.
    public var parameters: LinkParameters? { linkParameters.withLock { $0 } }

    func update(_ parameters: LinkParameters) { linkParameters.withLock { $0 = parameters } }

    /// Waits until the link goes down and says why. A cancelled task stops waiting at once and gets
    /// `HCILink.waitCancelled` (code 0x00) if the link is still up.
    public func waitForDisconnect() async -> DisconnectReason {
        switch await state.wait({ reason, _ in reason }) {
        case .granted(let reason): return reason
        case .cancelled, .timedOut: return Self.waitCancelled
        }
    }

    public func disconnect() async {
        await adapter.disconnect(linkID: linkID, reason: .localHostTerminated)
    }

    /// The link's RSSI (HCI Read RSSI), or the RSSI of the advertisement heard before the link came up
    /// when the controller will not say; nil when neither is known.
    public func readRSSI() async -> Int? {
        await adapter.readRSSI(handle: handle) ?? heardRSSI
    }

    /// Encrypts the link with a stored bond that meets the level, else pairs through the host's
    /// Security Manager (see `Link.secure(_:)`).
    public func secure(_ request: SecurityRequest) async throws -> SecurityOutcome {
        try await adapter.secure(linkID: linkID, request: request)
    }

    /// Records the end of the link once: wakes every waiter and finishes the ATT stream.
    func markDisconnected(_ reason: DisconnectReason) {
        state.withLock { current, waiters in
            guard current == nil else { return }
            current = reason
            // The ATT stream ends before any waiter resumes (waiters resume once this returns).
            attBearer.finish()
            waiters.resumeAll(reason)
        }
    }

    func deliverATT(_ pdu: [UInt8]) { attBearer.deliver(pdu) }
}

/// The ATT fixed channel (CID 4) of one HCI link.
final class HCIATTBearer: ATTBearer {
    let incoming: AsyncStream<[UInt8]>
    private let continuation: AsyncStream<[UInt8]>.Continuation
    private let adapter: HCIAdapter
    private let linkID: UInt64

    init(adapter: HCIAdapter, linkID: UInt64) {
        self.adapter = adapter
        self.linkID = linkID
        (incoming, continuation) = AsyncStream<[UInt8]>.makeStream()
    }

    /// ATT_MTU up to 517 can be received: incoming frames of any length are reassembled.
    var localMaxMTU: Int { 517 }

    func send(_ pdu: [UInt8]) async throws {
        try await adapter.sendL2CAP(linkID: linkID, channel: .att, payload: pdu)
    }

    func close(reason: DisconnectReason) async {
        await adapter.disconnect(linkID: linkID, reason: reason)
    }

    func deliver(_ pdu: [UInt8]) { continuation.yield(pdu) }
    func finish() { continuation.finish() }
}
