import BLE
import Foundation
import HCI
import Testing
import TestSupport

/// Devices that advertise only with extended PDUs (ADV_EXT_IND pointing to an AUX_ADV_IND on the LE 2M
/// or LE Coded secondary PHY), on a station controller with extended advertising (bumble_fleet.py
/// `--extended --ext-adv PHY`): the host scans with LE Set Extended Scan Parameters/Enable and connects
/// with LE Extended Create Connection; a host that scans the legacy way hears nothing of them.
@Suite("Extended advertising against Bumble", .serialized, .timeLimit(.minutes(3)),
       .enabled(if: BumbleFleet.available, "needs Python with Bumble: run `make test`, or set PROVISION_PYTHON"))
struct HCIExtendedAdvertisingBumbleTests {
    private func options(extended: Bool) -> HCIAdapter.Options {
        var o = HCIAdapter.Options(log: { _ in })
        o.extendedAdvertising = extended
        return o
    }

    @Test func devicesOnASecondaryPHYAreHeardAndConnectedWithTheExtendedCommands() async throws {
        for phy in ["2M", "coded"] {
            try await BumbleFleet.with(BumbleFleet.Options(devices: 3, extraArguments: ["--extended", "--ext-adv", phy])) { fleet in
                let adapter = try await HCIAdapter.open(spec: fleet.spec, options: options(extended: true))
                #expect(await adapter.info?.extended == true)
                let wanted = fleet.devices.count
                let heard = try await withDeadline(.seconds(10), operation: "hearing every device") { () -> Set<String> in
                    var heard: Set<String> = []
                    for try await ad in adapter.scan(ScanFilter(allowDuplicates: false)) {
                        heard.insert(ad.address.description)
                        if heard.count == wanted { break }
                    }
                    return heard
                }
                #expect(heard == Set(fleet.devices.map(\.address)), "\(phy)")
                let address = try #require(BluetoothAddress(fleet.devices[0].address, kind: .random))
                let link = try await adapter.connect(to: address, options: ConnectOptions(timeout: .seconds(5)))
                // An ATT exchange over the link: Exchange MTU answered.
                #expect(try await RawATT(link).request([0x02, 0xF7, 0x00]).first == 0x03, "\(phy)")
                #expect(try fleet.state(fleet.devices[0].id)["connections"] as? Int == 1)
                await adapter.close()
            }
        }
    }

    @Test func aLegacyScanHearsNoneOfThem() async throws {
        try await BumbleFleet.with(BumbleFleet.Options(devices: 2, extraArguments: ["--extended", "--ext-adv", "2M"])) { fleet in
            let adapter = try await HCIAdapter.open(spec: fleet.spec, options: options(extended: false))
            #expect(await adapter.info?.extended == false)
            let address = try #require(BluetoothAddress(fleet.devices[0].address, kind: .random))
            await #expect(throws: BLEError.self) {
                _ = try await adapter.connect(to: address, options: ConnectOptions(timeout: .milliseconds(1500)))
            }
            #expect(try fleet.state(fleet.devices[0].id)["connections"] as? Int == 0)
            await adapter.close()
        }
    }
}
