import Synchronization
@testable import BLE

/// A central whose links can be secured, for session tests: a stand-in for a Security Manager that
/// keeps the device's side of bonding in plain values (the real SMP is tested in BLESecurityTests, on
/// the simulator and against Bumble). Pairing reaches `authenticated` with the device's passkey,
/// `encrypted` without one; a wrong passkey fails as a pairing failure; a device that forgot its bond
/// answers encryption with the stored key as a lost bond.
final class SecuringCentral: Central {
    struct Device: Sendable {
        /// The passkey the device shows; nil: it pairs with Just Works only.
        var passkey: Passkey?
        /// The device has (or had) a bond with this central: its level.
        var bond: SecurityLevel?
        /// The device forgot its bond (the central still has its key).
        var forgotBond = false
        /// The Security Manager never answers: it times out.
        var silent = false
        var pairings = 0
        var encryptions = 0
        var requests: [SecurityRequest] = []
    }

    let base: FakeCentral
    let peripheral: TestPeripheral
    let state: Mutex<Device>

    init(_ peripheral: TestPeripheral, device: Device = Device()) {
        self.peripheral = peripheral
        base = FakeCentral([peripheral])
        state = Mutex(device)
    }

    var id: String { base.id }
    var connectionSlots: Int { base.connectionSlots }
    var isSimulated: Bool { true }
    var device: Device { state.withLock { $0 } }
    func update(_ change: (inout Device) -> Void) { state.withLock { change(&$0) } }

    func scan(_ filter: ScanFilter) -> AsyncThrowingStream<Advertisement, any Error> { base.scan(filter) }

    func connect(to peer: BluetoothAddress, options: ConnectOptions) async throws -> any Link {
        SecuringLink(inner: try await base.connect(to: peer, options: options), central: self)
    }

    func close() async { await base.close() }

    /// What securing one link does on the device's side.
    func secure(_ request: SecurityRequest) throws -> SecurityOutcome {
        let result = state.withLock { d -> Result<SecurityOutcome, BLEError> in
            d.requests.append(request)
            if d.silent {
                return .failure(.security(SecurityFailure(.timeout, reason: "SMP timeout")))
            }
            if let bond = d.bond, bond >= request.level, !request.pairAgain {
                if d.forgotBond { return .failure(.security(SecurityFailure(.bondLost, reason: "bond lost"))) }
                d.encryptions += 1
                return .success(SecurityOutcome(security: LinkSecurity(level: bond, keySize: 16, secureConnections: true), bond: .used))
            }
            if let shown = d.passkey, let entered = request.passkey, shown != entered {
                return .failure(.security(SecurityFailure(.pairingFailed, reason: "wrong passkey")))
            }
            let level: SecurityLevel = request.passkey != nil && d.passkey != nil ? .authenticated : .encrypted
            guard level >= request.level else {
                return .failure(.security(SecurityFailure(.pairingFailed, reason: "authentication requirements not met")))
            }
            d.pairings += 1
            d.encryptions += 1
            if request.bond {
                d.bond = level
                d.forgotBond = false
            }
            return .success(SecurityOutcome(security: LinkSecurity(level: level, keySize: 16, secureConnections: true),
                                            method: level == .authenticated ? .passkeyEntry : .justWorks,
                                            bond: request.bond ? .made : .none))
        }
        return try result.get()
    }
}

/// A link of `SecuringCentral`: the in-memory link, with `secure` answered by the central's device.
final class SecuringLink: Link {
    let inner: any Link
    let central: SecuringCentral

    init(inner: any Link, central: SecuringCentral) {
        self.inner = inner
        self.central = central
    }

    var peer: BluetoothAddress { inner.peer }
    var adapterID: String { inner.adapterID }
    var bearer: any ATTBearer { inner.bearer }
    func waitForDisconnect() async -> DisconnectReason { await inner.waitForDisconnect() }
    func disconnect() async { await inner.disconnect() }

    func secure(_ request: SecurityRequest) async throws -> SecurityOutcome {
        let outcome = try central.secure(request)
        await central.peripheral.setLinkSecurity(outcome.security)
        return outcome
    }
}
