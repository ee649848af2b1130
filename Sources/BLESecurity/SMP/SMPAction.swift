import BLE

/// What a Security Manager state machine asks its executor (the HCI host, or the simulator) to do.
///
/// The executor carries actions out in order: it sends PDUs on L2CAP CID 0x0006, runs one timer, issues
/// HCI commands for encryption, and hands outcomes to whoever waits for the link's security.
public enum SMPAction: Sendable, Hashable {
    /// Send this PDU on the Security Manager channel (`pdu.bytes`).
    case send(SMPPDU)
    /// (Re)start the Security Manager timer; when it fires, deliver `.timerExpired(timer.id)`.
    case startTimer(SMPTimer)
    /// Stop the Security Manager timer.
    case stopTimer
    /// Central: issue HCI LE Enable Encryption with this key, EDIV and Rand, then deliver Encryption
    /// Change (or Encryption Key Refresh Complete on an encrypted link).
    case startEncryption(SMPEncryptionKey)
    /// Peripheral: answer HCI LE Long Term Key Request with this key (Reply), or nil (Negative Reply).
    case replyLongTermKey(Key128?)
    /// Show this passkey to a person (or record it, in the simulator): the other side enters it.
    case displayPasskey(Passkey)
    /// Pairing or encryption finished: the link's security, and a bond to store if one was made.
    case completed(SMPOutcome)
    /// Pairing or encryption failed; the link stays at the security it had.
    case failed(SMPFailure)
}

/// One arming of the Security Manager timer. Ids grow, so an expiry that arrives after a restart or a
/// stop names an old id and is ignored.
public struct SMPTimer: Sendable, Hashable {
    public var id: UInt64
    public var duration: Duration

    /// The Security Manager timeout (Vol 3 Part H 3.4): 30 s without progress ends the procedure.
    public static let timeout: Duration = .seconds(30)
}

/// The key a central starts encryption with (HCI LE Enable Encryption). Printing it shows no key.
public struct SMPEncryptionKey: Sendable, Hashable {
    /// The LTK (or legacy STK), already shortened to the negotiated key size.
    public var ltk: Key128
    /// EDIV and Rand identify a legacy LTK; both are 0 for an LE Secure Connections key and for an STK.
    public var ediv: UInt16
    public var rand: UInt64
    /// The key size in octets.
    public var keySize: Int

    public init(ltk: Key128, ediv: UInt16, rand: UInt64, keySize: Int) {
        self.ltk = ltk
        self.ediv = ediv
        self.rand = rand
        self.keySize = keySize
    }
}

/// The result of a finished pairing or encryption.
public struct SMPOutcome: Sendable, Hashable {
    /// The security the link has now.
    public var security: LinkSecurity
    /// How the keys were made; nil when a stored bond was used.
    public var method: PairingMethod?
    /// A new bond to store (both sides asked to bond and the keys arrived); nil otherwise.
    public var bond: Bond?
    /// True when the link was encrypted with a stored bond instead of pairing.
    public var usedStoredBond: Bool

    public init(security: LinkSecurity, method: PairingMethod?, bond: Bond?, usedStoredBond: Bool) {
        self.security = security
        self.method = method
        self.bond = bond
        self.usedStoredBond = usedStoredBond
    }
}

extension SMPOutcome {
    /// The outcome as the BLE layer reports it: level, method, and whether a bond was made or used.
    public var securityOutcome: SecurityOutcome {
        SecurityOutcome(security: security, method: method?.securityMethod,
                        bond: usedStoredBond ? .used : (bond != nil ? .made : .none))
    }
}

extension SMPCentralConfiguration {
    /// The configuration of a link that `request` will be made on (nil: nobody will ask for security,
    /// so a peer's Security Request is answered only with a stored bond).
    public init(localAddress: BluetoothAddress, peerAddress: BluetoothAddress, request: SecurityRequest?, storedBond: Bond?) {
        self.init(localAddress: localAddress, peerAddress: peerAddress, passkey: request?.passkey, oobData: request?.oob,
                  allowLegacy: request?.allowLegacy ?? false, bondable: request?.bond ?? true, storedBond: storedBond,
                  securityRequestPolicy: (request?.level ?? .none) > .none ? .pairOrEncrypt : .encryptOrReject)
    }
}
