import BLE
import BLESimulator
import Engine
import Foundation
import Support
import Testing

/// The thermostat example (`workflows/thermostat.yaml`, `inventory/thermostat-line.yaml`, its model
/// `inventory/models/thermostat.yaml`), as a user runs it: its configuration — interval, room name and
/// the CRC-16 the device checks — is built in the workflow and validated; on the simulator every unit
/// takes it; and when the workflow writes the CRC in the wrong byte order, the device model refuses it
/// and nothing is configured or committed.
@Suite struct ThermostatProcessTests {
    static let validate = "$PROVISION validate workflows/thermostat.yaml --inventory inventory/thermostat-line.yaml"
    static let run = "$PROVISION run workflows/thermostat.yaml --inventory inventory/thermostat-line.yaml --adapter sim --sim-latency 0 --quiet"
        + " --report r.json --journal r.journal --sim-dump d.json"

    /// The configuration the unit must hold: interval (uint32 LE) and the room name in 16 bytes, NUL-padded.
    static func body(interval: UInt32, room: String) -> [UInt8] {
        let name = Array(room.utf8)
        return (0..<4).map { UInt8(truncatingIfNeeded: interval >> ($0 * 8)) } + name + [UInt8](repeating: 0, count: 16 - name.count)
    }

    static let units: [(id: String, interval: UInt32, room: String)] = [
        ("TH-0001", 300, "Kitchen"), ("TH-0002", 300, "Living room"), ("TH-0003", 300, "Salle à manger"),
        ("TH-0004", 60, "Meeting room 4.1"), ("TH-0005", 30, "Server room"), ("TH-0006", 300, "Hall"),
    ]

    @Test func theExampleIsValidAndEveryUnitTakesItsConfiguration() async throws {
        let copy = try BrokenCopy()
        let v = try await ChildProcess.shell(Self.validate, directory: copy.path)
        #expect(v.status == 0, "\(v.stderr)")
        #expect(v.stdout == "valid: thermostat-commissioning (workflows/thermostat.yaml): 13 steps, 6 of 6 devices selected (inventory/thermostat-line.yaml)\n")
        let r = try await ChildProcess.shell(Self.run, directory: copy.path)
        #expect(r.status == 0, "\(r.stderr)")
        let report = try RunReport.read(from: copy.path + "/r.json")
        #expect(report.summary.outcomes[.succeeded] == 6)
        let dump = try JSONDecoder().decode(SimulatorDump.self, from: Data(contentsOf: URL(fileURLWithPath: copy.path + "/d.json")))
        for unit in Self.units {
            let side = try #require(dump.device(unit.id))
            #expect(side.config == Self.body(interval: unit.interval, room: unit.room).hexString, "\(unit.id): the device checked the CRC and kept the rest")
            #expect(side.state == "02" && side.commits == 1, "\(unit.id)")
            #expect(side.commands.allSatisfy { $0.status == "00" && $0.reason == nil }, "\(unit.id): \(side.commands)")
        }
    }

    @Test func aCRCInTheWrongByteOrderIsRefusedByTheDevice() async throws {
        let copy = try BrokenCopy()
        try copy.replace("workflows/thermostat.yaml", "{ uint16be: { crc: CRC-16/CCITT-FALSE,", with: "{ uint16le: { crc: CRC-16/CCITT-FALSE,")
        // The workflow is still a valid one: only the device knows its byte order.
        let v = try await ChildProcess.shell(Self.validate, directory: copy.path)
        #expect(v.status == 0, "\(v.stderr)")
        let r = try await ChildProcess.shell(Self.run, directory: copy.path)
        #expect(r.status == 1, "\(r.stderr)")
        let report = try RunReport.read(from: copy.path + "/r.json")
        #expect(report.summary.outcomes[.failed] == 6)
        let dump = try JSONDecoder().decode(SimulatorDump.self, from: Data(contentsOf: URL(fileURLWithPath: copy.path + "/d.json")))
        for unit in Self.units {
            let record = try #require(report.devices.first { $0.id == unit.id })
            #expect(record.error?.kind == .verifyFailed, "\(unit.id): \(String(describing: record.error))")
            #expect(record.error?.step == "send the configuration")
            let side = try #require(dump.device(unit.id))
            #expect(side.config == nil && side.state == "00" && side.commits == 0, "\(unit.id): nothing configured, nothing committed")
            // Refused at once (`fails_on`), never re-sent, with the device's reason.
            let body = Self.body(interval: unit.interval, room: unit.room)
            let crc = CRCAlgorithm.crc16CCITTFalse.checksum(body)
            #expect(side.commands.map(\.status) == ["01"], "\(unit.id)")
            #expect(side.commands.first?.reason
                == "CRC-16/CCITT-FALSE \([UInt8(crc & 0xFF), UInt8(crc >> 8)].hexString) does not match \([UInt8(crc >> 8), UInt8(crc & 0xFF)].hexString), the CRC of the 20 bytes before it")
        }
    }

    @Test func aRoomNameLongerThanItsFieldIsRefusedBeforeAnythingIsSent() async throws {
        let copy = try BrokenCopy()
        let line = try copy.replace("inventory/thermostat-line.yaml", "vars: { room: \"Hall\" }", with: "vars: { room: \"Hall and staircase\" }")
        let v = try await ChildProcess.shell(Self.validate, directory: copy.path)
        #expect(v.status == 2)
        #expect(v.stderr.hasPrefix("inventory/thermostat-line.yaml:\(line):5: error: device TH-0006: room is 18 bytes (\"Hall and staircase\"), but 1 to 16 are needed\n"), "\(v.stderr)")
        #expect(v.stderr.hasSuffix("1 error; nothing was sent to any device\n"))
        let r = try await ChildProcess.shell(Self.run, directory: copy.path)
        #expect(r.status == 2)
        #expect(!FileManager.default.fileExists(atPath: copy.path + "/d.json"), "no device was touched")
    }
}
