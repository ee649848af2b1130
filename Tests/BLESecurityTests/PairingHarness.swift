import BLE
@testable import BLESecurity
import Testing

/// Randomness for tests: counting bytes from a seed, and key pairs from a list (the spec's debug keys).
struct FixedRandom: SMPRandomSource {
    private var last: UInt8
    private var pairs: [P256KeyPair]

    init(seed: UInt8, keyPairs: [P256KeyPair]) {
        last = seed
        pairs = keyPairs
    }

    mutating func bytes(_ count: Int) throws(CryptoError) -> [UInt8] {
        (0..<count).map { _ in
            last &+= 1
            return last
        }
    }

    mutating func keyPair() throws(CryptoError) -> P256KeyPair {
        guard !pairs.isEmpty else { throw CryptoError(.invalidInput, operation: "FixedRandom", detail: "no key pair left") }
        return pairs.removeFirst()
    }
}

/// One PDU on the SMP channel, and who sent it.
struct WirePDU: Equatable, CustomStringConvertible {
    var fromCentral: Bool
    var bytes: [UInt8]
    var description: String { "\(fromCentral ? "C>" : "P>") \(bytes.hexString)" }
    var pdu: SMPPDU? { try? SMPPDU(decoding: bytes) }
}

/// A central and a peripheral state machine joined by a perfect link and a model controller: PDUs
/// go across, LE Enable Encryption asks the peripheral for its key, and both sides learn the result.
/// Every PDU is recorded, and every other action of each side.
struct PairingHarness {
    var central: SMPCentral
    var peripheral: SMPPeripheral
    private(set) var wire: [WirePDU] = []
    private(set) var centralActions: [SMPAction] = []
    private(set) var peripheralActions: [SMPAction] = []
    /// Changes or drops (nil) what the peripheral sends, before the central sees it.
    var tamperPeripheral: ((SMPPDU) -> [UInt8]?)?
    /// Drops what the peripheral sends while true (a peer gone silent).
    var peripheralSilent = false
    /// LE Enable Encryption is left unanswered (the controller is still busy).
    var holdEncryption = false
    /// The peripheral's host learns of encryption (and sends its keys) before the central's does.
    var peripheralLearnsEncryptionFirst = false
    private(set) var encrypted = false
    private var startedKey: SMPEncryptionKey?

    private enum Delivery {
        case toCentral(SMPCentral.Event)
        case toPeripheral(SMPPeripheral.Event)
    }

    init(central: SMPCentral, peripheral: SMPPeripheral) {
        self.central = central
        self.peripheral = peripheral
    }

    var centralOutcome: SMPOutcome? { Self.outcome(in: centralActions) }
    var peripheralOutcome: SMPOutcome? { Self.outcome(in: peripheralActions) }
    var centralFailure: SMPFailure? { Self.failure(in: centralActions) }
    var peripheralFailure: SMPFailure? { Self.failure(in: peripheralActions) }

    /// Runs `event` on the central, then everything it leads to, until both sides are quiet.
    mutating func run(_ event: SMPCentral.Event) { pump([.toCentral(event)]) }

    /// Runs `event` on the peripheral, then everything it leads to.
    mutating func run(_ event: SMPPeripheral.Event) { pump([.toPeripheral(event)]) }

    private mutating func pump(_ start: [Delivery]) {
        var queue = start
        while !queue.isEmpty {
            let next = queue.removeFirst()
            switch next {
            case .toCentral(let event):
                for action in central.handle(event) { queue += centralDid(action) }
            case .toPeripheral(let event):
                for action in peripheral.handle(event) { queue += peripheralDid(action) }
            }
        }
    }

    private mutating func centralDid(_ action: SMPAction) -> [Delivery] {
        switch action {
        case .send(let pdu):
            wire.append(WirePDU(fromCentral: true, bytes: pdu.bytes))
            return [.toPeripheral(.received(pdu.bytes))]
        case .startEncryption(let key):
            centralActions.append(action)
            startedKey = key
            if holdEncryption { return [] }
            return [.toPeripheral(.longTermKeyRequested(ediv: key.ediv, rand: key.rand))]
        default:
            centralActions.append(action)
            return []
        }
    }

    private mutating func peripheralDid(_ action: SMPAction) -> [Delivery] {
        switch action {
        case .send(let pdu):
            if peripheralSilent { return [] }
            var bytes = pdu.bytes
            if let tamperPeripheral {
                guard let changed = tamperPeripheral(pdu) else { return [] }
                bytes = changed
            }
            wire.append(WirePDU(fromCentral: false, bytes: bytes))
            return [.toCentral(.received(bytes))]
        case .replyLongTermKey(let key):
            peripheralActions.append(action)
            guard let key else { return [.toCentral(.encryptionFailed(status: SMPCentral.pinOrKeyMissing))] }
            guard let started = startedKey, started.ltk == key else {
                return [.toCentral(.encryptionFailed(status: 0x3D))] // the link dies of a MIC failure
            }
            let refresh = encrypted
            encrypted = true
            let toCentral: Delivery = .toCentral(refresh ? .keyRefreshComplete : .encryptionChanged(enabled: true, keySize: started.keySize))
            let toPeripheral: Delivery = .toPeripheral(refresh ? .keyRefreshComplete : .encryptionChanged(enabled: true, keySize: started.keySize))
            return peripheralLearnsEncryptionFirst ? [toPeripheral, toCentral] : [toCentral, toPeripheral]
        default:
            peripheralActions.append(action)
            return []
        }
    }

    static func outcome(in actions: [SMPAction]) -> SMPOutcome? {
        for case .completed(let outcome) in actions.reversed() { return outcome }
        return nil
    }

    static func failure(in actions: [SMPAction]) -> SMPFailure? {
        for case .failed(let failure) in actions.reversed() { return failure }
        return nil
    }

    /// The PDU codes on the wire, in order, with their senders: "C:01" for a Pairing Request from the central.
    var codes: [String] { wire.map { "\($0.fromCentral ? "C" : "P"):\(String(format2: $0.bytes.first ?? 0))" } }
}

extension String {
    init(format2 byte: UInt8) {
        let text = String(byte, radix: 16)
        self = text.count == 1 ? "0" + text : text
    }
}

/// Addresses and configurations the tests share.
enum Fixture {
    static let centralAddress = BluetoothAddress("C0:11:22:33:44:55", kind: .random) ?? BluetoothAddress(value: 1)
    static let peripheralAddress = BluetoothAddress("00:1B:DC:07:31:AE", kind: .public) ?? BluetoothAddress(value: 2)
    static let peripheralIdentity = SMPLocalIdentity(irk: Key128(0x0102_0304_0506_0708_090A_0B0C_0D0E_0F10), address: peripheralAddress)
    static let centralIdentity = SMPLocalIdentity(irk: Key128(0xA0A1_A2A3_A4A5_A6A7_A8A9_AAAB_ACAD_AEAF),
                                                  address: BluetoothAddress("C0:11:22:33:44:55", kind: .random) ?? BluetoothAddress(value: 1))

    static func central(passkey: Passkey? = nil, allowLegacy: Bool = false, storedBond: Bond? = nil, oob: SMPOOBData? = nil,
                        policy: SMPSecurityRequestPolicy = .pairOrEncrypt, minimumKeySize: Int = 16,
                        random: any SMPRandomSource) -> SMPCentral {
        SMPCentral(configuration: SMPCentralConfiguration(localAddress: centralAddress, peripheralAddress: peripheralAddress,
                                                          passkey: passkey, oobData: oob, allowLegacy: allowLegacy,
                                                          minimumKeySize: minimumKeySize, localIdentity: centralIdentity,
                                                          storedBond: storedBond, securityRequestPolicy: policy),
                   random: random)
    }

    static func peripheral(io: SMPIOCapability = .noInputNoOutput, passkey: Passkey? = nil, secureConnections: Bool = true,
                           requireMITM: Bool = false, maximumKeySize: Int = 16, oob: SMPLocalOOB? = nil, storedBond: Bond? = nil,
                           random: any SMPRandomSource) -> SMPPeripheral {
        SMPPeripheral(configuration: SMPPeripheralConfiguration(localAddress: peripheralAddress, peerAddress: centralAddress,
                                                                ioCapability: io, passkey: passkey, oob: oob,
                                                                secureConnections: secureConnections, requireMITM: requireMITM,
                                                                maximumKeySize: maximumKeySize, localIdentity: peripheralIdentity,
                                                                storedBond: storedBond),
                      random: random)
    }
}

extension SMPCentralConfiguration {
    init(localAddress: BluetoothAddress, peripheralAddress: BluetoothAddress, passkey: Passkey?, oobData: SMPOOBData?,
         allowLegacy: Bool, minimumKeySize: Int, localIdentity: SMPLocalIdentity?, storedBond: Bond?,
         securityRequestPolicy: SMPSecurityRequestPolicy) {
        self.init(localAddress: localAddress, peerAddress: peripheralAddress, passkey: passkey, oobData: oobData,
                  allowLegacy: allowLegacy, minimumKeySize: minimumKeySize, localIdentity: localIdentity,
                  storedBond: storedBond, securityRequestPolicy: securityRequestPolicy)
    }
}
