import BLE
import Digests

/// What a virtual device remembers across connections (and, with a state file, across runs): the
/// configuration, the blob, the state value, counters and the command history. A value type; the
/// device's state is the fold of its `DeviceEvent`s, which is also how a state file is replayed.
struct DeviceState: Sendable {
    var connections = 0
    var connectAttempts = 0
    var config: [UInt8]?
    var blobExpected: Int?
    /// The digest of the blob's bytes so far (the first `blobStoreLimit` of them), and how many it has
    /// taken: a device keeps the digest, not the bytes (a fleet of 100,000 kept every blob).
    var blobDigest = SHA256()
    var blobDigested = 0
    var blobReceived = 0
    var blobEnded = false
    var blobDropped = 0
    var state: UInt8
    var commits = 0
    var commands: [CommandRecord] = []
    var faults: [String: Int] = [:]
    /// Pairings that completed on this device, in order.
    var pairings: [PairingRecord] = []
    /// Why pairings failed, in order (the Pairing Failed reason, or what the device saw).
    var pairingFailures: [String] = []
    /// Links encrypted with a bond the device kept (no pairing).
    var encryptions = 0
    /// The bonds the device keeps, by central: never the key, only its digest (`PairingRecord.keyDigest`).
    var bonds: [String: PairingRecord] = [:]
    /// Values written to stored characteristics (`store` behaviour), the last one of each.
    var stored: [CommandBehaviour.Path: [UInt8]] = [:]

    /// Blob bytes that go into the digest; bytes beyond are counted, not digested.
    static let blobStoreLimit = 1 << 20

    init(state: UInt8) {
        self.state = state
    }

    /// Applies one event. For a control write, returns the ack to notify (`<opcode> <status>`).
    @discardableResult
    mutating func apply(_ event: DeviceEvent, behaviour: CommandBehaviour?) -> [UInt8]? {
        switch event {
        case .connectAttempt:
            connectAttempts += 1
        case .connected:
            connections += 1
        case .fault(let name):
            faults[name, default: 0] += 1
        case .store(let path, let value):
            stored[path] = value
        case .blob(let bytes):
            guard blobExpected != nil, !blobEnded else {
                blobDropped += bytes.count
                return nil
            }
            blobReceived += bytes.count
            if blobDigested < Self.blobStoreLimit {
                let taken = bytes.count <= Self.blobStoreLimit - blobDigested ? bytes : Array(bytes.prefix(Self.blobStoreLimit - blobDigested))
                blobDigest.update(taken)
                blobDigested += taken.count
            }
        case .control(let bytes, let busy, let link):
            guard let opcode = bytes.first else {
                commands.append(CommandRecord(opcode: nil, status: nil, link: link))
                return nil
            }
            if busy {
                faults["busy_ack", default: 0] += 1
                commands.append(CommandRecord(opcode: opcode, status: CommandBehaviour.busy, link: link))
                return [opcode, CommandBehaviour.busy]
            }
            var payload = Array(bytes.dropFirst())
            var reason: String?
            if let check = behaviour?.commands[opcode]?.crc {
                switch check.check(payload) {
                case .success(let body): payload = body
                case .failure(let mismatch): reason = mismatch.reason
                }
            }
            let status = reason == nil ? execute(opcode, payload, behaviour) : CommandBehaviour.invalid
            commands.append(CommandRecord(opcode: opcode, status: status, link: link, reason: reason))
            return [opcode, status]
        case .paired(let record):
            pairings.append(record)
            if record.keyDigest != nil { bonds[record.central] = record }
        case .pairingFailed(let reason):
            pairingFailures.append(reason)
        case .encrypted:
            encryptions += 1
        case .forgotBond(let central):
            bonds[central] = nil
        case .smp:
            // Held by the device's `McuMgrState` (VirtualDevice).
            break
        }
        return nil
    }

    private mutating func execute(_ opcode: UInt8, _ payload: [UInt8], _ behaviour: CommandBehaviour?) -> UInt8 {
        guard let command = behaviour?.commands[opcode] else { return CommandBehaviour.unknown }
        switch command.action {
        case .setConfig:
            guard command.length.contains(payload.count) else { return CommandBehaviour.invalid }
            config = payload
        case .beginBlob:
            guard payload.count == 4 else { return CommandBehaviour.invalid }
            blobExpected = Int(UInt32(payload[0]) | UInt32(payload[1]) << 8 | UInt32(payload[2]) << 16 | UInt32(payload[3]) << 24)
            blobDigest = SHA256()
            blobDigested = 0
            blobReceived = 0
            blobEnded = false
        case .endBlob:
            guard let expected = blobExpected, !blobEnded, blobReceived == expected else { return CommandBehaviour.invalid }
            blobEnded = true
        case .commit:
            guard config != nil, blobExpected == nil || blobEnded else { return CommandBehaviour.invalid }
            commits += 1
        }
        if let s = command.state { state = s }
        return CommandBehaviour.ok
    }
}

/// One control command as the device saw it.
struct CommandRecord: Sendable, Equatable {
    var opcode: UInt8?
    var status: UInt8?
    /// The link's protection when it arrived.
    var link: SecurityLevel = .none
    /// Why the device refused it before executing it (a CRC that does not match), if it did.
    var reason: String? = nil
}

/// One pairing that completed on a device: with whom, how, and — when it bonded — the SHA-256 of the
/// key, by which a later link's key is recognised. The key itself is never kept (not in the state file,
/// not in a dump).
struct PairingRecord: Sendable, Equatable {
    /// The central's address with its type (`C1:02:03:04:05:06 random`).
    var central: String
    var method: SecurityMethod
    var level: SecurityLevel
    var secureConnections: Bool
    var keySize: Int
    /// SHA-256 of the LTK (16 bytes, least significant first) when the device kept a bond.
    var keyDigest: String?
}

/// A change to a device's state: what the state file records, one JSON line each.
enum DeviceEvent: Sendable, Equatable {
    case connectAttempt
    case connected
    /// A control write; `busy` when the busy-ack fault struck (not executed); `link` how well the link
    /// was protected.
    case control([UInt8], busy: Bool, link: SecurityLevel = .none)
    /// Bytes written to the blob characteristic.
    case blob([UInt8])
    /// A fault injected (counted in the dump).
    case fault(String)
    /// A pairing completed (and, with a key digest, the device keeps the bond).
    case paired(PairingRecord)
    /// A pairing failed, for this reason.
    case pairingFailed(String)
    /// A link was encrypted with the bond the device kept for this central.
    case encrypted(central: String)
    /// The device dropped its bond with this central (`bond_lost`).
    case forgotBond(central: String)
    /// A value written to a stored characteristic (`store` behaviour).
    case store(CommandBehaviour.Path, [UInt8])
    /// A change to the MCUmgr device (`mcumgr:` models).
    case smp(SMPDeviceEvent)
}
