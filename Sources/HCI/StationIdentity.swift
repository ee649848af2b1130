import Digests
import BLE
import BLESecurity

/// The station's identity on one controller: the static random address it connects from, under which
/// devices keep their bonds with it, and where that address came from. The same controller must be the
/// same station on every run, or every bond lasts one run.
public struct StationIdentity: Sendable, Hashable, CustomStringConvertible {
    /// Where the address came from, in the order they are preferred.
    public enum Source: String, Sendable, Hashable, CaseIterable {
        /// `address=` in the adapter spec.
        case configured
        /// The controller's own static address (Zephyr's Read Static Addresses), as BlueZ uses it.
        case controller
        /// Derived from the controller's public BD_ADDR (the same on every run).
        case publicAddress = "public_address"
        /// Generated once for this adapter and kept with the bonds (`--bonds`).
        case stored
        /// Generated for this adapter now, and kept with the bonds from now on.
        case generated
        /// Generated for this run only: the controller has no address and there is no `--bonds` file to
        /// keep one in, so devices will not recognise the station next time.
        case ephemeral
    }

    /// A static random address (Vol 6 Part B 1.3.2.1).
    public var address: BluetoothAddress
    public var source: Source
    /// The controller's identity root (IR), when it gave one with the address (Zephyr): the station's
    /// IRK derives from it (Vol 3 Part H 2.4.2.1), so it too is the same on every run.
    public var identityRoot: Key128?

    public init(address: BluetoothAddress, source: Source, identityRoot: Key128? = nil) {
        self.address = BluetoothAddress(wireBytes: address.bytes, kind: .random) ?? address
        self.source = source
        self.identityRoot = identityRoot
    }

    public var description: String { "\(address) (\(source.rawValue))" }

    /// Whether the identity is the same on the next run (everything but `ephemeral`).
    public var persists: Bool { source != .ephemeral }

    /// The station's IRK: d1(IR, 1, 0) (Vol 3 Part H 2.4.2.1; d1 in Vol 3 Part H B.2.1), when there is an
    /// identity root; nil otherwise.
    public var irk: Key128? {
        guard let ir = identityRoot else { return nil }
        // d1(k, d, r) = e(k, d') with d' = padding || r || d: r = 0 and d = 1 in the low 32 bits.
        return (try? SMPCrypto.e(ir.value, 1)).map { Key128($0) }
    }

    /// What the controller offered and the host knows, in the order the choice is made.
    public struct Candidates: Sendable, Equatable {
        /// `address=` of the adapter spec.
        public var configured: BluetoothAddress?
        /// The first valid static address Zephyr's Read Static Addresses gave, with its IR.
        public var controllerStatic: ZephyrStaticAddressesReturn.Entry?
        /// Read BD_ADDR (all zeros when the controller has none).
        public var publicAddress: BluetoothAddress?
        /// The identity kept with the bonds for this adapter, if any.
        public var stored: BluetoothAddress?
        /// Whether there is a bonds file to keep a generated identity in.
        public var canStore: Bool
        /// A fresh static random address, used when nothing else is there.
        public var fresh: BluetoothAddress

        public init(configured: BluetoothAddress? = nil, controllerStatic: ZephyrStaticAddressesReturn.Entry? = nil,
                    publicAddress: BluetoothAddress? = nil, stored: BluetoothAddress? = nil, canStore: Bool = false,
                    fresh: BluetoothAddress) {
            self.configured = configured
            self.controllerStatic = controllerStatic
            self.publicAddress = publicAddress
            self.stored = stored
            self.canStore = canStore
            self.fresh = fresh
        }
    }

    /// The identity to use: `address=`; else the controller's own static address; else one derived from
    /// its public BD_ADDR; else the one kept with the bonds; else a new one — kept with the bonds when
    /// there are any (`generated`), for this run only otherwise (`ephemeral`).
    public static func choose(_ c: Candidates) -> StationIdentity {
        if let a = c.configured { return StationIdentity(address: a, source: .configured) }
        if let s = c.controllerStatic {
            // An IR of all zeros is no IR (Zephyr fills it with zeros when the chip has none).
            let ir = s.identityRoot.count == 16 && s.identityRoot.contains { $0 != 0 }
                ? Key128(littleEndian: s.identityRoot) : nil
            return StationIdentity(address: s.address, source: .controller, identityRoot: ir)
        }
        if let p = c.publicAddress, let derived = derived(from: p) { return StationIdentity(address: derived, source: .publicAddress) }
        if let s = c.stored, s.isValidStaticAddress { return StationIdentity(address: s, source: .stored) }
        return StationIdentity(address: c.fresh, source: c.canStore ? .generated : .ephemeral)
    }

    /// A static random address derived from a public BD_ADDR: the same controller is the same station
    /// on every run. Nil for no address (all zeros).
    public static func derived(from bdAddress: BluetoothAddress) -> BluetoothAddress? {
        guard bdAddress.value != 0 else { return nil }
        let digest = SHA256.hash(Array("provision station".utf8) + bdAddress.bytes)
        var bits = digest.prefix(6).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } & 0x3FFF_FFFF_FFFF
        // Neither all zeros nor all ones in the random part.
        if bits == 0 || bits == 0x3FFF_FFFF_FFFF { bits ^= 1 }
        return BluetoothAddress(value: bits | 0xC000_0000_0000, kind: .random)
    }

    /// A new static random address from `random` (48 random bits): the two top bits set, the rest
    /// neither all zeros nor all ones.
    public static func staticAddress(random: UInt64) -> BluetoothAddress {
        var bits = random & 0x3FFF_FFFF_FFFF
        if bits == 0 || bits == 0x3FFF_FFFF_FFFF { bits ^= 1 }
        return BluetoothAddress(value: bits | 0xC000_0000_0000, kind: .random)
    }

    /// The warning a run prints when the identity is new (`generated`) or lasts one run (`ephemeral`),
    /// naming the adapter; nil otherwise.
    public func warning(adapter: String) -> String? {
        switch source {
        case .generated:
            return "adapter \(adapter) has no address of its own (BD_ADDR 00:00:00:00:00:00, no static address): "
                + "this station is \(address) on it from now on, kept with the bonds; give `address=` in the spec to choose one"
        case .ephemeral:
            return "adapter \(adapter) has no address of its own (BD_ADDR 00:00:00:00:00:00, no static address) and there is no "
                + "--bonds file to keep one in: this run connects as \(address), which devices will not know next time; "
                + "give --bonds, or `address=` in the spec"
        default:
            return nil
        }
    }
}
