import BLE
import BLESimulator
import EngineTestSupport
import Foundation
import Support
import Testing
import Workflow
@testable import Engine

/// The shipped examples of the typed language, run on the simulator: `workflows/smart-lock.yaml` on
/// `inventory/smart-lock-line.yaml`, and `workflows/fleet-audit.yaml` on a line with an old unit, a low
/// battery and a unit without a battery service. What the devices received (the dump) and what the
/// report says are both checked.
@Suite struct AuditExamplesTests {
    /// A run's inputs validated, the simulated fleet of its inventory's models, and where it writes.
    struct Run {
        var report: RunReport
        var dump: SimulatorDump
        var reportText: String
        var journalText: String
        var loaded: TestLine.Loaded
    }

    static func run(workflow: String, inventory: String, directory: String) async throws -> Run {
        let line = try TestLine()
        let loaded = try line.load((workflow, inventory))
        let modelPath = try #require(loaded.inventory.simulatorModel)
        let models = try DeviceModel.loadDirectory((modelPath as NSString).deletingLastPathComponent)
        let defaultModel = try DeviceModel.load(path: modelPath)
        let specs = loaded.inventory.devices.map {
            SimulatedDeviceSpec(id: $0.id, name: $0.name, address: $0.address, variables: $0.vars, overrides: $0.simulator)
        }
        let sim = try SimulatedCentral(models: models, devices: specs, defaultModel: defaultModel.name, inventoryFile: loaded.inventory.path,
                                       options: SimulatorOptions(seed: 7, latencyScale: 0))
        var options = TestRunOptions(journalPath: directory + "/run.journal", reportPath: directory + "/run.json")
        options.fsync = false
        options.concurrency = 4
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [sim], options: options)
        line.remove()
        return Run(report: report, dump: await sim.dump(),
                   reportText: try String(contentsOfFile: options.reportPath, encoding: .utf8),
                   journalText: try String(contentsOfFile: options.journalPath, encoding: .utf8), loaded: loaded)
    }

    static func temporaryDirectory() throws -> String {
        let dir = NSTemporaryDirectory() + "audit-examples-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    // MARK: - Smart lock

    @Test func theSmartLockLineIsCommissionedOnTheSimulator() async throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try await Self.run(workflow: TestLine.packageRoot + "/workflows/smart-lock.yaml",
                                   inventory: TestLine.packageRoot + "/inventory/smart-lock-line.yaml", directory: dir)
        #expect(r.report.summary.outcomes[.succeeded] == 7)
        #expect(r.report.summary.outcomes[.failed] == 1)
        #expect(r.report.run.captureTypes?["firmware"] == .version)
        #expect(r.report.run.captureTypes?["bolt_state"] == .integer(signed: false))
        let oldFirmware: Set<String> = ["SL-0003", "SL-0006"]
        for device in r.loaded.devices where device.id != "SL-0008" {
            let record = try #require(r.report.devices.first { $0.id == device.id })
            let key = try #require([UInt8](hex: device.vars["lock_key"] ?? ""))
            #expect(record.outcome == .succeeded, "\(device.id): \(record.error?.message ?? "")")
            // The device side: its own key with its CRC check value, the settings stored, the bolt locked, committed.
            let side = try #require(r.dump.device(device.id))
            let check = CRCAlgorithm.crc16CCITTFalse.checksum(key)
            #expect(side.config == (key + [UInt8(check & 0xFF), UInt8(check >> 8)]).hexString, "\(device.id)")
            #expect(side.state == "02" && side.commits == 1)
            #expect(side.stored["FFE0/FFE4"] == Array("Building 7, door A".utf8).hexString)
            #expect(side.stored["FFE0/FFE5"] == "1e00", "auto_lock_s 30 as uint16le")
            #expect(side.stored["FFE0/FFE6"] == "01")
            // `when: firmware < 2.0.0`: only the old units get the legacy pairing window.
            #expect(side.stored["FFE0/FFE7"] == (oldFirmware.contains(device.id) ? "01" : nil), "\(device.id)")
            let window = try #require(record.steps.first { $0.name == "open the legacy pairing window" })
            if oldFirmware.contains(device.id) {
                #expect(window.outcome == .succeeded)
                #expect(record.captured["firmware"] == "1.9.2")
            } else {
                #expect(window.outcome == .skippedByCondition)
                #expect(window.attempts == 0)
                #expect(window.skipReason == "`when: firmware < 2.0.0` is false (firmware 2.1.0)")
            }
            // The report: typed values, the value captured from the bolt's notification, every verify.
            #expect(record.captured["battery"] == 80)
            #expect(record.captured["bolt_state"] == 1)
            #expect(record.captured["state"] == 2)
            #expect(record.captured["key_check"] == "***", "a value derived from the key is secret")
            #expect(record.measurements?.map(\.result.name) == ["a lock of the right model", "supported firmware", "battery level",
                                                                 "site name stored", "bolt reports locked", "commissioned"])
            #expect(record.measurements?.allSatisfy { $0.result.outcome == .pass } == true)
        }
        // The unit with a low battery stops at its check; the measurement says why.
        let low = try #require(r.report.devices.first { $0.id == "SL-0008" })
        #expect(low.error?.kind == .verifyFailed && low.error?.step == "battery level")
        #expect(low.error?.message == "battery level 12 % is below min 30 %")
        let battery = try #require(low.measurements?.last)
        #expect(battery.step == 7 && battery.result.value == .integer(12, signed: false) && battery.result.unit == "%")
        #expect(battery.result.limits == MeasurementLimits(min: .integer(30, signed: false), max: .integer(100, signed: false)))
        #expect(r.dump.device("SL-0008")?.config == nil, "nothing was written to it")
        // No key, in any rendering, in the report or the journal.
        for device in r.loaded.devices {
            let key = try #require(device.vars["lock_key"])
            for text in [r.reportText, r.journalText] {
                #expect(!text.lowercased().contains(key.lowercased()))
                #expect(!text.contains(Data([UInt8](hex: key) ?? []).base64EncodedString().prefix(12)))
            }
        }
        // The report reads back equal, and its captured values read back with their types.
        let back = try RunReport.read(from: dir + "/run.json")
        #expect(back == r.report)
        let types = try #require(back.run.captureTypes)
        let first = try #require(back.devices.first)
        #expect(try TypedValue(json: try #require(first.captured["firmware"]), as: try #require(types["firmware"]))
                == .version(try SemanticVersion(parsing: "2.1.0")))
    }

    // MARK: - Fleet audit

    /// A line of four: a good unit, one on old firmware, one with a low battery, one of a model without
    /// a battery service.
    static func auditLine(_ dir: String) throws -> String {
        let fm = FileManager.default
        try fm.createDirectory(atPath: dir + "/models", withIntermediateDirectories: true)
        let model = try String(contentsOfFile: TestLine.packageRoot + "/inventory/models/sensor-v2.yaml", encoding: .utf8)
        try Data(model.utf8).write(to: URL(fileURLWithPath: dir + "/models/sensor-v2.yaml"))
        let lite = model.replacingOccurrences(of: "model: sensor-v2", with: "model: sensor-lite")
            .replacingOccurrences(of: "  - uuid: 180F                  # Battery\n    characteristics:\n      - { uuid: 2A19, properties: [read, notify], value: { uint8: \"${battery}\" } }\n", with: "")
        #expect(lite.contains("model: sensor-lite") && !lite.contains("2A19"))
        try Data(lite.utf8).write(to: URL(fileURLWithPath: dir + "/models/sensor-lite.yaml"))
        let inventory = """
            simulator: { model: models/sensor-v2.yaml }
            devices:
              - { id: SN-0001, name: SNS-0001, address: "C0:5E:00:00:00:01" }
              - { id: SN-0002, name: SNS-0002, address: "C0:5E:00:00:00:02", simulator: { firmware: "1.9.0" } }
              - { id: SN-0003, name: SNS-0003, address: "C0:5E:00:00:00:03", simulator: { battery: "12" } }
              - { id: SN-0004, name: SNS-0004, address: "C0:5E:00:00:00:04", simulator: { model: sensor-lite } }
            """
        try Data(inventory.utf8).write(to: URL(fileURLWithPath: dir + "/line.yaml"))
        return dir + "/line.yaml"
    }

    @Test func theFleetAuditRecordsAllItCanReadAndFailsUnitsAtTheEnd() async throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try await Self.run(workflow: TestLine.packageRoot + "/workflows/fleet-audit.yaml", inventory: try Self.auditLine(dir), directory: dir)
        let byID = Dictionary(uniqueKeysWithValues: r.report.devices.map { ($0.id, $0) })
        let good = try #require(byID["SN-0001"])
        #expect(good.outcome == .succeeded)
        #expect(good.captured["firmware"] == "2.4.1" && good.captured["battery"] == 87 && good.captured["model"] == "sensor-v2")
        for id in ["SN-0002", "SN-0003", "SN-0004"] {
            let d = try #require(byID[id])
            // Every unit ran to its last step: everything readable was read, every check was recorded.
            #expect(d.outcome == .failed, "\(id)")
            #expect(d.steps.last?.outcome == .succeeded, "\(id) disconnected at the end")
            #expect(d.measurements?.count == 3, "\(id)")
            #expect(d.steps.filter { $0.name.hasPrefix("serial") || $0.name.hasPrefix("firmware") || $0.name == "battery level" }
                        .allSatisfy { $0.continueOnError == true })
        }
        // Old firmware: its battery still read and measured; it fails for its firmware.
        let old = try #require(byID["SN-0002"])
        #expect(old.error?.step == "firmware is supported")
        #expect(old.error?.message == "firmware is supported 1.9.0 is below version_at_least 2.0.0")
        #expect(old.captured["battery"] == 87)
        #expect(old.measurements?.first { $0.result.name == "battery level" }?.result.outcome == .pass)
        // Low battery: a measurement with its value, unit and limits.
        let low = try #require(byID["SN-0003"]?.measurements?.first { $0.result.name == "battery level" })
        #expect(low.result.outcome == .fail && low.result.value == .integer(12, signed: false) && low.result.unit == "%")
        // No battery service: the optional read failed and is recorded; the unit went on, and fails for the
        // missing value, not for the read.
        let lite = try #require(byID["SN-0004"])
        let read = try #require(lite.steps.first { $0.name == "read battery" })
        #expect(read.outcome == .failed && read.optional == true && read.error?.kind == .attributeNotFound)
        #expect(lite.captured["battery"] == nil && lite.captured["firmware"] == "2.4.1")
        #expect(lite.error?.step == "battery level" && lite.error?.message == "battery level has no value")
        #expect(lite.measurements?.first { $0.result.name == "battery level" }?.result.value == nil)
        // The report answers "which units run firmware older than 2.0?" with typed values alone.
        let types = try #require(r.report.run.captureTypes)
        let old2 = try r.report.devices.filter { d in
            guard let j = d.captured["firmware"], let t = types["firmware"] else { return false }
            return try TypedValue.compare(try TypedValue(json: j, as: t), .less, .version(try SemanticVersion(parsing: "2.0.0")))
        }
        #expect(old2.map(\.id) == ["SN-0002"])
        #expect(r.dump.devices.allSatisfy { $0.commands.isEmpty }, "an audit changes nothing")
    }
}
