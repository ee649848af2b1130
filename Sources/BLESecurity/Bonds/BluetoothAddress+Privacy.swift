import BLE

// Random device address sub-types and resolvable private addresses (Vol 6 Part B 1.3.2).

extension BluetoothAddress {
    /// A resolvable private address: random, with 0b01 in the two most significant bits.
    public var isResolvablePrivate: Bool { kind == .random && bytes.count == 6 && bytes[5] >> 6 == 0b01 }

    /// A static random address: random, with 0b11 in the two most significant bits (an identity address).
    public var isStaticRandom: Bool { kind == .random && bytes.count == 6 && bytes[5] >> 6 == 0b11 }

    /// True for an address that names a device for good: public, or static random.
    public var isIdentity: Bool { kind == .public || isStaticRandom }

    /// True when this resolvable private address was made with `irk`: its low 24 bits (hash) equal
    /// ah(IRK, prand), prand being its high 24 bits (Vol 6 Part B 1.3.2.3).
    public func isResolved(by irk: Key128) throws(CryptoError) -> Bool {
        guard isResolvablePrivate else { return false }
        let hash = UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16
        let prand = UInt32(bytes[3]) | UInt32(bytes[4]) << 8 | UInt32(bytes[5]) << 16
        return try SMPCrypto.ah(k: irk.value, r: prand) == hash
    }

    /// The resolvable private address that `irk` makes from `prand` (its top two bits are forced to 0b01).
    public static func resolvablePrivate(irk: Key128, prand: UInt32) throws(CryptoError) -> BluetoothAddress {
        let r = prand & 0x3F_FFFF | 0x40_0000
        let hash = try SMPCrypto.ah(k: irk.value, r: r)
        return BluetoothAddress(value: UInt64(r) << 24 | UInt64(hash), kind: .random)
    }
}
