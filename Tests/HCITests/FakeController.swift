import BLE
import HCI
import Synchronization

/// An in-memory controller behind an `HCITransport`: answers the host's commands from a script and
/// lets a test inject any bytes (including hostile ones) toward the host.
///
/// Connection creation behaves like a real controller's: one LE Create Connection pending at a time;
/// with initiator filter policy 0 it connects its peer once that peer advertises, with policy 1
/// whichever Filter Accept List member advertises first (when `honoursAcceptList`; otherwise, like
/// Bumble 0.0.236, only the Peer_Address); the list cannot change while such an initiation is pending
/// (Command Disallowed, counted in `disallowedListChanges`); LE Create Connection Cancel ends a pending
/// initiation with a Connection Complete (0x02), or answers Command Disallowed when none is pending.
final class FakeController: HCITransport {
    struct Script: Sendable {
        var leBuffer = LEBufferSizeReturn(aclLength: 27, aclPackets: 4)
        var sharedBuffer = BufferSizeReturn(aclLength: 64, syncLength: 0, aclPackets: 6, syncPackets: 0)
        /// Opcodes the controller never answers.
        var silent: Set<UInt16> = []
        /// Handle given to the next connection.
        var nextHandle: UInt16 = 0x0040
        /// Addresses (values) of the devices that advertise; nil: every device does.
        var advertising: Set<UInt64>?
        /// When a cancel arrives, the connection has just been made (the race of Vol 4 Part E 7.8.13).
        var connectsWhenCancelled = false
        /// Answer with LE Enhanced Connection Complete instead of LE Connection Complete.
        var enhanced = false
        /// LE Read Local Supported Features / LE Read Supported States / LE Read Filter Accept List
        /// Size answers; nil: the command is answered with a bare status (as by a controller that
        /// does not know it).
        var features: UInt64?
        var supportedStates: UInt64?
        var acceptListSize: UInt8?
        var honoursAcceptList = true
        /// Links the controller holds at most (Connection Limit Exceeded beyond); nil: no limit.
        var connectionLimit: Int?
        /// Read RSSI answer; nil: unknown command.
        var rssi: Int8?

        /// No device advertises: every LE Create Connection stays pending.
        var connects: Bool {
            get { advertising == nil }
            set { advertising = newValue ? nil : [] }
        }
    }

    /// What the controller was asked, for the tests to check.
    struct Observed: Sendable {
        /// How many times each command (by opcode) was written.
        var commands: [HCIOpcode: Int] = [:]
        var creates: [LECreateConnectionCommand] = []
        var acceptListPeak: [BluetoothAddress] = []
        var disallowedListChanges = 0
    }

    let reads: AsyncThrowingStream<[UInt8], any Error>
    private let toHost: AsyncThrowingStream<[UInt8], any Error>.Continuation
    /// Every packet the host wrote, decoded from H4.
    let written: AsyncStream<H4Packet>
    private let writtenContinuation: AsyncStream<H4Packet>.Continuation

    private struct State {
        var script: Script
        var decoder = H4Decoder()
        var closed = false
        var pending: LECreateConnectionCommand?
        var list: [BluetoothAddress] = []
        var links: [UInt16: BluetoothAddress] = [:]
        var observed = Observed()
    }
    private let state: Mutex<State>

    init(_ script: Script = Script()) {
        (reads, toHost) = AsyncThrowingStream<[UInt8], any Error>.makeStream()
        (written, writtenContinuation) = AsyncStream<H4Packet>.makeStream()
        state = Mutex(State(script: script))
    }

    /// Changes the script from now on.
    func update(_ change: (inout Script) -> Void) { state.withLock { change(&$0.script) } }

    var observed: Observed { state.withLock { $0.observed } }

    /// Sends bytes to the host as they are (an H4 stream).
    func inject(_ bytes: [UInt8]) { toHost.yield(bytes) }
    func inject(event: HCIEvent) { inject([0x04] + event.packet) }
    func inject(acl: ACLDataPacket) { inject([0x02] + acl.packet) }

    /// A device starts advertising: a pending initiation that wants it connects it now.
    func advertise(_ address: BluetoothAddress) {
        let completion = state.withLock { s -> LEConnectionCompleteEvent? in
            if s.script.advertising != nil { s.script.advertising?.insert(address.value) }
            guard let pending = s.pending else { return nil }
            return Self.connectable(&s, pending)
        }
        if let completion { inject(event: .leConnectionComplete(completion)) }
    }

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

    private func status(_ opcode: HCIOpcode, _ status: HCIStatus) {
        inject(event: .commandStatus(CommandStatusEvent(status: status, opcode: opcode)))
    }

    /// The Connection Complete a pending initiation makes now, if a device it wants advertises.
    private static func connectable(_ s: inout State, _ c: LECreateConnectionCommand) -> LEConnectionCompleteEvent? {
        let advertises = { (a: BluetoothAddress) in s.script.advertising.map { $0.contains(a.value) } ?? true }
        let candidates = c.filterPolicy == 1 && s.script.honoursAcceptList ? s.list : [c.peer]
        guard let peer = candidates.first(where: advertises) else { return nil }
        s.pending = nil
        if let limit = s.script.connectionLimit, s.links.count >= limit {
            return LEConnectionCompleteEvent(status: .connectionLimitExceeded, handle: 0, peer: peer, enhanced: s.script.enhanced)
        }
        s.script.nextHandle += 1
        let handle = s.script.nextHandle
        s.links[handle] = peer
        return LEConnectionCompleteEvent(status: .success, handle: handle, peer: peer, enhanced: s.script.enhanced)
    }

    private func answer(_ bytes: [UInt8]) {
        var r = ByteReader(bytes)
        guard let command = try? HCICommandPacket(from: &r) else { return }
        let script = state.withLock { s in
            s.observed.commands[command.opcode, default: 0] += 1
            return s.script
        }
        if script.silent.contains(command.opcode.rawValue) { return }
        var w = ByteWriter()
        switch command.opcode {
        case .reset:
            // Nothing survives a Reset (Vol 4 Part E 7.3.2).
            state.withLock { s in
                s.pending = nil
                s.list = []
                s.links = [:]
            }
            complete(command.opcode, [0x00])
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
        case .leReadLocalSupportedFeatures where script.features != nil:
            LEFeaturesReturn(features: script.features ?? 0).encode(into: &w)
            complete(command.opcode, w.bytes)
        case .leReadSupportedStates where script.supportedStates != nil:
            LESupportedStatesReturn(states: script.supportedStates ?? 0).encode(into: &w)
            complete(command.opcode, w.bytes)
        case .leReadFilterAcceptListSize where script.acceptListSize != nil:
            FilterAcceptListSizeReturn(size: script.acceptListSize ?? 0).encode(into: &w)
            complete(command.opcode, w.bytes)
        case .readRSSI:
            if let rssi = script.rssi, let c = try? ReadRSSICommand(parameters: command.parameters) {
                RSSIReturn(handle: c.handle, rssi: rssi).encode(into: &w)
                complete(command.opcode, w.bytes)
            } else {
                complete(command.opcode, [HCIStatus.unknownCommand.rawValue])
            }
        case .leAddDeviceToFilterAcceptList, .leRemoveDeviceFromFilterAcceptList, .leClearFilterAcceptList:
            let result = state.withLock { s -> HCIStatus in
                if let p = s.pending, p.filterPolicy == 1 {
                    s.observed.disallowedListChanges += 1
                    return .commandDisallowed
                }
                if let add = try? LEAddDeviceToFilterAcceptListCommand(parameters: command.parameters), command.opcode == .leAddDeviceToFilterAcceptList {
                    guard s.list.count < Int(s.script.acceptListSize ?? 0) else { return .memoryCapacityExceeded }
                    s.list.append(add.address)
                    if s.list.count > s.observed.acceptListPeak.count { s.observed.acceptListPeak = s.list }
                } else if let remove = try? LERemoveDeviceFromFilterAcceptListCommand(parameters: command.parameters),
                          command.opcode == .leRemoveDeviceFromFilterAcceptList {
                    s.list.removeAll { $0 == remove.address }
                } else {
                    s.list = []
                }
                return .success
            }
            complete(command.opcode, [result.rawValue])
        case .leCreateConnection:
            guard let c = try? LECreateConnectionCommand(parameters: command.parameters) else {
                status(command.opcode, .invalidParameters)
                return
            }
            let (busy, completion) = state.withLock { s -> (Bool, LEConnectionCompleteEvent?) in
                if s.pending != nil { return (true, nil) }
                s.observed.creates.append(c)
                s.pending = c
                return (false, Self.connectable(&s, c))
            }
            status(command.opcode, busy ? .commandDisallowed : .success)
            if let completion { inject(event: .leConnectionComplete(completion)) }
        case .leCreateConnectionCancel:
            let (pending, raced) = state.withLock { s -> (LECreateConnectionCommand?, LEConnectionCompleteEvent?) in
                let p = s.pending
                s.pending = nil
                guard let p, s.script.connectsWhenCancelled else { return (p, nil) }
                s.script.nextHandle += 1
                s.links[s.script.nextHandle] = p.peer
                return (nil, LEConnectionCompleteEvent(status: .success, handle: s.script.nextHandle, peer: p.peer, enhanced: s.script.enhanced))
            }
            if let raced {
                // The connection completed first; the cancel then finds nothing pending.
                inject(event: .leConnectionComplete(raced))
                complete(command.opcode, [HCIStatus.commandDisallowed.rawValue])
            } else if let pending {
                complete(command.opcode, [0x00])
                inject(event: .leConnectionComplete(LEConnectionCompleteEvent(
                    status: .unknownConnectionIdentifier, handle: 0, peer: pending.peer)))
            } else {
                complete(command.opcode, [HCIStatus.commandDisallowed.rawValue])
            }
        case .disconnect:
            status(command.opcode, .success)
            if let d = try? DisconnectCommand(parameters: command.parameters) {
                state.withLock { _ = $0.links.removeValue(forKey: d.handle) }
                inject(event: .disconnectionComplete(DisconnectionCompleteEvent(handle: d.handle, reason: .localHostTerminated)))
            }
        case .leConnectionUpdate, .leSetPHY:
            status(command.opcode, .success)
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

extension H4Packet {
    /// A command packet with this opcode.
    func isCommand(_ opcode: HCIOpcode) -> Bool {
        type == .command && bytes.count >= 2 && UInt16(bytes[0]) | UInt16(bytes[1]) << 8 == opcode.rawValue
    }
}
