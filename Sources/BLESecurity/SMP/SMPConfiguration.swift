import BLE

/// A device's own OOB material (the simulator's peripherals): the key pair its OOB data commits to
/// and its random r. Pairings that use OOB use this key pair instead of a fresh one.
public struct SMPLocalOOB: Sendable {
    public var keyPair: P256KeyPair
    public var random: UInt128

    public init(keyPair: P256KeyPair, random: UInt128) {
        self.keyPair = keyPair
        self.random = random
    }

    /// The data to hand to the central out of band: r and C = f4(PKx, PKx, r, 0).
    public func sharedData() throws(CryptoError) -> OOBData {
        OOBData(random: random, confirm: try SMPCrypto.f4(u: keyPair.publicKey.x, v: keyPair.publicKey.x, x: random, z: 0))
    }
}

/// This side's identity, handed over in key distribution: its IRK and identity address.
public struct SMPLocalIdentity: Sendable, Hashable {
    public var irk: Key128
    /// A public or static random address.
    public var address: BluetoothAddress

    public init(irk: Key128, address: BluetoothAddress) {
        self.irk = irk
        self.address = address
    }
}

/// What a central does when a peripheral sends a Security Request (Vol 3 Part H 2.4.6).
public enum SMPSecurityRequestPolicy: Sendable, Hashable {
    /// Encrypt with a stored bond that meets the request; otherwise pair (as far as this side can).
    case pairOrEncrypt
    /// Encrypt with a stored bond; never pair because the peripheral asked.
    case encryptOnly
    /// Encrypt with a stored bond; without one answer Pairing Failed (Pairing Not Supported): a link
    /// nobody asked to secure, so pairing is not this side's to start.
    case encryptOrReject
    /// Do nothing: the session pairs when it needs to.
    case ignore
    /// Answer Pairing Failed (Pairing Not Supported).
    case reject
}

/// What a central can do and may do when it pairs: its abilities (passkey, display, OOB data), its
/// policy (legacy allowed, bonding, minimum key size, Security Requests), and the link's addresses.
public struct SMPCentralConfiguration: Sendable, Equatable {
    /// This host's address on the link (the initiator address in c1, f5 and f6).
    public var localAddress: BluetoothAddress
    /// The peer's address on the link, as the connection reported it (the responder address).
    public var peerAddress: BluetoothAddress
    /// The device's passkey (from the inventory, a secret): this side enters it (KeyboardOnly).
    public var passkey: Passkey?
    /// With no passkey: this side can show a passkey that a person enters on the device (DisplayOnly).
    public var displaysPasskey: Bool
    /// The device's LE Secure Connections OOB data, if the inventory has it.
    public var oobData: OOBData?
    /// Allow LE legacy pairing (and legacy bonds) for devices without LE Secure Connections.
    public var allowLegacy: Bool
    /// Ask to bond: keys are handed over and a `Bond` is produced.
    public var bondable: Bool
    /// The shortest encryption key accepted, in octets (7...16).
    public var minimumKeySize: Int
    /// This station's IRK and identity address to hand over, if it has one.
    public var localIdentity: SMPLocalIdentity?
    /// Ask the peer for its signing key (CSRK).
    public var requestSigningKey: Bool
    /// The bond this station holds for the peer, if any (looked up by the executor).
    public var storedBond: Bond?
    /// What to do on a Security Request.
    public var securityRequestPolicy: SMPSecurityRequestPolicy

    public init(localAddress: BluetoothAddress, peerAddress: BluetoothAddress, passkey: Passkey? = nil,
                displaysPasskey: Bool = false, oobData: OOBData? = nil, allowLegacy: Bool = false,
                bondable: Bool = true, minimumKeySize: Int = 16, localIdentity: SMPLocalIdentity? = nil,
                requestSigningKey: Bool = false, storedBond: Bond? = nil,
                securityRequestPolicy: SMPSecurityRequestPolicy = .pairOrEncrypt) {
        self.localAddress = localAddress
        self.peerAddress = peerAddress
        self.passkey = passkey
        self.displaysPasskey = displaysPasskey
        self.oobData = oobData
        self.allowLegacy = allowLegacy
        self.bondable = bondable
        self.minimumKeySize = minimumKeySize
        self.localIdentity = localIdentity
        self.requestSigningKey = requestSigningKey
        self.storedBond = storedBond
        self.securityRequestPolicy = securityRequestPolicy
    }

    /// The IO capability this side announces, from what it can do: a known passkey makes it
    /// KeyboardOnly (it enters the device's passkey); a display alone makes it DisplayOnly; otherwise
    /// NoInputNoOutput. It never announces a yes/no input, so Numeric Comparison is never chosen —
    /// nobody at a production line confirms six digits.
    public var ioCapability: SMPIOCapability {
        if passkey != nil { return .keyboardOnly }
        if displaysPasskey { return .displayOnly }
        return .noInputNoOutput
    }

    /// The highest level this side can reach: authenticated with a passkey, a display or OOB data.
    public var achievableLevel: SecurityLevel {
        passkey != nil || displaysPasskey || oobData != nil ? .authenticated : .encrypted
    }
}

/// What a peripheral can do and requires (the simulator's devices, and tests of the central).
public struct SMPPeripheralConfiguration: Sendable {
    /// This device's address on the link (the responder address).
    public var localAddress: BluetoothAddress
    /// The central's address on the link (the initiator address).
    public var peerAddress: BluetoothAddress
    public var ioCapability: SMPIOCapability
    /// The passkey this device shows (its label), or the one a person enters on it. With none, a
    /// displayed passkey is drawn at random.
    public var passkey: Passkey?
    /// This device's OOB material, if the central may get its OOB data.
    public var oob: SMPLocalOOB?
    /// Supports LE Secure Connections (false: a legacy-only device).
    public var secureConnections: Bool
    /// Accept only LE Secure Connections (Secure Connections Only mode).
    public var secureConnectionsOnly: Bool
    /// Require MITM protection: Just Works pairing is refused.
    public var requireMITM: Bool
    /// Agree to bond.
    public var bondable: Bool
    /// Key sizes this device accepts and offers, in octets.
    public var minimumKeySize: Int
    public var maximumKeySize: Int
    /// This device's IRK and identity address to hand over.
    public var localIdentity: SMPLocalIdentity?
    /// Hand over a signing key (CSRK) when the central asks.
    public var distributeSigningKey: Bool
    /// The bond this device holds for the central, for encryption without pairing.
    public var storedBond: Bond?
    /// Answer every Pairing Request with Pairing Failed for this reason (a device that does not pair,
    /// or one that asks to wait: `.pairingNotSupported`, `.repeatedAttempts`); nil pairs normally.
    public var refusePairing: SMPPairingFailedReason?

    public init(localAddress: BluetoothAddress, peerAddress: BluetoothAddress, ioCapability: SMPIOCapability = .noInputNoOutput,
                passkey: Passkey? = nil, oob: SMPLocalOOB? = nil, secureConnections: Bool = true,
                secureConnectionsOnly: Bool = false, requireMITM: Bool = false, bondable: Bool = true,
                minimumKeySize: Int = 7, maximumKeySize: Int = 16, localIdentity: SMPLocalIdentity? = nil,
                distributeSigningKey: Bool = false, storedBond: Bond? = nil, refusePairing: SMPPairingFailedReason? = nil) {
        self.localAddress = localAddress
        self.peerAddress = peerAddress
        self.ioCapability = ioCapability
        self.passkey = passkey
        self.oob = oob
        self.secureConnections = secureConnections
        self.secureConnectionsOnly = secureConnectionsOnly
        self.requireMITM = requireMITM
        self.bondable = bondable
        self.minimumKeySize = minimumKeySize
        self.maximumKeySize = maximumKeySize
        self.localIdentity = localIdentity
        self.distributeSigningKey = distributeSigningKey
        self.storedBond = storedBond
        self.refusePairing = refusePairing
    }
}
