import BLE

// Zephyr's vendor-specific HCI commands (OGF 0x3F), which its controllers (`hci_uart`, `hci_usb`,
// `native_sim`) answer. A Zephyr controller says so in Read Local Version Information: manufacturer
// 0x05F1 (the Linux Foundation). Its BD_ADDR is 00:00:00:00:00:00; its identity is the static random
// address the chip was given at the factory (on nRF52: FICR DEVICEADDR), read with Read Static
// Addresses, together with the identity root it derives its keys from. Read Supported Commands says
// which vendor commands the build has: bit 8 (octet 1, bit 0) is Read Static Addresses.

/// The Bluetooth SIG company identifier Zephyr controllers report (the Linux Foundation).
public let zephyrManufacturer: UInt16 = 0x05F1

/// Zephyr VS Read Supported Commands (OGF 0x3F, OCF 0x0002). No parameters.
public struct ZephyrReadSupportedCommandsCommand: HCIEmptyCommand {
    public static let opcode = HCIOpcode.zephyrReadSupportedCommands
    public init() {}
}

/// Zephyr VS Read Static Addresses (OGF 0x3F, OCF 0x0009). No parameters.
public struct ZephyrReadStaticAddressesCommand: HCIEmptyCommand {
    public static let opcode = HCIOpcode.zephyrReadStaticAddresses
    public init() {}
}

/// Return parameters of Zephyr VS Read Supported Commands: Status, then 64 octets of bits, one per
/// vendor command (bit n: OCF n + 1) — the layout of Read Local Supported Commands.
public typealias ZephyrSupportedCommandsReturn = SupportedCommandsReturn

extension SupportedCommandsReturn {
    /// Read as Zephyr's vendor Read Supported Commands: whether Read Static Addresses is there (bit 8).
    public var readStaticAddresses: Bool { commands.contains(octet: 1, bit: 0) }
}

/// Return parameters of Zephyr VS Read Static Addresses: the controller's static random addresses,
/// each with the identity root (IR) its keys derive from.
///
/// | Parameter | Size |
/// |---|---|
/// | Status | 1 |
/// | Num_Addresses | 1 |
/// | BD_ADDR[i] | 6 |
/// | IR[i] | 16 |
public struct ZephyrStaticAddressesReturn: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        public var address: BluetoothAddress
        /// The identity root, as on the wire (least significant octet first); all zeros when the chip
        /// has none.
        public var identityRoot: [UInt8]

        public init(address: BluetoothAddress, identityRoot: [UInt8]) {
            self.address = address
            self.identityRoot = identityRoot
        }
    }

    public var status: HCIStatus
    public var entries: [Entry]

    public init(status: HCIStatus = .success, entries: [Entry]) {
        self.status = status
        self.entries = entries
    }

    public init(from r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(rawValue: try r.readUInt8("Status"))
        let count = try r.readUInt8("Num_Addresses")
        var entries: [Entry] = []
        for _ in 0..<count {
            let address = try r.readAddress("BD_ADDR", type: 1)
            let ir = try r.readBytes(16, "IR")
            entries.append(Entry(address: address, identityRoot: ir))
        }
        self.entries = entries
    }

    public func encode(into w: inout ByteWriter) {
        w.write(status.rawValue)
        w.write(UInt8(truncatingIfNeeded: entries.count))
        for e in entries {
            w.write(e.address.bytes)
            w.write(e.identityRoot + [UInt8](repeating: 0, count: max(0, 16 - e.identityRoot.count)))
        }
    }

    /// The first entry that is a valid static random address (Vol 6 Part B 1.3.2.1).
    public var firstStatic: Entry? { entries.first { $0.address.isValidStaticAddress } }
}

extension BluetoothAddress {
    /// A static random address: the two top bits set, the other 46 neither all zeros nor all ones
    /// (Core v5.4 Vol 6 Part B 1.3.2.1).
    public var isValidStaticAddress: Bool {
        let random = value & 0x3FFF_FFFF_FFFF
        return value >> 46 == 0b11 && random != 0 && random != 0x3FFF_FFFF_FFFF
    }
}
