import BLE
import Foundation
import HCI
import TestSupport
import Testing

/// The Bumble fixture itself (Tests/Fixtures, Tests/TestSupport/BumbleFleet.swift): its own Python
/// tests, the options reaching the fleet, and today's host working on a paced fleet.
@Suite("The Bumble fleet fixture", .serialized,
       .enabled(if: BumbleFleet.available, "needs Python with bumble: make venv, or set PROVISION_PYTHON"))
struct BumbleFleetTests {
    @Test func theFixturesOwnTestsPass() async throws {
        let (status, text) = try await BumbleFleet.runFixtureTests("test_bumble_fleet")
        #expect(status == 0, "python -m unittest test_bumble_fleet:\n\(text)")
        #expect(text.contains("OK"))
    }

    @Test func optionsReachTheFleetAndItsStationControllers() async throws {
        let options = BumbleFleet.Options(devices: 3, stations: 2, silent: [3], ackLossRate: 0.3, quirks: [.uuid128],
                                          advertisingInterval: .seconds(1), linkLatency: .microseconds(7500)...(.milliseconds(25)),
                                          seed: 9, filterAcceptListSize: 16, maxLinks: 4, refuseLinksAt: .complete,
                                          scanWhileInitiating: false)
        #expect(options.arguments == ["--devices", "3", "--stations", "2", "--silent", "3", "--ack-loss-rate", "0.3",
                                      "--quirk", "uuid128", "--adv-interval", "1000ms", "--link-latency", "7.5ms-25ms",
                                      "--seed", "9", "--fal-size", "16", "--max-links", "4", "--max-links-at", "complete",
                                      "--no-scan-while-initiating"])
        try await BumbleFleet.with(options) { fleet in
            #expect(fleet.ports.count == 2)
            let radio = try #require(fleet.radio)
            #expect(radio.adv_interval_ms == 1000 && radio.link_latency_ms == [7.5, 25] && radio.seed == 9)
            let stations = try #require(fleet.stations)
            #expect(stations.fal_size == 16 && stations.max_links == 4 && stations.max_links_at == "complete")
            #expect(stations.scan_while_initiating == false)
            #expect(fleet.devices.map(\.quirks) == [["uuid128"], ["uuid128"], ["uuid128"]])
            #expect(fleet.devices.map(\.ack_loss_rate) == [0.3, 0.3, 0.3])
            #expect(fleet.devices.map(\.faults) == [[], [], ["silent"]])
        }
    }

    @Test func todaysHostProvisionsDevicesOnAPacedFleetThatAdvertisesOnceASecond() async throws {
        let options = BumbleFleet.Options(devices: 2, advertisingInterval: .seconds(1),
                                          linkLatency: .microseconds(7500)...(.milliseconds(25)))
        try await BumbleFleet.with(options) { fleet in
            let adapter = try await HCIAdapter.open(spec: fleet.spec)
            let blob = (0..<600).map { UInt8(truncatingIfNeeded: $0 &* 13) }
            for device in fleet.devices {
                let address = try #require(BluetoothAddress(device.address, kind: .random))
                let link = try await adapter.connect(to: address, options: ConnectOptions(timeout: .seconds(10)))
                _ = try await provisionSensorV2(link, id: device.id, config: [0x0A, 0x0B], blob: blob)
                await link.disconnect()
                let state = try fleet.state(device.id)
                #expect(state["state"] as? Int == 2)
                #expect(state["blob_bytes"] as? Int == blob.count)
                #expect(state["commits"] as? Int == 1)
            }
            await adapter.close()
        }
    }
}
