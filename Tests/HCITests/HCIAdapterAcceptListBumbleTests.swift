import BLE
import Foundation
import HCI
import Synchronization
import Testing
import TestSupport

/// The HCI host's accept-list connects against the Bumble fleet's station controller, which honours the
/// Filter Accept List as a real controller does (Tests/Fixtures/fleet_radio.py), on a paced radio.
@Suite("HCI adapter connecting through the Filter Accept List on Bumble", .serialized, .timeLimit(.minutes(2)),
       .enabled(if: BumbleFleet.available, "needs Python with bumble: make venv, or set PROVISION_PYTHON"))
struct HCIAdapterAcceptListBumbleTests {
    @Test func anAbsentDeviceAtTheHeadOfTheLineBlocksNobodyTheListConnectsTheOthers() async throws {
        let options = BumbleFleet.Options(devices: 6, silent: [1], advertisingInterval: .milliseconds(500),
                                          linkLatency: .microseconds(7500)...(.microseconds(7500)))
        try await BumbleFleet.with(options) { fleet in
            let log = Mutex<[String]>([])
            let (created, creations) = AsyncStream<String>.makeStream()
            let adapter = try await HCIAdapter.open(spec: fleet.spec, options: HCIAdapter.Options(connectionSlots: 8, log: { line in
                log.withLock { $0.append(line) }
                if line.contains("creating a connection") { creations.yield(line) }
            }))
            let addresses = try fleet.devices.map { try #require(BluetoothAddress($0.address, kind: .random)) }
            let absent = addresses[0]
            let absentEnded = Mutex(false)
            let waiting = Task {
                defer { absentEnded.withLock { $0 = true } }
                return try await adapter.connect(to: absent, options: ConnectOptions(timeout: .seconds(60)))
            }
            // The absent device is alone, first in line: LE Create Connection names it.
            try await withDeadline(.seconds(10), operation: "the first initiation") {
                for await line in created where line.hasSuffix("creating a connection to \(absent)") { return }
            }
            // Five more join the line while it is pending; each is connected when it advertises.
            let links = try await withThrowingTaskGroup(of: (any Link).self) { group in
                for address in addresses.dropFirst() {
                    group.addTask { try await adapter.connect(to: address, options: ConnectOptions(timeout: .seconds(30))) }
                }
                var links: [any Link] = []
                for try await link in group { links.append(link) }
                return links
            }
            #expect(Set(links.map { $0.peer.value }) == Set(addresses.dropFirst().map(\.value)))
            // ... while the absent device, at the head of the line, was still waited for.
            #expect(absentEnded.withLock { $0 } == false)
            waiting.cancel()
            await #expect(throws: BLEError.cancelled) { _ = try await waiting.value }

            let lines = log.withLock { $0 }
            // One LE Create Connection with initiator filter policy 1 at a time, naming the absent head in
            // Peer_Address: the controller connected the listed devices that advertised instead.
            #expect(lines.contains { $0.contains("creating a connection to whichever of") })
            #expect(lines.contains { $0.hasSuffix("the controller honours the Filter Accept List") })
            for address in addresses.dropFirst() {
                #expect(!lines.contains { $0.hasSuffix("creating a connection to \(address)") }, "\(address) was never created by address")
            }
            // The device side: every present device connected once, the absent one never.
            for (i, device) in fleet.devices.enumerated() {
                #expect(try fleet.state(device.id)["connections"] as? Int == (i == 0 ? 0 : 1), "\(device.id)")
            }
            for link in links { await link.disconnect() }
            await adapter.close()
        }
    }
}
