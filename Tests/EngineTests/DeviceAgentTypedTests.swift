import BLE
import BLESimulator
import EngineTestSupport
import Foundation
import Support
import Testing
import Workflow
@testable import Engine

/// The device agent's typed steps on the simulated sensor-v2 line: `when:` over missing values,
/// `set:` derivations, capture from an `await`, declared variables, and what a step records.
@Suite struct DeviceAgentTypedTests {
    static func run(_ steps: String, vars: String = "", count: Int = 2, faults: [Int: String] = [:]) async throws -> (RunReport, SimulatorDump, String) {
        let line = try TestLine()
        defer { line.remove() }
        let workflow = """
            name: typed
            defaults: { timeout: 1s }
            \(vars)
            steps:
              - scan: { name: "${name}", timeout: 500ms }
              - connect: {}
            \(steps)
              - disconnect: {}
            """
        let loaded = try line.load(try line.write(count: count, workflow: workflow, faults: faults))
        let sim = try line.simulator(loaded)
        let options = line.options()
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [sim], options: options)
        return (report, await sim.dump(), try String(contentsOfFile: options.reportPath, encoding: .utf8))
    }

    @Test func aConditionOnAMissingValueIsUnknownAndSkipsItsStep() async throws {
        let (report, dump, _) = try await Self.run("""
              - read: { id: missing, service: FFF0, characteristic: FFF9, as: uint8, optional: true }
              - name: only when present
                when: missing == 1 or missing != 1
                write: { service: FFF0, characteristic: FFF1, value: { hex: "01aa" } }
              - name: only when absent
                when: missing == null
                write: { service: FFF0, characteristic: FFF1, value: { hex: "01bb" } }
            """)
        for d in report.devices {
            #expect(d.outcome == .succeeded, "an optional step's failure does not fail the device")
            let read = try #require(d.steps.first { $0.name == "read missing" })
            #expect(read.outcome == .failed && read.optional == true && read.error?.kind == .attributeNotFound)
            let present = try #require(d.steps.first { $0.name == "only when present" })
            #expect(present.outcome == .skippedByCondition)
            #expect(present.skipReason == "`when: missing == 1 or missing != 1` is unknown: `missing` has no value")
            #expect(d.steps.first { $0.name == "only when absent" }?.outcome == .succeeded)
        }
        #expect(dump.devices.allSatisfy { $0.config == "bb" }, "only the step whose condition held wrote")
    }

    @Test func setDerivesTypedValuesFromCapturesAndDeclaredVariables() async throws {
        let (report, dump, _) = try await Self.run("""
              - read: { id: serial, service: 180A, characteristic: 2A25, as: utf8 }
              - set: { id: tail, slice: "${config}", start: -3 }
              - set: { id: crc, crc: CRC-16/MODBUS, of: "${serial}" }
              - set: { id: frame, concat: ["01", "${tail}"] }
              - write: { service: FFF0, characteristic: FFF1, value: [{ hex: "${frame}" }, { uint16le: "${crc}" }] }
            """, vars: "vars: { config: { hex: [1, 8] } }")
        for d in report.devices {
            #expect(d.outcome == .succeeded, "\(d.error?.message ?? "")")
            let crc = Int64(CRCAlgorithm.crc16Modbus.checksum(Array(d.id.utf8)))
            #expect(d.captured["tail"] == "0a0b0c")
            #expect(d.captured["crc"] == .integer(crc))
            #expect(d.captured["frame"] == "010a0b0c")
            let config = try #require(dump.device(d.id)?.config)
            #expect(config == "0a0b0c" + [UInt8(crc & 0xFF), UInt8(crc >> 8)].hexString, "the device got the derived bytes")
        }
        #expect(report.run.captureTypes == ["serial": .text, "tail": .bytes, "crc": .integer(signed: false), "frame": .bytes])
    }

    @Test func anAwaitCapturesThePartOfTheValueThatMatched() async throws {
        let (report, _, _) = try await Self.run("""
              - subscribe: { id: acks, service: FFF0, characteristic: FFF3 }
              - await:
                  subscription: acks
                  trigger: { service: FFF0, characteristic: FFF1, value: { hex: "0102" } }
                  matches: { hex: "^01" }
                  capture: { id: status, slice: [1, 1], as: uint8 }
              - await:
                  subscription: acks
                  trigger: { service: FFF0, characteristic: FFF1, value: { hex: "0103" } }
                  matches: { hex: "^01" }
                  capture: whole
              - verify: { value: "${status}", equals: 0 }
            """)
        for d in report.devices {
            #expect(d.outcome == .succeeded, "\(d.error?.message ?? "")")
            #expect(d.captured["status"] == 0)
            #expect(d.captured["whole"] == "0100")
        }
    }

    @Test func aCaptureThatCannotBeDecodedFailsItsStepAsAProtocolError() async throws {
        let (report, _, _) = try await Self.run("""
              - subscribe: { id: acks, service: FFF0, characteristic: FFF3 }
              - await:
                  subscription: acks
                  trigger: { service: FFF0, characteristic: FFF1, value: { hex: "0102" } }
                  matches: { hex: "^01" }
                  capture: { id: v, as: version }
            """, count: 1)
        let d = try #require(report.devices.first)
        #expect(d.outcome == .failed)
        #expect(d.error?.kind == .protocolError)
        #expect(d.error?.message.hasPrefix("the value that matched (0100) cannot be captured as version") == true)
    }

    @Test func aVerifyOfASecretRecordsItsOutcomeButNeverTheValue() async throws {
        let (report, _, text) = try await Self.run("""
              - name: config is set
                verify: { value: "${config}", equals: "ffffffffff" }
                continue_on_error: true
              - set: { id: kcv, crc: CRC-32/ISO-HDLC, of: "${config}" }
              - name: check value
                verify: { value: "${kcv}", min: 1 }
            """, vars: "vars: { config: { hex: [1, 8], secret: true } }", count: 1)
        let d = try #require(report.devices.first)
        #expect(d.outcome == .failed && d.error?.step == "config is set")
        let first = try #require(d.measurements?.first)
        #expect(first.redacted == true && first.result.value == nil && first.result.limits == MeasurementLimits())
        #expect(first.result.outcome == .fail && first.result.message == "config is set *** does not equal ffffffffff")
        let second = try #require(d.measurements?.last)
        #expect(second.redacted == true && second.result.outcome == .pass && second.result.value == nil)
        #expect(d.captured["kcv"] == "***")
        #expect(!text.contains("00010a0b0c"), "the secret never appears")
        let kcv = CRCAlgorithm.crc32ISOHDLC.checksum([0x00, 0x01, 0x0A, 0x0B, 0x0C])
        #expect(!text.contains(String(kcv)), "nor a value derived from it")
    }
}
