import BLE

/// What a Pairing Request and a Pairing Response agree on (Vol 3 Part H 2.3): the pairing kind, the
/// method, the key size, bonding, and which keys each side hands over.
struct PairingFeatures: Sendable {
    let request: SMPPairingParameters
    let response: SMPPairingParameters
    /// Both sides set the SC bit: LE Secure Connections; otherwise LE legacy pairing.
    let secureConnections: Bool
    let method: PairingMethod
    /// The smaller of the two maximum key sizes (octets).
    let keySize: Int
    /// Both sides asked to bond: keys are distributed and kept.
    let bonding: Bool
    /// Keys the initiator (central) hands over after encryption.
    let initiatorKeys: SMPKeyDistribution
    /// Keys the responder (peripheral) hands over after encryption.
    let responderKeys: SMPKeyDistribution

    init(request: SMPPairingParameters, response: SMPPairingParameters) {
        self.request = request
        self.response = response
        secureConnections = request.authRequirements.contains(.secureConnections) && response.authRequirements.contains(.secureConnections)
        method = PairingMethod.select(request: request, response: response, secureConnections: secureConnections)
        keySize = Int(min(request.maxEncryptionKeySize, response.maxEncryptionKeySize))
        bonding = request.authRequirements.isBonding && response.authRequirements.isBonding
        // LE Secure Connections makes the LTK in pairing, so EncKey is ignored (3.6.1); this host never
        // derives BR/EDR keys, so LinkKey is dropped. Without bonding no keys are handed over.
        var allowed: SMPKeyDistribution = [.identityKey, .signingKey]
        if !secureConnections { allowed.insert(.encryptionKey) }
        initiatorKeys = bonding ? request.initiatorKeys.intersection(response.initiatorKeys).intersection(allowed) : []
        responderKeys = bonding ? request.responderKeys.intersection(response.responderKeys).intersection(allowed) : []
    }

    /// Why a feature exchange PDU is unacceptable, or nil: reserved IO capability or OOB flag, key size outside 7...16.
    static func invalidField(in p: SMPPairingParameters) -> String? {
        if !p.ioCapability.isDefined { return "IO capability \(p.ioCapability)" }
        if p.oobDataFlag > 1 { return "OOB data flag 0x\(String(p.oobDataFlag, radix: 16))" }
        if !(7...16).contains(p.maxEncryptionKeySize) { return "maximum encryption key size \(p.maxEncryptionKeySize)" }
        return nil
    }

    /// The security level a link encrypted with these keys has.
    var level: SecurityLevel { method.isAuthenticated ? .authenticated : .encrypted }
}
