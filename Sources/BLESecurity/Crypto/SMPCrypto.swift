import BLE

/// The Security Manager's cryptographic toolbox (Bluetooth Core v5.4, Vol 3, Part H, 2.2).
///
/// Every function is written over the specification's numbers: 128-bit values are `UInt128`, 256-bit
/// values (P-256 coordinates, DHKey) are 32 bytes most-significant octet first, and concatenation
/// `a ‖ b` puts `a` in the most significant octets — exactly as the specification and its sample data
/// (Appendix D) print them. The PDU codecs are the one place where values turn little-endian.
/// The primitives are libcrypto's AES-128 and AES-CMAC (`LibCrypto`); nothing here is a cipher.
public enum SMPCrypto {
    /// e: AES-128 of one block (2.2.1).
    public static func e(_ key: UInt128, _ plaintext: UInt128) throws(CryptoError) -> UInt128 {
        try number(LibCrypto.aes128Encrypt(key: key.bigEndianBytes, block: plaintext.bigEndianBytes))
    }

    /// AES-CMAC_k(m) (2.2.5), with `m` most significant octet first.
    public static func aesCMAC(_ key: UInt128, _ message: [UInt8]) throws(CryptoError) -> UInt128 {
        try number(LibCrypto.aesCMAC(key: key.bigEndianBytes, message: message))
    }

    /// ah(k, r): the random address hash (2.2.2). `r` and the result are 24-bit values.
    ///
    /// r' = padding(104 bits) ‖ r; ah = e(k, r') mod 2^24.
    public static func ah(k: UInt128, r: UInt32) throws(CryptoError) -> UInt32 {
        let value = try e(k, UInt128(r & 0xFF_FFFF))
        return UInt32(truncatingIfNeeded: value) & 0xFF_FFFF
    }

    /// c1: the LE legacy confirm value (2.2.3).
    ///
    /// p1 = pres ‖ preq ‖ rat' ‖ iat'; p2 = padding(32 bits) ‖ ia ‖ ra; c1 = e(k, e(k, r ⊕ p1) ⊕ p2).
    /// `preq`/`pres` are the 56-bit Pairing Request/Response commands (`SMPPairingParameters.c1Value`);
    /// `iat`/`rat` are the address types (0 public, 1 random); `ia`/`ra` the 48-bit addresses.
    public static func c1(k: UInt128, r: UInt128, preq: UInt64, pres: UInt64,
                          iat: UInt8, ia: UInt64, rat: UInt8, ra: UInt64) throws(CryptoError) -> UInt128 {
        let p1 = UInt128(pres & 0xFF_FFFF_FFFF_FFFF) << 72 | UInt128(preq & 0xFF_FFFF_FFFF_FFFF) << 16
            | UInt128(rat & 1) << 8 | UInt128(iat & 1)
        let p2 = UInt128(ia & 0xFFFF_FFFF_FFFF) << 48 | UInt128(ra & 0xFFFF_FFFF_FFFF)
        return try e(k, try e(k, r ^ p1) ^ p2)
    }

    /// c1 with the addresses and commands as this host holds them.
    public static func c1(k: UInt128, r: UInt128, request: SMPPairingParameters, response: SMPPairingParameters,
                          initiator: BluetoothAddress, responder: BluetoothAddress) throws(CryptoError) -> UInt128 {
        try c1(k: k, r: r, preq: request.c1Value(code: .pairingRequest), pres: response.c1Value(code: .pairingResponse),
               iat: initiator.kind.rawValue, ia: initiator.value, rat: responder.kind.rawValue, ra: responder.value)
    }

    /// s1: the LE legacy STK (2.2.4). r' = r1' ‖ r2', the least significant 64 bits of each; s1 = e(k, r').
    public static func s1(k: UInt128, r1: UInt128, r2: UInt128) throws(CryptoError) -> UInt128 {
        let low: UInt128 = 0xFFFF_FFFF_FFFF_FFFF
        return try e(k, (r1 & low) << 64 | (r2 & low))
    }

    /// f4(U, V, X, Z) = AES-CMAC_X(U ‖ V ‖ Z): the LE Secure Connections confirm value (2.2.6).
    /// U and V are 32-byte X coordinates; Z is 8 bits.
    public static func f4(u: [UInt8], v: [UInt8], x: UInt128, z: UInt8) throws(CryptoError) -> UInt128 {
        try require(u, 32, "f4 U")
        try require(v, 32, "f4 V")
        return try aesCMAC(x, u + v + [z])
    }

    /// f5(W, N1, N2, A1, A2): MacKey and LTK of LE Secure Connections (2.2.7).
    ///
    /// T = AES-CMAC_SALT(W); each key is AES-CMAC_T(Counter ‖ keyID ‖ N1 ‖ N2 ‖ A1 ‖ A2 ‖ Length), with
    /// Counter 0 for MacKey and 1 for the LTK, keyID "btle", Length 256. A1/A2 are 56-bit: the address
    /// type in the most significant octet, then the 48-bit address.
    public static func f5(w: DHKey, n1: UInt128, n2: UInt128, a1: UInt64, a2: UInt64) throws(CryptoError) -> (macKey: UInt128, ltk: UInt128) {
        let salt: UInt128 = 0x6C88_8391_AAF5_A538_6037_0BDB_5A60_83BE
        let t = try aesCMAC(salt, w.bytes)
        func message(_ counter: UInt8) -> [UInt8] {
            [counter] + [0x62, 0x74, 0x6C, 0x65] + n1.bigEndianBytes + n2.bigEndianBytes
                + bytes56(a1) + bytes56(a2) + [0x01, 0x00]
        }
        return (try aesCMAC(t, message(0)), try aesCMAC(t, message(1)))
    }

    /// f6(W, N1, N2, R, IOcap, A1, A2) = AES-CMAC_W(N1 ‖ N2 ‖ R ‖ IOcap ‖ A1 ‖ A2): the DHKey check (2.2.8).
    /// IOcap is 24 bits (AuthReq ‖ OOB data flag ‖ IO capability); A1/A2 as in `f5`.
    public static func f6(w: UInt128, n1: UInt128, n2: UInt128, r: UInt128, ioCap: UInt32, a1: UInt64, a2: UInt64) throws(CryptoError) -> UInt128 {
        let io = [UInt8(truncatingIfNeeded: ioCap >> 16), UInt8(truncatingIfNeeded: ioCap >> 8), UInt8(truncatingIfNeeded: ioCap)]
        return try aesCMAC(w, n1.bigEndianBytes + n2.bigEndianBytes + r.bigEndianBytes + io + bytes56(a1) + bytes56(a2))
    }

    /// g2(U, V, X, Y) = AES-CMAC_X(U ‖ V ‖ Y) mod 2^32: the numeric comparison value (2.2.9).
    /// The six digits shown to a user are this value mod 10^6.
    public static func g2(u: [UInt8], v: [UInt8], x: UInt128, y: UInt128) throws(CryptoError) -> UInt32 {
        try require(u, 32, "g2 U")
        try require(v, 32, "g2 V")
        return UInt32(truncatingIfNeeded: try aesCMAC(x, u + v + y.bigEndianBytes))
    }

    /// h6(W, keyID) = AES-CMAC_W(keyID): link key conversion (2.2.10).
    public static func h6(w: UInt128, keyID: UInt32) throws(CryptoError) -> UInt128 {
        try aesCMAC(w, [UInt8(truncatingIfNeeded: keyID >> 24), UInt8(truncatingIfNeeded: keyID >> 16),
                        UInt8(truncatingIfNeeded: keyID >> 8), UInt8(truncatingIfNeeded: keyID)])
    }

    /// h7(SALT, W) = AES-CMAC_SALT(W): link key conversion with a salt (2.2.11).
    public static func h7(salt: UInt128, w: UInt128) throws(CryptoError) -> UInt128 {
        try aesCMAC(salt, w.bigEndianBytes)
    }

    /// A1/A2 of f5 and f6 for an address: its type (0 public, 1 random) above its 48 bits.
    public static func addressValue(_ address: BluetoothAddress) -> UInt64 {
        UInt64(address.kind.rawValue) << 48 | address.value
    }

    private static func bytes56(_ value: UInt64) -> [UInt8] {
        (0..<7).map { UInt8(truncatingIfNeeded: value >> (8 * (6 - UInt64($0)))) }
    }

    private static func number(_ bytes: [UInt8]) throws(CryptoError) -> UInt128 {
        guard bytes.count == 16, let value = UInt128(bigEndianBytes: bytes) else {
            throw CryptoError(.library, operation: "SMP toolbox", detail: "expected a 16-byte block, got \(bytes.count) bytes")
        }
        return value
    }

    private static func require(_ bytes: [UInt8], _ count: Int, _ name: String) throws(CryptoError) {
        guard bytes.count == count else {
            throw CryptoError(.invalidInput, operation: "SMP toolbox", detail: "\(name) must be \(count) bytes, not \(bytes.count)")
        }
    }
}

extension SMPCrypto {
    /// The Database Hash (Vol 3 Part G 7.3.1): AES-CMAC with a key of 0 over the attribute bytes, as a
    /// characteristic value (least significant octet first). For `GATTDatabase(services:hash:)`.
    public static let databaseHash: GATTDatabase.HashFunction = { input in
        // AES-CMAC with a valid key cannot fail short of libcrypto itself failing; then the stand-in.
        (try? aesCMAC(0, input))?.littleEndianBytes ?? GATTDatabase.standInHash(input)
    }
}
