import BLE
import Synchronization

/// A `Central` that records every ATT PDU of every link it opens, both ways, and otherwise is the
/// central it wraps: `provision run --adapter sim --trace PATH` (the simulator has no HCI packets to
/// trace; its links carry ATT PDUs in memory).
///
/// Each link's bearer is wrapped: a PDU the host sends is recorded, then sent; a PDU the device sends
/// is recorded as it comes off the link, then handed on in order. Tracing never fails a link: a
/// write error is given to `onError` (once per error, by the caller's choice) and the PDU goes on.
public final class ATTTracingCentral: Central {
    public let base: any Central
    private let writer: ATTTraceWriter
    private let linkName: @Sendable (BluetoothAddress) -> String
    private let onError: @Sendable (TraceError) -> Void

    /// - Parameters:
    ///   - linkName: what a record calls the link to `peer` (an inventory id, else the address).
    ///   - onError: a trace write failed (the run goes on).
    public init(_ base: any Central, writer: ATTTraceWriter, linkName: @escaping @Sendable (BluetoothAddress) -> String = { $0.description },
                onError: @escaping @Sendable (TraceError) -> Void = { _ in }) {
        self.base = base
        self.writer = writer
        self.linkName = linkName
        self.onError = onError
    }

    public var id: String { base.id }
    public var connectionSlots: Int { base.connectionSlots }
    public var isSimulated: Bool { base.isSimulated }
    public var connectsByAddress: Bool { base.connectsByAddress }
    public var stationIdentity: BluetoothAddress? { base.stationIdentity }
    public var outage: String? { base.outage }

    public func scan(_ filter: ScanFilter) -> AsyncThrowingStream<Advertisement, any Error> { base.scan(filter) }

    public func connect(to peer: BluetoothAddress, options: ConnectOptions) async throws -> any Link {
        let link = try await base.connect(to: peer, options: options)
        return TracedLink(link, name: linkName(link.peer), writer: writer, onError: onError)
    }

    public func close() async { await base.close() }
}

/// A link whose bearer records its PDUs.
final class TracedLink: Link {
    let base: any Link
    let bearer: any ATTBearer

    init(_ base: any Link, name: String, writer: ATTTraceWriter, onError: @escaping @Sendable (TraceError) -> Void) {
        self.base = base
        self.bearer = TracedBearer(base.bearer, name: name, writer: writer, onError: onError)
    }

    var peer: BluetoothAddress { base.peer }
    var adapterID: String { base.adapterID }
    func waitForDisconnect() async -> DisconnectReason { await base.waitForDisconnect() }
    func disconnect() async { await base.disconnect() }
    func readRSSI() async -> Int? { await base.readRSSI() }
    var parameters: LinkParameters? { base.parameters }
    /// Pairing and encryption are the wrapped link's (its SMP is not ATT: it is not traced here).
    func secure(_ request: SecurityRequest) async throws -> SecurityOutcome { try await base.secure(request) }
}

/// A bearer that records each PDU before it goes out and as it comes in.
final class TracedBearer: ATTBearer {
    private let base: any ATTBearer
    private let name: String
    private let writer: ATTTraceWriter
    private let onError: @Sendable (TraceError) -> Void
    let incoming: AsyncStream<[UInt8]>
    private let forwarding: Task<Void, Never>

    init(_ base: any ATTBearer, name: String, writer: ATTTraceWriter, onError: @escaping @Sendable (TraceError) -> Void) {
        self.base = base
        self.name = name
        self.writer = writer
        self.onError = onError
        let (stream, continuation) = AsyncStream.makeStream(of: [UInt8].self)
        incoming = stream
        // The base stream has one consumer: this task, which records each PDU and hands it on in order.
        let source = base.incoming
        forwarding = Task {
            for await pdu in source {
                Self.record(pdu, .received, name: name, writer: writer, onError: onError)
                continuation.yield(pdu)
            }
            continuation.finish()
        }
        let task = forwarding
        continuation.onTermination = { _ in task.cancel() }
    }

    deinit { forwarding.cancel() }

    var localMaxMTU: Int { base.localMaxMTU }

    func send(_ pdu: [UInt8]) async throws {
        Self.record(pdu, .sent, name: name, writer: writer, onError: onError)
        try await base.send(pdu)
    }

    func close(reason: DisconnectReason) async { await base.close(reason: reason) }

    private static func record(_ pdu: [UInt8], _ direction: TraceDirection, name: String, writer: ATTTraceWriter,
                               onError: @Sendable (TraceError) -> Void) {
        do {
            try writer.write(pdu: pdu, link: name, direction: direction)
        } catch {
            onError(error)
        }
    }
}
