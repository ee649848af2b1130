import AsyncSupport
import Synchronization

/// A link whose two ends live in one process: the central side is an ordinary `Link` with an
/// `ATTBearer`; the peripheral side (`InMemoryLink.Peer`) receives the central's PDUs and sends its own.
///
/// The central's sends are paced by credits that the peripheral returns as it consumes each PDU (as a
/// controller returns ACL buffers with Number Of Completed Packets), so write-without-response has real
/// backpressure here too. With `events`, every PDU either way waits for the link's next connection event,
/// as over a radio.
public final class InMemoryLink: Link {
    public let peer: BluetoothAddress
    public let adapterID: String
    public let bearer: any ATTBearer
    /// The peripheral's end.
    public let device: Peer

    private let closed: OneShot<DisconnectReason>
    /// The connection events PDUs wait for, when the link is paced.
    public let events: ConnectionEvents?

    /// - Parameters:
    ///   - credits: PDUs the central may have in flight before `send` waits.
    ///   - localMaxMTU: the largest ATT_MTU the central side accepts.
    ///   - events: the link's connection events; nil delivers every PDU at once.
    public init(peer: BluetoothAddress, adapterID: String, credits: Int = 8, localMaxMTU: Int = 517,
                events: ConnectionEvents? = nil) {
        let closed = OneShot<DisconnectReason>()
        let gate = AsyncSemaphore(permits: credits, cancellationError: BLEError.cancelled)
        let toDevice = PDUChannel()
        let toCentral = PDUChannel()
        self.peer = peer
        self.adapterID = adapterID
        self.closed = closed
        self.events = events
        let shared = Shared(closed: closed, gate: gate, toDevice: toDevice, toCentral: toCentral, events: events)
        self.bearer = Bearer(shared: shared, localMaxMTU: localMaxMTU)
        self.device = Peer(shared: shared)
    }

    public func waitForDisconnect() async -> DisconnectReason {
        await closed.wait() ?? .waitCancelled
    }

    public func disconnect() async {
        device.shared.close(.localHostTerminated)
    }

    /// Whether the link is down, and why.
    public var disconnectReason: DisconnectReason? { closed.value }

    /// Runs `body` once when the link goes down, synchronously with the close (at once if it is down
    /// already): the owner of the device side frees its resources before `disconnect()` returns, as a
    /// controller frees a connection slot before it reports Disconnection Complete.
    public func onClose(_ body: @escaping @Sendable (DisconnectReason) -> Void) {
        device.shared.onClose(body)
    }

    /// State both ends share.
    final class Shared: Sendable {
        let closed: OneShot<DisconnectReason>
        let gate: AsyncSemaphore
        /// Each direction's PDUs, in order (a channel, not an `AsyncStream`: a PDU handed to a waiting
        /// receiver costs no buffer, and nothing is looked up at run time per PDU).
        let toDevice: PDUChannel
        let toCentral: PDUChannel
        /// When paced: each direction's PDUs wait for the next connection event.
        let pacedToDevice: PacedDelivery?
        let pacedToCentral: PacedDelivery?
        /// The close reason once the close is claimed, and the handlers to run then.
        private let closing = Mutex<(reason: DisconnectReason?, handlers: [@Sendable (DisconnectReason) -> Void])>((nil, []))

        init(closed: OneShot<DisconnectReason>, gate: AsyncSemaphore, toDevice: PDUChannel, toCentral: PDUChannel,
             events: ConnectionEvents?) {
            self.closed = closed
            self.gate = gate
            self.toDevice = toDevice
            self.toCentral = toCentral
            pacedToDevice = events.map { PacedDelivery(events: $0, into: toDevice) }
            pacedToCentral = events.map { PacedDelivery(events: $0, into: toCentral) }
        }

        func sendToDevice(_ pdu: [UInt8]) {
            if let pacedToDevice { pacedToDevice.send(pdu) } else { toDevice.send(pdu) }
        }

        func sendToCentral(_ pdu: [UInt8]) {
            if let pacedToCentral { pacedToCentral.send(pdu) } else { toCentral.send(pdu) }
        }

        func close(_ reason: DisconnectReason) {
            let handlers: [@Sendable (DisconnectReason) -> Void]? = closing.withLock { c in
                guard c.reason == nil else { return nil }
                c.reason = reason
                defer { c.handlers = [] }
                return c.handlers
            }
            guard let handlers else { return }
            // The device side frees what it holds before either end can observe the close, so a
            // central that reconnects at once finds the peripheral free.
            for h in handlers { h(reason) }
            closed.fulfill(reason)
            gate.close(BLEError.disconnected(reason))
            pacedToDevice?.close()
            pacedToCentral?.close()
            toDevice.finish()
            toCentral.finish()
        }

        func onClose(_ body: @escaping @Sendable (DisconnectReason) -> Void) {
            let runNow: DisconnectReason? = closing.withLock { c in
                if let reason = c.reason { return reason }
                c.handlers.append(body)
                return nil
            }
            if let runNow { body(runNow) }
        }
    }

    /// The central's ATT bearer.
    final class Bearer: ATTBearerReceiving {
        let shared: Shared
        let localMaxMTU: Int

        init(shared: Shared, localMaxMTU: Int) {
            self.shared = shared
            self.localMaxMTU = localMaxMTU
        }

        /// The peripheral's PDUs, for a consumer that iterates (one consumer: `receive()` and `incoming`
        /// take from the same queue).
        var incoming: AsyncStream<[UInt8]> { shared.toCentral.stream }

        func receive() async -> [UInt8]? { await shared.toCentral.receive() }

        func send(_ pdu: [UInt8]) async throws {
            try await shared.gate.acquire()
            if let reason = shared.closed.value { throw BLEError.disconnected(reason) }
            shared.sendToDevice(pdu)
        }

        func close(reason: DisconnectReason) async {
            shared.close(reason)
        }
    }

    /// The peripheral's end: PDUs from the central arrive from `receive()` (or, iterated, `incoming`:
    /// one consumer, the same queue); call `consumed()` after handling each to return its credit.
    public final class Peer: Sendable {
        let shared: Shared

        init(shared: Shared) {
            self.shared = shared
        }

        /// The central's PDUs as a stream (each element one `receive()`); it ends when the link closes.
        public var incoming: AsyncStream<[UInt8]> { shared.toDevice.stream }

        /// The central's next PDU, in order; nil once the link has closed and every PDU sent before the
        /// close was received, or when the receiving task is cancelled.
        public func receive() async -> [UInt8]? { await shared.toDevice.receive() }

        /// Sends a PDU to the central. Returns false if the link is down.
        @discardableResult
        public func send(_ pdu: [UInt8]) -> Bool {
            guard shared.closed.value == nil else { return false }
            shared.sendToCentral(pdu)
            return true
        }

        /// Returns the credit of one received PDU.
        public func consumed() { shared.gate.release() }

        /// Drops the link from the device's side (e.g. a simulated link loss).
        public func drop(_ reason: DisconnectReason = .supervisionTimeout) { shared.close(reason) }

        public var isConnected: Bool { shared.closed.value == nil }
    }
}
