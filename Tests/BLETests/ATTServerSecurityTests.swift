import Digests
import Testing
@testable import BLE

/// What a server answers when a value needs more of the link than it has (Vol 3 Part F 3.2.5, 4.x):
/// Insufficient Encryption on a plain link when encryption suffices, Insufficient Authentication when
/// MITM protection is needed.
@Suite struct ATTServerSecurityTests {
    private static let db = GATTDatabase(services: [
        .init(uuid: BluetoothUUID(0xFFF0), characteristics: [
            .init(uuid: BluetoothUUID(0xFFF1), properties: [.read, .write, .writeWithoutResponse], value: [1],
                  security: AttributeSecurity(read: .encrypted, write: .encrypted)),
            .init(uuid: BluetoothUUID(0xFFF2), properties: [.read, .write], value: [2],
                  security: AttributeSecurity(read: .authenticated, write: .authenticated)),
            .init(uuid: BluetoothUUID(0xFFF3), properties: [.read], value: [3]),
        ]),
    ])
    private static let encrypted = LinkSecurity(level: .encrypted, keySize: 16, secureConnections: true)
    private static let authenticated = LinkSecurity(level: .authenticated, keySize: 16, secureConnections: true)

    private func handle(_ uuid: UInt16) -> UInt16 { Self.db.valueHandle(service: BluetoothUUID(0xFFF0), characteristic: BluetoothUUID(uuid)) ?? 0 }
    private func le(_ h: UInt16) -> [UInt8] { [UInt8(h & 0xFF), UInt8(h >> 8)] }
    private func error(_ opcode: UInt8, _ h: UInt16, _ code: UInt8) -> [UInt8] { [0x01, opcode] + le(h) + [code] }

    @Test func aPlainLinkGetsInsufficientEncryptionOrAuthenticationByWhatTheValueNeeds() {
        var server = ATTServer(database: Self.db)
        #expect(server.receive([0x0A] + le(handle(0xFFF1))).response == error(0x0A, handle(0xFFF1), 0x0F))
        #expect(server.receive([0x0A] + le(handle(0xFFF2))).response == error(0x0A, handle(0xFFF2), 0x05))
        #expect(server.receive([0x12] + le(handle(0xFFF1)) + [9]).response == error(0x12, handle(0xFFF1), 0x0F))
        #expect(server.receive([0x0A] + le(handle(0xFFF3))).response == [0x0B, 3])
        // A refused write command is dropped: no response, no event.
        let command = server.receive([0x52] + le(handle(0xFFF1)) + [9])
        #expect(command.response == nil && command.events.isEmpty)
        // Read By Type refuses too (the first matching value).
        let byType = server.receive([0x08, 0x01, 0x00, 0xFF, 0xFF, 0xF1, 0xFF]).response
        #expect(byType == error(0x08, handle(0xFFF1), 0x0F))
    }

    @Test func anEncryptedLinkReadsEncryptedValuesAndNeedsMITMForAuthenticatedOnes() {
        var server = ATTServer(database: Self.db)
        server.linkSecurity = Self.encrypted
        #expect(server.receive([0x0A] + le(handle(0xFFF1))).response == [0x0B, 1])
        #expect(server.receive([0x12] + le(handle(0xFFF1)) + [9]).events == [.wrote(handle: handle(0xFFF1), value: [9], withResponse: true)])
        #expect(server.receive([0x0A] + le(handle(0xFFF2))).response == error(0x0A, handle(0xFFF2), 0x05))
        #expect(server.receive([0x20] + le(handle(0xFFF2)) + le(handle(0xFFF3))).response == error(0x20, handle(0xFFF2), 0x05))
        server.linkSecurity = Self.authenticated
        #expect(server.receive([0x0A] + le(handle(0xFFF2))).response == [0x0B, 2])
    }

    @Test func theDatabaseHashUsesTheFunctionItIsGiven() {
        let services: [GATTDatabase.ServiceSpec] = [.init(uuid: .genericAttribute, characteristics: [.init(uuid: .databaseHash, properties: [.read])])]
        let given = GATTDatabase(services: services, hash: { input in Array(input.prefix(16)) + [UInt8](repeating: 0, count: max(0, 16 - input.count)) })
        #expect(given.databaseHash == Array(given.databaseHashInput.prefix(16)) + [UInt8](repeating: 0, count: max(0, 16 - given.databaseHashInput.count)))
        let standIn = GATTDatabase(services: services)
        #expect(standIn.databaseHash == Array(SHA256.hash(standIn.databaseHashInput).prefix(16)))
        let h = given.valueHandle(service: .genericAttribute, characteristic: .databaseHash) ?? 0
        #expect(given.value(h) == given.databaseHash)
    }
}
