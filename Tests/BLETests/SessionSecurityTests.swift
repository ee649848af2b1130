import Testing
@testable import BLE

private let fff0 = BluetoothUUID(0xFFF0)
private let fff1 = BluetoothUUID(0xFFF1)
private let fff3 = BluetoothUUID(0xFFF3)
private let fff7 = BluetoothUUID(0xFFF7)
private let dis = BluetoothUUID(0x180A)
private let fw = BluetoothUUID(0x2A26)
private let limit = Duration.seconds(5)
private let passkey = Passkey("123456")!

/// sensor-v2 whose control (FFF1) needs an encrypted link and whose FFF7 needs an authenticated one.
private func protectedDevice() -> TestPeripheral {
    var services = TestPeripheral.sensorV2Services()
    for (i, c) in services[2].characteristics.enumerated() {
        if c.uuid == fff1 { services[2].characteristics[i].security = AttributeSecurity(write: .encrypted) }
        if c.uuid == fff7 { services[2].characteristics[i].security = AttributeSecurity(read: .authenticated, write: .authenticated) }
        if c.uuid == fff3 { services[2].characteristics[i].security = AttributeSecurity(read: .encrypted) }
    }
    return TestPeripheral(database: GATTDatabase(services: services))
}

private func options(security: SecurityRequest? = nil, upgrade: SecurityRequest? = nil,
                     reconnect: ReconnectPolicy = .limited(maxAttempts: 3, delays: [.milliseconds(5)])) -> SessionOptions {
    SessionOptions(connect: ConnectOptions(timeout: .seconds(2)), reconnect: reconnect, security: security, upgrade: upgrade)
}

private func writes(_ device: TestPeripheral, _ uuid: BluetoothUUID) -> Int {
    let h = device.valueHandle(fff0, uuid)
    return device.events.items.filter { if case .wrote(let w, _, _) = $0.event { return w == h } else { return false } }.count
}

@Suite struct SessionSecurityTests {
    @Test func aSessionAskedForALevelSecuresEveryLinkBeforeReady() async throws {
        let device = protectedDevice()
        let central = SecuringCentral(device)
        let session = Session(central: central, peer: device.address, options: options(security: SecurityRequest(level: .encrypted)))
        try await session.connect()
        try await session.write(service: fff0, characteristic: fff1, value: [0x01, 0xAA], withResponse: true, timeout: limit)
        #expect(await session.security == SecurityOutcome(security: LinkSecurity(level: .encrypted, keySize: 16, secureConnections: true),
                                                          method: .justWorks, bond: .made))
        // A reconnect is secured again (with the bond) before it is ready.
        await device.drop()
        try await session.write(service: fff0, characteristic: fff1, value: [0x01, 0xBB], withResponse: true, timeout: limit)
        #expect(writes(device, fff1) == 2)
        #expect(central.device.pairings == 1 && central.device.encryptions == 2)
        #expect(await session.security?.bond == .made)
        #expect(await session.security?.method == .justWorks)
        await session.disconnect()
    }

    @Test func aFailedSecuringIsAFailedConnectAndTheLinkIsDropped() async throws {
        let device = protectedDevice()
        let central = SecuringCentral(device, device: SecuringCentral.Device(passkey: Passkey("999999")))
        let session = Session(central: central, peer: device.address,
                              options: options(security: SecurityRequest(level: .authenticated, passkey: passkey)))
        await #expect(throws: BLEError.security(SecurityFailure(.pairingFailed, reason: "wrong passkey"))) {
            try await session.connect()
        }
        #expect(central.base.links.first?.disconnectReason != nil)
        #expect(await session.security == nil)
    }

    @Test func withoutUpgradeARefusedWriteFailsAndNothingIsPaired() async throws {
        let device = protectedDevice()
        let central = SecuringCentral(device)
        let session = Session(central: central, peer: device.address, options: options())
        try await session.connect()
        await #expect {
            try await session.write(service: fff0, characteristic: fff1, value: [0x01], withResponse: true, timeout: limit)
        } throws: { error in
            guard case BLEError.att(let e) = error else { return false }
            return e.code == .insufficientEncryption
        }
        #expect(central.device.requests.isEmpty && writes(device, fff1) == 0)
        await session.disconnect()
    }

    @Test func anUpgradeEncryptsOnceAndRepeatsTheRequest() async throws {
        let device = protectedDevice()
        let central = SecuringCentral(device)
        let session = Session(central: central, peer: device.address, options: options(upgrade: SecurityRequest(level: .none)))
        try await session.connect()
        // Reads that need nothing go through unencrypted.
        _ = try await session.read(service: dis, characteristic: fw, timeout: limit)
        #expect(central.device.requests.isEmpty)
        try await session.write(service: fff0, characteristic: fff1, value: [0x01], withResponse: true, timeout: limit)
        #expect(central.device.requests.map(\.level) == [.encrypted])
        #expect(writes(device, fff1) == 1)
        // The level sticks: a reconnect is secured before ready.
        await device.drop()
        try await session.write(service: fff0, characteristic: fff1, value: [0x02], withResponse: true, timeout: limit)
        #expect(central.device.requests.map(\.level) == [.encrypted, .encrypted] && central.device.pairings == 1)
        await session.disconnect()
    }

    @Test func insufficientAuthenticationPairsWithThePasskeyWhenItIsThere() async throws {
        let device = protectedDevice()
        let central = SecuringCentral(device, device: SecuringCentral.Device(passkey: passkey))
        let session = Session(central: central, peer: device.address,
                              options: options(upgrade: SecurityRequest(level: .none, passkey: passkey)))
        try await session.connect()
        let value = try await session.read(service: fff0, characteristic: fff7, timeout: limit)
        #expect(value.count == 300)
        #expect(central.device.requests.map(\.level) == [.authenticated])
        #expect(await session.security?.method == .passkeyEntry)
        await session.disconnect()
    }

    @Test func anUpgradeHappensOnceAndARefusalAfterItStands() async throws {
        let device = protectedDevice()
        let central = SecuringCentral(device)
        // No passkey: Insufficient Authentication on a plain link encrypts (all this side can do); the
        // device still refuses, and the request is not repeated again.
        let session = Session(central: central, peer: device.address, options: options(upgrade: SecurityRequest(level: .none)))
        try await session.connect()
        await #expect {
            _ = try await session.read(service: fff0, characteristic: fff7, timeout: limit)
        } throws: { error in
            guard case BLEError.att(let e) = error else { return false }
            return e.code == .insufficientAuthentication
        }
        #expect(central.device.requests.map(\.level) == [.encrypted])
        await session.disconnect()
    }

    @Test func subscribingNeedsNothingWhenOnlyTheValueIsProtected() async throws {
        let device = protectedDevice()
        let central = SecuringCentral(device)
        let session = Session(central: central, peer: device.address, options: options(upgrade: SecurityRequest(level: .none)))
        try await session.connect()
        // FFF3's value needs encryption to be read; its CCCD is writable by anyone, so subscribing works
        // without securing anything.
        _ = try await session.notifications(service: fff0, characteristic: fff3, timeout: limit)
        #expect(central.device.requests.isEmpty)
        await session.disconnect()
    }

    @Test func aLostBondIsPairedAgainOnlyWhenTheRequestSaysSo() async throws {
        let device = protectedDevice()
        let strict = SecuringCentral(device, device: SecuringCentral.Device(bond: .encrypted, forgotBond: true))
        let session = Session(central: strict, peer: device.address, options: options(security: SecurityRequest(level: .encrypted)))
        await #expect(throws: BLEError.security(SecurityFailure(.bondLost, reason: "bond lost"))) { try await session.connect() }
        #expect(strict.device.pairings == 0)

        let lenient = SecuringCentral(device, device: SecuringCentral.Device(bond: .encrypted, forgotBond: true))
        let again = Session(central: lenient, peer: device.address,
                            options: options(security: SecurityRequest(level: .encrypted, pairIfBondLost: true)))
        try await again.connect()
        #expect(lenient.device.pairings == 1)
        let outcome = await again.security
        #expect(outcome?.bondWasLost == true && outcome?.bond == .made)
        await again.disconnect()
    }

    @Test func aSecurityManagerTimeoutDropsTheLink() async throws {
        let device = protectedDevice()
        let central = SecuringCentral(device, device: SecuringCentral.Device(silent: true))
        let session = Session(central: central, peer: device.address, options: options(reconnect: .disabled))
        try await session.connect()
        await #expect(throws: BLEError.security(SecurityFailure(.timeout, reason: "SMP timeout"))) {
            _ = try await session.secure(SecurityRequest(level: .encrypted), timeout: limit)
        }
        let link = try #require(central.base.links.first)
        #expect(await link.waitForDisconnect() == .localHostTerminated)
    }

    @Test func anExplicitSecureIsKeptForReconnects() async throws {
        let device = protectedDevice()
        let central = SecuringCentral(device, device: SecuringCentral.Device(passkey: passkey))
        let session = Session(central: central, peer: device.address, options: options())
        try await session.connect()
        let outcome = try await session.secure(SecurityRequest(level: .authenticated, passkey: passkey), timeout: limit)
        #expect(outcome.security.level == .authenticated && outcome.bond == .made)
        await device.drop()
        _ = try await session.read(service: fff0, characteristic: fff7, timeout: limit)
        #expect(central.device.requests.map(\.level) == [.authenticated, .authenticated])
        #expect(central.device.pairings == 1)
        await session.disconnect()
    }
}
