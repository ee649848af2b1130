import EngineTestSupport
import Foundation
import Testing
import TestSupport

/// `provision gatt | read | write` against a Bumble peripheral over `hci:tcp:`: a real stack, checked on
/// the device side.
@Suite(.serialized, .enabled(if: BumbleFleet.available, "needs Python with Bumble: run `make test`, or set PROVISION_PYTHON"))
struct BumbleDeviceCommandTests {
    @Test func oneDeviceIsSurveyedReadAndWritten() async throws {
        try await BumbleFleet.with(["--devices", "2", "--old-firmware", "2"]) { fleet in
            let line = try TestLine()
            defer { line.remove() }
            let device = fleet.devices[1]
            // By advertised name, no inventory.
            let gatt = try await ChildProcess.shell("$PROVISION gatt --adapter \(fleet.spec) \(device.name) --json --timeout 20s", directory: line.directory)
            #expect(gatt.status == 0, "\(gatt.stderr)")
            let doc = try #require(try JSONSerialization.jsonObject(with: Data(gatt.stdout.utf8)) as? [String: Any])
            let services = try #require(doc["services"] as? [[String: Any]])
            let chars = services.flatMap { ($0["characteristics"] as? [[String: Any]]) ?? [] }
            #expect(chars.first { $0["uuid"] as? String == "2A26" }?["text"] as? String == "1.9.0")
            #expect(chars.contains { $0["uuid"] as? String == "FFF1" })

            // By address: the firmware as a version, then a configuration command.
            let read = try await ChildProcess.shell("$PROVISION read --adapter \(fleet.spec) \(device.address) 180A 2A26 --as version --timeout 20s",
                                                    directory: line.directory)
            #expect(read.status == 0, "\(read.stderr)")
            #expect(read.stdout == "1.9.0\n")
            let write = try await ChildProcess.shell("$PROVISION write --adapter \(fleet.spec) \(device.address) FFF0 FFF1 hex:01c0ffee42 --timeout 20s",
                                                     directory: line.directory)
            #expect(write.status == 0, "\(write.stderr)")
            #expect(try fleet.state(device.id)["config"] as? String == "c0ffee42", "the device received the configuration")
        }
    }
}
