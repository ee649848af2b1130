import Foundation
import TestSupport
import Testing

/// The Bumble SMP fixture (Tests/Fixtures/smp_device.py, a Zephyr-like MCUmgr peripheral with MCUboot):
/// its own Python tests against the smpmgr-like peer, and its devices in the fleet's ready line.
@Suite("The Bumble SMP fixture", .serialized,
       .enabled(if: BumbleFleet.available, "needs Python with bumble, smp, cbor2 and imgtool: make venv, or set PROVISION_PYTHON"))
struct BumbleSMPFixtureTests {
    @Test func theFixturesOwnTestsPass() async throws {
        let (status, text) = try await BumbleFleet.runFixtureTests("test_smp_device")
        #expect(status == 0, "python -m unittest test_smp_device:\n\(text)")
        #expect(text.contains("OK"))
    }

    @Test func smpDevicesAndTheLinkRateReachTheReadyLine() async throws {
        let arguments = ["--devices", "0", "--smp-devices", "3", "--smp-buf-count", "6", "--smp-no-reassembly",
                         "--smp-fault", "2:revert", "--link-latency", "7.5ms", "--link-rate", "400kbit/s"]
        try await BumbleFleet.with(arguments) { fleet in
            #expect(fleet.devices.isEmpty)
            #expect(fleet.smpDevices.map(\.id) == ["DFU-0001", "DFU-0002", "DFU-0003"])
            #expect(fleet.smpDevices.map(\.address) == ["F1:00:00:00:00:01", "F1:00:00:00:00:02", "F1:00:00:00:00:03"])
            #expect(fleet.smpDevices.allSatisfy { $0.buf_count == 6 && !$0.reassembly && $0.version == "1.0.0" })
            #expect(fleet.smpDevices.map(\.faults) == [[], ["revert"], []])
            let state = try fleet.state("DFU-0002")
            let running = try #require(state["running"] as? [String: Any])
            #expect(running["hash"] as? String == fleet.smpDevices[1].hash)
            #expect(running["confirmed"] as? Bool == true)
        }
    }
}
