import BLE
import BLESecurity
import Digests
import Support
import Synchronization

/// One link of the simulated fleet: the in-memory link the device's ATT server runs on, and the two
/// Security Managers of the link — the station's `SMPCentral` and the device's `SMPPeripheral`, joined by
/// `SMPLoopback` — so that `secure` runs the real Security Manager, real crypto included.
///
/// The exchange itself runs at once; the time it takes on a radio is then waited: one connection event
/// per turn (sender change; the LL encryption procedure counts four) on a paced link, half a modelled
/// round trip per turn on an unpaced one, plus the device's `slow_pairing`, all scaled like every latency. The device keeps what it learns in its
/// state (and `--sim-state`): the pairings, their failures, and each bond as the digest of its key.
final class SimulatedLink: Link {
    let inner: InMemoryLink
    let device: VirtualDevice
    /// The station's identity: the central's address on the link, the bonds' station.
    let station: BluetoothAddress
    let bonds: BondStore?
    /// The protection the device's ATT server sees.
    let security: LinkSecurityBox
    private let timing: Timing
    private let smp: Mutex<SMPLoopback?> = Mutex(nil)
    private let seed: UInt64

    /// How long the radio takes per turn of an exchange.
    struct Timing: Sendable {
        /// The connection interval of a paced link (one event per turn), already scaled.
        var interval: Duration?
        /// The model's ATT round trip (an unpaced link: half of one per turn).
        var roundTrip: LatencyRange
        /// The device's `slow_pairing`.
        var slowPairing: LatencyRange
        /// latencyScale × slow.
        var factor: Double
    }

    init(inner: InMemoryLink, device: VirtualDevice, station: BluetoothAddress, bonds: BondStore?, security: LinkSecurityBox,
         timing: Timing, seed: UInt64) {
        self.inner = inner
        self.device = device
        self.station = station
        self.bonds = bonds
        self.security = security
        self.timing = timing
        self.seed = seed
    }

    var peer: BluetoothAddress { inner.peer }
    var adapterID: String { inner.adapterID }
    var bearer: any ATTBearer { inner.bearer }
    func waitForDisconnect() async -> DisconnectReason { await inner.waitForDisconnect() }
    func disconnect() async { await inner.disconnect() }

    /// The central's address as the device records it.
    private var centralName: String { "\(station) \(station.kind == .public ? "public" : "random")" }

    func secure(_ request: SecurityRequest) async throws -> SecurityOutcome {
        if let reason = inner.disconnectReason { throw BLEError.disconnected(reason) }
        guard let config = device.model.security else {
            // A device without a Security Manager: nothing to pair with.
            if request.level == .none { return .none }
            device.record(.pairingFailed("pairing not supported"))
            throw BLEError.security(SecurityFailure(.pairingFailed, reason: "pairing not supported",
                                                    detail: "the device answers Pairing Failed (Pairing Not Supported)"))
        }
        let stored = bonds?.resolve(station: station, address: device.address)
        let ran = smp.withLock { (lb: inout SMPLoopback?) -> Result<(Run, Int), CryptoError> in
            var link: SMPLoopback
            if let existing = lb {
                link = existing
            } else {
                do throws(CryptoError) { link = try makeLoopback(config, centralBond: stored) } catch { return .failure(error) }
            }
            link.central.reconfigure { c in
                c.passkey = request.passkey
                c.oobData = request.oob
                c.allowLegacy = request.allowLegacy
                c.bondable = request.bond
            }
            let (actionsBefore, peripheralBefore, transfersBefore) = (link.centralActions.count, link.peripheralActions.count, link.transfers.count)
            link.run(request.pairAgain && request.level > .none ? .pair(request.level) : .secure(request.level))
            // The SMP exchange's turns, and the LL encryption procedure's for each start of encryption
            // (LL_ENC_REQ, LL_ENC_RSP, LL_START_ENC_REQ, LL_START_ENC_RSP both ways: four turns).
            let encryptions = link.centralActions[actionsBefore...].filter { if case .startEncryption = $0 { return true } else { return false } }.count
            let turns = SMPLoopback.turns(Array(link.transfers[transfersBefore...])) + 4 * encryptions
            let run = Run(central: Array(link.centralActions[actionsBefore...]), peripheral: Array(link.peripheralActions[peripheralBefore...]))
            lb = link
            return .success((run, turns))
        }
        let run: Run, turns: Int
        switch ran {
        case .success(let value): (run, turns) = value
        case .failure(let error):
            throw BLEError.security(SecurityFailure(.pairingFailed, reason: "cryptography failed", detail: error.description))
        }
        try await wait(turns: turns, pairing: run.paired)
        if let reason = inner.disconnectReason { throw BLEError.disconnected(reason) }
        recordOnDevice(run)
        if let failure = run.failure { throw BLEError.security(failure.securityFailure) }
        guard let outcome = run.outcome else {
            throw BLEError.security(SecurityFailure(.encryptionFailed, reason: "encryption did not start", detail: "the simulated controller held it"))
        }
        security.value = outcome.security
        if let bond = outcome.bond, let bonds {
            do {
                try await bonds.save(bond, station: station)
            } catch {
                throw BLEError.adapterFailure("the new bond could not be stored: \(error)")
            }
        }
        return outcome.securityOutcome
    }

    /// What one `secure` did on both sides.
    private struct Run {
        var central: [SMPAction]
        var peripheral: [SMPAction]

        var outcome: SMPOutcome? { central.reversed().lazy.compactMap { if case .completed(let o) = $0 { return o } else { return nil } }.first }
        var failure: SMPFailure? { central.reversed().lazy.compactMap { if case .failed(let f) = $0 { return f } else { return nil } }.first }
        var peripheralOutcome: SMPOutcome? {
            peripheral.reversed().lazy.compactMap { if case .completed(let o) = $0 { return o } else { return nil } }.first
        }
        var peripheralFailure: SMPFailure? {
            peripheral.reversed().lazy.compactMap { if case .failed(let f) = $0 { return f } else { return nil } }.first
        }
        /// A pairing ran (not only an encryption with a stored bond).
        var paired: Bool { (outcome.map { !$0.usedStoredBond } ?? false) || failure != nil }
    }

    /// The loopback of this link: the station's central and the device's peripheral, the device's bond
    /// made from the key the central holds when its digest matches what the device kept.
    private func makeLoopback(_ config: DeviceModel.SecurityConfig, centralBond: Bond?) throws(CryptoError) -> SMPLoopback {
        let link = UInt64(device.snapshot.connections)
        var random = SeededSMPRandom(SimulatorRandom(seed: seed, device: device.id, stream: 0x5EC0_0000 | link))
        let centralConfig = SMPCentralConfiguration(localAddress: station, peerAddress: device.address, request: nil, storedBond: centralBond)
        var passkey: Passkey?
        if case .success(let text) = config.passkey.expand({ self.device.variable($0) }), let shown = Passkey(text) {
            passkey = device.faults.wrongPasskey ? Passkey(UInt32((shown.value + 1) % 1_000_000)) : shown
        }
        var kept: Bond?
        if let record = device.snapshot.bonds[centralName] {
            // The device has a bond with this central: the key it holds is the central's when the digests
            // agree; otherwise a key of its own (encryption then fails as with a real mismatch).
            let ltk: Key128
            if let bond = centralBond, record.keyDigest == Self.digest(bond.ltk) {
                ltk = bond.ltk
            } else {
                ltk = Key128(UInt128(bigEndianBytes: try random.bytes(16)) ?? 1)
            }
            kept = Bond(peer: station, ltk: ltk, keySize: record.keySize, authenticated: record.level == .authenticated,
                        secureConnections: record.secureConnections)
        }
        let peripheral = SMPPeripheralConfiguration(
            localAddress: device.address, peerAddress: station, ioCapability: config.io, passkey: passkey,
            secureConnections: config.secureConnections, requireMITM: config.requireMITM, bondable: config.bond,
            localIdentity: SMPLocalIdentity(irk: Key128(UInt128(truncatingIfNeeded: StableHash.fnv1a(device.id)) | 1), address: device.address),
            storedBond: kept, refusePairing: device.faults.pairingRejected ? .pairingNotSupported : nil)
        // The two sides draw from streams of their own (the same stream would give both the same key pair).
        let deviceRandom = SeededSMPRandom(SimulatorRandom(seed: seed, device: device.id, stream: 0x5EC2_0000 | link))
        return SMPLoopback(central: SMPCentral(configuration: centralConfig, random: random),
                           peripheral: SMPPeripheral(configuration: peripheral, random: deviceRandom))
    }

    /// What the device learns from one run: a pairing (and the bond it keeps, as a digest), a failure,
    /// an encryption with its bond.
    private func recordOnDevice(_ run: Run) {
        if let outcome = run.peripheralOutcome {
            if outcome.usedStoredBond {
                device.record(.encrypted(central: centralName))
            } else if let method = outcome.method {
                let bonded = outcome.bond.map { Self.digest($0.ltk) }
                device.record(.paired(PairingRecord(central: centralName, method: method.securityMethod, level: outcome.security.level,
                                                    secureConnections: outcome.security.secureConnections,
                                                    keySize: outcome.security.keySize, keyDigest: bonded)))
                if bonded != nil && device.faults.bondLost {
                    device.record(.fault("bond_lost"))
                    device.record(.forgotBond(central: centralName))
                }
            }
        } else if let failure = run.peripheralFailure ?? (run.paired ? run.failure : nil) {
            device.record(.pairingFailed(failure.reason?.name ?? failure.kindName))
        }
    }

    /// Waits what the exchange takes on the radio (nothing in zero-latency mode).
    private func wait(turns: Int, pairing: Bool) async throws {
        var rng = SimulatorRandom(seed: seed, device: device.id, stream: 0x5EC1_0000 | UInt64(turns))
        var modelled = Duration.zero
        var paced = Duration.zero
        if let interval = timing.interval {
            paced = interval * turns
        } else {
            for _ in 0..<((turns + 1) / 2) { modelled += rng.duration(in: timing.roundTrip) }
        }
        if pairing { modelled += rng.duration(in: timing.slowPairing) }
        let scaled = paced + modelled.scaled(timing.factor)
        guard scaled > .zero else { return }
        do {
            try await Task.sleep(for: scaled)
        } catch {
            throw BLEError.cancelled
        }
    }

    /// SHA-256 of a key, hex: how the device recognises a key without keeping it.
    static func digest(_ key: Key128) -> String { SHA256.hexDigest(key.littleEndianBytes) }
}

/// The simulator's randomness for pairing: seeded per device and link, so a seed gives the same
/// pairings (key pairs from seeded private keys; libcrypto still does every operation).
struct SeededSMPRandom: SMPRandomSource {
    private var rng: SimulatorRandom

    init(_ rng: SimulatorRandom) { self.rng = rng }

    mutating func bytes(_ count: Int) throws(CryptoError) -> [UInt8] {
        (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
    }

    mutating func keyPair() throws(CryptoError) -> P256KeyPair {
        // A random 256-bit scalar is below the group order n but for a chance of about 2^-32.
        for _ in 0..<4 {
            if let pair = try? P256KeyPair(privateKey: try bytes(32)) { return pair }
        }
        return try P256KeyPair.generate()
    }
}
