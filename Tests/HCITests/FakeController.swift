import BLE
import HCI
import Synchronization

/// An in-memory controller behind an `HCITransport`: answers the host's commands from a script and
/// lets a test inject any bytes (including hostile ones) toward the host.
final class FakeController: HCITransport {
    struct Script: Sendable {
        var leBuffer = LEBufferSizeReturn(aclLength: 27, aclPackets: 4)
        var sharedBuffer = BufferSizeReturn(aclLength: 64, syncLength: 0, aclPackets: 6, syncPackets: 0)
        /// Opcodes the controller never answers.
        var silent: Set<UInt16> = []
        /// Handle given to the next connection.
        var nextHandle: UInt16 = 0x0040
        /// Whether LE Create Connection completes at once.
        var connects = true
        /// When a cancel arrives, the connection has just been made (the race of Vol 4 Part E 7.8.13).
        var connectsWhenCancelled = false
        /// Answer with LE Enhanced Connection Complete instead of LE Connection Complete.
        var enhanced = false
    }

    let reads: AsyncThrowingStream<[UInt8], any Error>
    private let toHost: AsyncThrowingStream<[UInt8], any Error>.Continuation
    /// Every packet the host wrote, decoded from H4.
    let written: AsyncStream<H4Packet>
    private let writtenContinuation: AsyncStream<H4Packet>.Continuation
    private let state: Mutex<(script: Script, decoder: H4Decoder, closed: Bool)>

    init(_ script: Script = Script()) {
        (reads, toHost) = AsyncThrowingStream<[UInt8], any Error>.makeStream()
        (written, writtenContinuation) = AsyncStream<H4Packet>.makeStream()
        state = Mutex((script, H4Decoder(), false))
    }

    /// Changes the script from now on.
    func update(_ change: (inout Script) -> Void) { state.withLock { change(&$0.script) } }

    /// Sends bytes to the host as they are (an H4 stream).
    func inject(_ bytes: [UInt8]) { toHost.yield(bytes) }
    func inject(event: HCIEvent) { inject([0x04] + event.packet) }
    func inject(acl: ACLDataPacket) { inject([0x02] + acl.packet) }

    func write(_ bytes: [UInt8]) throws {
        let packets = try state.withLock { s throws(TransportError) -> [H4Packet] in
            if s.closed { throw TransportError("closed", errno: 9) }
            return s.decoder.feed(bytes)
        }
        for packet in packets {
            writtenContinuation.yield(packet)
            if packet.type == .command { answer(packet.bytes) }
        }
    }

    func close() {
        state.withLock { $0.closed = true }
        toHost.finish()
    }

    private func complete(_ opcode: HCIOpcode, _ params: [UInt8]) {
        inject(event: .commandComplete(CommandCompleteEvent(opcode: opcode, returnParameters: params)))
    }

    private func answer(_ bytes: [UInt8]) {
        var r = ByteReader(bytes)
        guard let command = try? HCICommandPacket(from: &r) else { return }
        let script = state.withLock { $0.script }
        if script.silent.contains(command.opcode.rawValue) { return }
        var w = ByteWriter()
        switch command.opcode {
        case .readLocalVersionInformation:
            LocalVersionReturn(hciVersion: 0x0D, hciSubversion: 1, lmpVersion: 0x0D, companyIdentifier: 0xFFFF, lmpSubversion: 2).encode(into: &w)
            complete(command.opcode, w.bytes)
        case .readBDADDR:
            BDADDRReturn(address: BluetoothAddress(value: 0x00AA_0000_0001)).encode(into: &w)
            complete(command.opcode, w.bytes)
        case .leReadBufferSize:
            script.leBuffer.encode(into: &w)
            complete(command.opcode, w.bytes)
        case .readBufferSize:
            script.sharedBuffer.encode(into: &w)
            complete(command.opcode, w.bytes)
        case .leCreateConnection:
            inject(event: .commandStatus(CommandStatusEvent(status: .success, opcode: command.opcode)))
            if script.connects, let c = try? LECreateConnectionCommand(parameters: command.parameters) {
                state.withLock { $0.script.nextHandle += 1 }
                inject(event: .leConnectionComplete(LEConnectionCompleteEvent(status: .success, handle: script.nextHandle + 1,
                                                                              peer: c.peer, enhanced: script.enhanced)))
            }
        case .leCreateConnectionCancel where script.connectsWhenCancelled:
            state.withLock { $0.script.nextHandle += 1 }
            inject(event: .leConnectionComplete(LEConnectionCompleteEvent(status: .success, handle: script.nextHandle + 1,
                                                                          peer: BluetoothAddress(value: 0xF0_0000_0001, kind: .random))))
            complete(command.opcode, [HCIStatus.commandDisallowed.rawValue])
        case .leCreateConnectionCancel:
            complete(command.opcode, [0x00])
            inject(event: .leConnectionComplete(LEConnectionCompleteEvent(
                status: .unknownConnectionIdentifier, handle: 0, peer: BluetoothAddress(value: 0))))
        case .disconnect, .leConnectionUpdate:
            inject(event: .commandStatus(CommandStatusEvent(status: .success, opcode: command.opcode)))
            if command.opcode == .disconnect, let d = try? DisconnectCommand(parameters: command.parameters) {
                inject(event: .disconnectionComplete(DisconnectionCompleteEvent(handle: d.handle, reason: .localHostTerminated)))
            }
        default:
            complete(command.opcode, [0x00])
        }
    }
}

/// Waits for the first written packet that passes `predicate`, with a deadline.
func firstWritten(_ fake: FakeController, timeout: Duration = .seconds(5),
                  where predicate: @escaping @Sendable (H4Packet) -> Bool) async throws -> H4Packet {
    try await withDeadline(timeout, operation: "written packet") {
        for await packet in fake.written where predicate(packet) { return packet }
        throw BLEError.timeout(operation: "written packet", limit: timeout)
    }
}
