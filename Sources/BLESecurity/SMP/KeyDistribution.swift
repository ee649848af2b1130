import BLE

/// Collects the keys a peer hands over after encryption, in the order the specification sends them
/// (Vol 3 Part H 3.6.1): Encryption Information and Central Identification (legacy EncKey), Identity
/// Information and Identity Address Information (IdKey), Signing Information (SignKey).
struct KeyReceiver: Sendable {
    private(set) var expected: [SMPCode]
    private(set) var ltk: Key128?
    private(set) var ediv: UInt16 = 0
    private(set) var rand: UInt64 = 0
    private(set) var irk: Key128?
    private(set) var identityAddress: BluetoothAddress?
    private(set) var csrk: Key128?

    init(keys: SMPKeyDistribution) {
        var codes: [SMPCode] = []
        if keys.contains(.encryptionKey) { codes += [.encryptionInformation, .centralIdentification] }
        if keys.contains(.identityKey) { codes += [.identityInformation, .identityAddressInformation] }
        if keys.contains(.signingKey) { codes.append(.signingInformation) }
        expected = codes
    }

    var isComplete: Bool { expected.isEmpty }

    /// Takes `pdu` if it is the next key expected; false (and nothing taken) otherwise.
    mutating func accept(_ pdu: SMPPDU) -> Bool {
        guard let next = expected.first, pdu.code == next else { return false }
        switch pdu {
        case .encryptionInformation(let p): ltk = p.ltk
        case .centralIdentification(let p): ediv = p.ediv; rand = p.rand
        case .identityInformation(let p): irk = p.irk
        case .identityAddressInformation(let p): identityAddress = p.address
        case .signingInformation(let p): csrk = p.csrk
        default: return false
        }
        expected.removeFirst()
        return true
    }
}

/// The keys this side hands over, as PDUs in the specification's order.
struct KeyMaterial: Sendable {
    var ltk: Key128?
    var ediv: UInt16 = 0
    var rand: UInt64 = 0
    var identity: SMPLocalIdentity?
    var csrk: Key128?

    /// The PDUs that distribute `keys`; a key this side does not have is left out.
    func pdus(for keys: SMPKeyDistribution) -> [SMPPDU] {
        var out: [SMPPDU] = []
        if keys.contains(.encryptionKey), let ltk {
            out.append(.encryptionInformation(SMPEncryptionInformation(ltk: ltk)))
            out.append(.centralIdentification(SMPCentralIdentification(ediv: ediv, rand: rand)))
        }
        if keys.contains(.identityKey), let identity {
            out.append(.identityInformation(SMPIdentityInformation(irk: identity.irk)))
            out.append(.identityAddressInformation(SMPIdentityAddressInformation(address: identity.address)))
        }
        if keys.contains(.signingKey), let csrk {
            out.append(.signingInformation(SMPSigningInformation(csrk: csrk)))
        }
        return out
    }
}
