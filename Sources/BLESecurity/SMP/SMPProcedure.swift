// Pieces both Security Manager roles share: the timer's arming, how one step of a pairing ends, and
// drawing randomness with a failure that names the cause.

/// The Security Manager timer (Vol 3 Part H 3.4) as ids: each (re)start makes a new id, so a late
/// expiry of an old arming is recognised and ignored.
struct SMPTimerState: Sendable {
    private(set) var current: UInt64?
    private var next: UInt64 = 1

    /// Restarts the timer: reset on every SMP command queued during pairing.
    mutating func restart() -> SMPAction {
        let id = next
        next += 1
        current = id
        return .startTimer(SMPTimer(id: id, duration: SMPTimer.timeout))
    }

    mutating func stop() -> SMPAction {
        current = nil
        return .stopTimer
    }

    /// True when `id` is the running arming; clears it (it has fired).
    mutating func fired(_ id: UInt64) -> Bool {
        guard current == id else { return false }
        current = nil
        return true
    }
}

/// How one step of a pairing ends: it goes on, it finishes, or it fails.
enum PairingStep: Sendable {
    /// The pairing goes on after these actions.
    case next([SMPAction])
    /// The pairing finished: these actions (the last key PDUs), then the outcome.
    case done([SMPAction], SMPOutcome)
    /// The pairing failed.
    case failed(SMPFailure)
}

/// What a pairing waits for next, named for errors.
enum PairingStage: Sendable, Hashable, CustomStringConvertible {
    case featureExchange, publicKey, confirm, random, dhKeyCheck, encryption, keyDistribution

    var description: String {
        switch self {
        case .featureExchange: return "the feature exchange"
        case .publicKey: return "a Pairing Public Key"
        case .confirm: return "a Pairing Confirm"
        case .random: return "a Pairing Random"
        case .dhKeyCheck: return "a Pairing DHKey Check"
        case .encryption: return "encryption"
        case .keyDistribution: return "key distribution"
        }
    }
}

extension SMPRandomSource {
    /// A nonce, or a pairing failure naming the generator's error.
    mutating func pairingNonce() throws(SMPFailure) -> UInt128 {
        do { return try value128() } catch { throw SMPFailure(.unspecified, origin: .local, reason: .unspecifiedReason, detail: error.description) }
    }

    /// Random bytes, or a pairing failure naming the generator's error.
    mutating func pairingBytes(_ count: Int) throws(SMPFailure) -> [UInt8] {
        do { return try bytes(count) } catch { throw SMPFailure(.unspecified, origin: .local, reason: .unspecifiedReason, detail: error.description) }
    }

    /// A key pair, or a pairing failure naming libcrypto's error.
    mutating func pairingKeyPair() throws(SMPFailure) -> P256KeyPair {
        do { return try keyPair() } catch { throw SMPFailure(.unspecified, origin: .local, reason: .unspecifiedReason, detail: error.description) }
    }
}

extension SMPPDU {
    /// True for the PDUs of key distribution (3.6).
    var isKeyDistribution: Bool {
        switch self {
        case .encryptionInformation, .centralIdentification, .identityInformation, .identityAddressInformation, .signingInformation:
            return true
        default:
            return false
        }
    }
}

/// The failure for a PDU the procedure does not allow now (answered with "unspecified reason").
func unexpected(_ pdu: SMPPDU, waitingFor stage: PairingStage) -> SMPFailure {
    SMPFailure(.unexpectedPDU, origin: .local, reason: .unspecifiedReason, detail: "\(pdu.code) while waiting for \(stage)")
}

/// The failure for a missing piece of pairing state (a bug here, never a peer's doing).
package func internalFailure(_ what: String) -> SMPFailure {
    SMPFailure(.unspecified, origin: .local, reason: .unspecifiedReason, detail: "internal: \(what)")
}

extension PairingStep {
    /// The actions that carry this step's end out, in order: PDUs going out restart the timer; a
    /// finished or failed pairing stops it and reports; a failure found here is told to the peer as
    /// Pairing Failed (a peer's own Pairing Failed, or a controller's error, is not answered).
    func actions(timer: inout SMPTimerState) -> [SMPAction] {
        switch self {
        case .next(let actions):
            let sends = actions.contains { if case .send = $0 { return true } else { return false } }
            return sends ? actions + [timer.restart()] : actions
        case .done(let actions, let outcome):
            return actions + [timer.stop(), .completed(outcome)]
        case .failed(let failure):
            var actions: [SMPAction] = []
            if failure.origin == .local, let reason = failure.reason {
                actions.append(.send(.pairingFailed(SMPPairingFailed(reason: reason))))
            }
            return actions + [timer.stop(), .failed(failure)]
        }
    }
}

extension SMPFailure {
    /// The Security Manager timer fired during pairing (Vol 3 Part H 3.4).
    static let smpTimeout = SMPFailure(.timeout, origin: .local,
                                       detail: "no SMP progress for 30 s; no pairing on this link until it is reconnected")
}

/// A state machine's state in words, for its description (never a key, a nonce or a passkey).
func procedureName(pairingStage: PairingStage?, encrypting: Bool, closed: Bool) -> String {
    if let pairingStage { return "pairing, waiting for \(pairingStage)" }
    if encrypting { return "encrypting with a stored bond" }
    return closed ? "closed" : "idle"
}
