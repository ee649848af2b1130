import BLE

/// An `SMPCentral` and an `SMPPeripheral` joined in process, with a model of the two controllers'
/// encryption: the link the simulator's devices pair over, and the one tests and benchmarks use.
///
/// PDUs go across in order; the central's LE Enable Encryption becomes the peripheral's Long Term Key
/// Request; the peripheral's reply decides the outcome — the same key: both sides learn that encryption
/// is on (Key Refresh Complete when it already was); no key: the central gets *PIN or Key Missing*; a
/// different key: the central gets *Connection Terminated due to MIC Failure* (0x3D). Timers are not
/// run: their actions are recorded, and an expiry is delivered with `run(_:)` like any event.
public struct SMPLoopback: Sendable {
    /// Which way a PDU travels.
    public enum Direction: Sendable, Hashable {
        case toPeripheral
        case toCentral
    }

    /// One PDU on the SMP channel, as delivered (after `filter`).
    public struct Transfer: Sendable, Hashable, CustomStringConvertible {
        public var direction: Direction
        public var bytes: [UInt8]
        /// "C> 0103…" for the central's PDUs, "P> 0203…" for the peripheral's.
        public var description: String { "\(direction == .toPeripheral ? "C>" : "P>") \(bytes.hexString)" }
    }

    public var central: SMPCentral
    public var peripheral: SMPPeripheral
    /// Every PDU delivered, in order.
    public private(set) var transfers: [Transfer] = []
    /// The central's actions other than `.send` (encryption, timers, passkeys, outcomes).
    public private(set) var centralActions: [SMPAction] = []
    /// The peripheral's actions other than `.send`.
    public private(set) var peripheralActions: [SMPAction] = []
    /// Changes a PDU in flight, or drops it (nil): a fault, or an attacker, between the two sides.
    public var filter: (@Sendable (Direction, SMPPDU) -> [UInt8]?)?
    /// Leave LE Enable Encryption unanswered (a controller that is still busy).
    public var holdEncryption = false
    /// The peripheral's host learns that encryption is on (and sends its keys) before the central's does.
    public var peripheralLearnsEncryptionFirst = false
    /// The link is encrypted.
    public private(set) var isEncrypted = false
    private var startedKey: SMPEncryptionKey?

    private enum Delivery {
        case toCentral(SMPCentral.Event)
        case toPeripheral(SMPPeripheral.Event)
    }

    /// HCI status Connection Terminated due to MIC Failure: the two sides encrypted with different keys.
    public static let micFailure: UInt8 = 0x3D

    public init(central: SMPCentral, peripheral: SMPPeripheral) {
        self.central = central
        self.peripheral = peripheral
    }

    /// Feeds `event` to the central, then everything it leads to, until both sides are quiet.
    public mutating func run(_ event: SMPCentral.Event) { pump([.toCentral(event)]) }

    /// Feeds `event` to the peripheral, then everything it leads to.
    public mutating func run(_ event: SMPPeripheral.Event) { pump([.toPeripheral(event)]) }

    /// The central's last outcome or failure, and the peripheral's.
    public var centralOutcome: SMPOutcome? { Self.lastOutcome(centralActions) }
    public var peripheralOutcome: SMPOutcome? { Self.lastOutcome(peripheralActions) }
    public var centralFailure: SMPFailure? { Self.lastFailure(centralActions) }
    public var peripheralFailure: SMPFailure? { Self.lastFailure(peripheralActions) }

    /// How often the sending side changed: the round trips the exchange needs, counted in halves.
    public var turns: Int { Self.turns(transfers) }

    /// How often the sending side changed in `transfers` (the first PDU counts as one).
    public static func turns(_ transfers: [Transfer]) -> Int {
        zip(transfers, transfers.dropFirst()).reduce(transfers.isEmpty ? 0 : 1) { $0 + ($1.0.direction == $1.1.direction ? 0 : 1) }
    }

    private mutating func pump(_ start: [Delivery]) {
        var queue = start
        var index = 0
        while index < queue.count {
            switch queue[index] {
            case .toCentral(let event):
                for action in central.handle(event) { queue += centralDid(action) }
            case .toPeripheral(let event):
                for action in peripheral.handle(event) { queue += peripheralDid(action) }
            }
            index += 1
        }
    }

    private mutating func centralDid(_ action: SMPAction) -> [Delivery] {
        switch action {
        case .send(let pdu):
            guard let bytes = deliver(pdu, .toPeripheral) else { return [] }
            return [.toPeripheral(.received(bytes))]
        case .startEncryption(let key):
            centralActions.append(action)
            startedKey = key
            return holdEncryption ? [] : [.toPeripheral(.longTermKeyRequested(ediv: key.ediv, rand: key.rand))]
        default:
            centralActions.append(action)
            return []
        }
    }

    private mutating func peripheralDid(_ action: SMPAction) -> [Delivery] {
        switch action {
        case .send(let pdu):
            guard let bytes = deliver(pdu, .toCentral) else { return [] }
            return [.toCentral(.received(bytes))]
        case .replyLongTermKey(let key):
            peripheralActions.append(action)
            guard let key else { return [.toCentral(.encryptionFailed(status: SMPCentral.pinOrKeyMissing))] }
            guard let started = startedKey, started.ltk == key else { return [.toCentral(.encryptionFailed(status: Self.micFailure))] }
            let refresh = isEncrypted
            isEncrypted = true
            let toCentral = Delivery.toCentral(refresh ? .keyRefreshComplete : .encryptionChanged(enabled: true, keySize: started.keySize))
            let toPeripheral = Delivery.toPeripheral(refresh ? .keyRefreshComplete : .encryptionChanged(enabled: true, keySize: started.keySize))
            return peripheralLearnsEncryptionFirst ? [toPeripheral, toCentral] : [toCentral, toPeripheral]
        default:
            peripheralActions.append(action)
            return []
        }
    }

    private mutating func deliver(_ pdu: SMPPDU, _ direction: Direction) -> [UInt8]? {
        var bytes = pdu.bytes
        if let filter {
            guard let changed = filter(direction, pdu) else { return nil }
            bytes = changed
        }
        transfers.append(Transfer(direction: direction, bytes: bytes))
        return bytes
    }

    private static func lastOutcome(_ actions: [SMPAction]) -> SMPOutcome? {
        for case .completed(let outcome) in actions.reversed() { return outcome }
        return nil
    }

    private static func lastFailure(_ actions: [SMPAction]) -> SMPFailure? {
        for case .failed(let failure) in actions.reversed() { return failure }
        return nil
    }
}
