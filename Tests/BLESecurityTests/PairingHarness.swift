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

/// The tests' pairing link: the library's loopback, with short views for assertions.
typealias PairingHarness = SMPLoopback

extension SMPLoopback {
    /// Every PDU delivered, with its sender.
    var wire: [WirePDU] { transfers.map { WirePDU(fromCentral: $0.direction == .toPeripheral, bytes: $0.bytes) } }

    /// The PDU codes on the wire, in order, with their senders: "C:01" for a Pairing Request from the central.
    var codes: [String] { wire.map { "\($0.fromCentral ? "C" : "P"):\(String(format2: $0.bytes.first ?? 0))" } }

    /// Changes or drops (nil) what the peripheral sends, before the central sees it.
    mutating func tamperPeripheral(_ change: @escaping @Sendable (SMPPDU) -> [UInt8]?) {
        filter = { direction, pdu in direction == .toCentral ? change(pdu) : pdu.bytes }
    }

    /// The peripheral goes silent: nothing it sends arrives.
    mutating func silencePeripheral() { tamperPeripheral { _ in nil } }
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

    static func central(passkey: Passkey? = nil, allowLegacy: Bool = false, storedBond: Bond? = nil, oob: OOBData? = nil,
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
    init(localAddress: BluetoothAddress, peripheralAddress: BluetoothAddress, passkey: Passkey?, oobData: OOBData?,
         allowLegacy: Bool, minimumKeySize: Int, localIdentity: SMPLocalIdentity?, storedBond: Bond?,
         securityRequestPolicy: SMPSecurityRequestPolicy) {
        self.init(localAddress: localAddress, peerAddress: peripheralAddress, passkey: passkey, oobData: oobData,
                  allowLegacy: allowLegacy, minimumKeySize: minimumKeySize, localIdentity: localIdentity,
                  storedBond: storedBond, securityRequestPolicy: securityRequestPolicy)
    }
}
