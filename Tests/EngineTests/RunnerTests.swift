import BLE
import BLESimulator
import Foundation
import Testing
import Workflow
@testable import Engine
import TestSupport
import YAML

@Suite struct RunnerTests {
    @Test func everyDeviceIsProvisionedExactlyAsTheInventorySays() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let loaded = try line.load(try line.write(count: 24))
        let sim = try line.simulator(loaded)
        var options = line.options()
        options.concurrency = 8
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [sim], options: options)
        #expect(report.summary.outcomes["succeeded"] == 24)
        #expect(report.devices.allSatisfy { $0.outcome == .succeeded && $0.error == nil })
        #expect(report.run.simulated)
        let dump = await sim.dump()
        for device in loaded.devices {
            let d = try #require(dump.device(device.id))
            #expect(d.config == device.vars["config"], "device \(device.id) config")
            let blobPath = loaded.inventory.baseDirectory + "/" + (device.vars["blob"] ?? "")
            #expect(d.blob?.sha256 == (try TestLine.sha256(ofFile: blobPath)), "device \(device.id) blob")
            #expect(d.blob?.ended == true)
            #expect(d.state == "02")
            #expect(d.commits == 1)
            #expect(d.connections == 1)
        }
        // The report was written and reads back the same.
        let back = try RunReport.read(from: options.reportPath)
        #expect(back == report)
        #expect(back.devices.first?.captured["serial"] == "SN-0001")
        #expect((back.summary.attRoundTripsPerDevice ?? 0) > 10)
    }

    @Test func aFaultMixEndsEveryDeviceInADefiniteOutcomeWithTheRightKind() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let faults: [Int: String] = [
            2: "{ faults: { no_advertise: true } }",
            3: "{ firmware: \"1.9.0\" }",
            4: "{ faults: { connect_fail: 1.0 } }",
            5: "{ faults: { ack_loss: 1.0 } }",
            6: "{ faults: { busy_ack: 1.0 } }",
            7: "{ faults: { drop: 1.0 } }",
        ]
        let loaded = try line.load(try line.write(count: 10, faults: faults))
        let sim = try line.simulator(loaded)
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [sim], options: line.options())
        func record(_ n: Int) throws -> DeviceRecord {
            try #require(report.devices.first { $0.id == String(format: "SN-%04d", n) })
        }
        #expect(try record(1).outcome == .succeeded)
        #expect(try record(2).error?.kind == .notFound)
        #expect(try record(2).error?.step == "scan")
        #expect(try record(3).error?.kind == .verifyFailed)
        #expect(try record(3).captured["fw"] == "1.9.0")
        #expect(try record(4).error?.kind == .connectFailed)
        #expect(try record(4).steps.first { $0.kind == "connect" }?.attempts == 2)
        #expect(try record(5).error?.kind == .timeout)
        #expect(try record(5).error?.step == "set configuration")
        #expect(try record(6).error?.kind == .busy)
        #expect(try record(7).error?.kind == .disconnected)
        for n in 8...10 { #expect(try record(n).outcome == .succeeded) }
        #expect(report.summary.errors == ["not_found": 1, "verify_failed": 1, "connect_failed": 1, "timeout": 1, "busy": 1, "disconnected": 1])
        // The device side agrees: the old-firmware unit and the busy one were never committed.
        let dump = await sim.dump()
        #expect(dump.device("SN-0003")?.commits == 0)
        #expect(dump.device("SN-0006")?.commits == 0)
        #expect(dump.device("SN-0006")?.config == nil)
        // Lost acks: the command was executed although its ack never came.
        #expect(dump.device("SN-0005")?.config != nil)
    }

    @Test func concurrencyAndAdapterSlotsAreNeverExceeded() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let loaded = try line.load(try line.write(count: 60))
        let sim = try line.simulator(loaded, latency: 0.05)
        var options = line.options()
        options.concurrency = 12
        options.slotsPerAdapter = 5
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [sim], options: options)
        #expect(report.summary.outcomes["succeeded"] == 60)
        let peak = try #require(report.run.peakConcurrency)
        #expect(peak <= 12)
        let links = try #require(report.run.adapters.first?.peakLinks)
        #expect(links <= 5)
        #expect(links >= 2, "the run should actually use several slots at once")
        // Measured on the device side too: the simulator never held more links than the slots.
        #expect(sim.peakLinkCount <= 5)
        #expect(sim.peakLinkCount >= 2)
    }

    @Test func stoppingTheLineSkipsTheRestAndSaysSo() async throws {
        let line = try TestLine()
        defer { line.remove() }
        var faults: [Int: String] = [:]
        for n in 1...4 { faults[n] = "{ firmware: \"1.0.0\" }" }
        let loaded = try line.load(try line.write(count: 30, faults: faults))
        let sim = try line.simulator(loaded)
        var options = line.options()
        options.concurrency = 1
        options.maxFailures = .count(3)
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [sim], options: options)
        #expect(report.run.stopped?.reason == "failure_threshold")
        #expect(report.summary.outcomes["failed"] == 3)
        #expect(report.summary.outcomes["skipped"] == 27)
        #expect(report.devices.filter { $0.outcome == .skipped }.allSatisfy { $0.skipReason?.contains("line stopped") == true })
    }

    @Test func resumeSkipsSucceededDevicesAndRunsTheRest() async throws {
        let line = try TestLine()
        defer { line.remove() }
        var faults: [Int: String] = [:]
        for n in [3, 4] { faults[n] = "{ firmware: \"1.0.0\" }" }
        let paths = try line.write(count: 12, faults: faults)
        let loaded = try line.load(paths)
        let statePath = line.directory + "/sim.state"
        var options = line.options()
        options.concurrency = 1
        options.maxFailures = .count(2)
        let first = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                         adapters: [try line.simulator(loaded, statePath: statePath)], options: options)
        #expect(first.summary.outcomes["succeeded"] == 2)
        #expect(first.summary.outcomes["skipped"] == 8)

        options.resume = true
        options.maxFailures = nil
        let sim = try line.simulator(loaded, statePath: statePath)
        let second = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [sim], options: options)
        #expect(second.run.resumed)
        #expect(second.summary.outcomes["succeeded"] == 10)
        #expect(second.summary.outcomes["failed"] == 2)
        #expect(second.devices[0].carriedOver == true)
        #expect(second.devices[2].carriedOver == true, "a recorded failure is carried over, not retried")
        #expect(second.devices[5].carriedOver == nil)
        let dump = await sim.dump()
        // Devices that succeeded in the first run were not connected again.
        #expect(dump.device("SN-0001")?.connections == 1)
        #expect(dump.device("SN-0001")?.commits == 1)
        #expect(dump.devices.allSatisfy { $0.commits <= 1 })
    }

    @Test func resumeRefusesAJournalOfAnotherWorkflow() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 2)
        let loaded = try line.load(paths)
        var options = line.options()
        _ = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                 adapters: [try line.simulator(loaded)], options: options)
        try Data(TestLine.workflow(ackTimeout: "400ms").utf8).write(to: URL(fileURLWithPath: paths.workflow))
        let changed = try line.load(paths)
        options.resume = true
        do {
            _ = try await Runner.run(workflow: changed.workflow, inventory: changed.inventory, devices: changed.devices,
                                     adapters: [try line.simulator(changed)], options: options)
            Issue.record("a journal of another workflow version was resumed")
        } catch let e as Runner.StartError {
            #expect(e.description.contains("the workflow changed"), "\(e)")
        }
    }

    @Test func aDeviceCutAfterAnIrreversibleWriteNeedsReviewOnResume() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 3)
        let loaded = try line.load(paths)
        var options = line.options()
        // A journal as a crashed run leaves it (closed again before the run resumes it).
        do {
            let journal = try Journal(path: options.journalPath, fsync: false)
            let header = JournalHeader(runId: "run-x", workflow: FileRef(name: loaded.workflow.name, path: loaded.workflow.path, sha256: loaded.workflow.sha256),
                                       inventory: FileRef(path: loaded.inventory.path, sha256: loaded.inventory.sha256), adapters: ["sim"],
                                       options: [:], started: "t", toolVersion: "test", resumed: false)
            try await journal.append(JournalLine(type: "header", at: "t", header: header), durable: true)
            try await journal.append(JournalLine(type: "started", at: "t", device: "SN-0002", attempt: 1), durable: false)
            try await journal.append(JournalLine(type: "intent", at: "t", device: "SN-0002", step: "commit", stepIndex: 10), durable: true)
            // SN-0003 was cut (second Ctrl-C) after its commit intent: its `interrupted` outcome does not clear it.
            try await journal.append(JournalLine(type: "started", at: "t", device: "SN-0003", attempt: 1), durable: false)
            try await journal.append(JournalLine(type: "intent", at: "t", device: "SN-0003", step: "commit", stepIndex: 10), durable: true)
            let cut = DeviceRecord(id: "SN-0003", address: nil, name: nil, outcome: .interrupted, attempts: 1,
                                   error: FailureRecord(kind: .interrupted, step: "commit", message: "cut while stopping"))
            try await journal.append(JournalLine(type: "outcome", at: "t", record: cut), durable: true)
        }
        options.resume = true
        let sim = try line.simulator(loaded)
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [sim], options: options)
        let d2 = try #require(report.devices.first { $0.id == "SN-0002" })
        #expect(d2.outcome == .failed)
        #expect(d2.error?.kind == .needsReview)
        #expect(d2.error?.step == "commit")
        let d3 = try #require(report.devices.first { $0.id == "SN-0003" })
        #expect(d3.error?.kind == .needsReview)
        let dump = await sim.dump()
        #expect(dump.device("SN-0002")?.connections == 0, "a device that may be committed is not touched again")
        #expect(dump.device("SN-0003")?.connections == 0)
        #expect(report.summary.outcomes["succeeded"] == 1)
    }

    @Test func secretsNeverReachTheReportOrTheJournal() async throws {
        let line = try TestLine()
        defer { line.remove() }
        var paths = try line.write(count: 2)
        // Make `config` secret.
        var inv = try String(contentsOfFile: paths.inventory, encoding: .utf8)
        inv = "secrets: [config]\n" + inv
        try Data(inv.utf8).write(to: URL(fileURLWithPath: paths.inventory))
        // A verify that quotes the secret value in its failure message.
        var wf = TestLine.workflow()
        wf = wf.replacingOccurrences(of: "  - disconnect: {}", with: "  - verify: { value: \"${config}\", equals: \"nope\" }\n  - disconnect: {}")
        try Data(wf.utf8).write(to: URL(fileURLWithPath: paths.workflow))
        paths = (paths.workflow, paths.inventory)
        let loaded = try line.load(paths)
        let options = line.options()
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [try line.simulator(loaded)], options: options)
        #expect(report.devices.allSatisfy { $0.error?.kind == .verifyFailed })
        let reportText = try String(contentsOfFile: options.reportPath, encoding: .utf8)
        let journalText = try String(contentsOfFile: options.journalPath, encoding: .utf8)
        for d in loaded.devices {
            let secret = try #require(d.vars["config"])
            #expect(!reportText.contains(secret))
            #expect(!journalText.contains(secret))
        }
        #expect(reportText.contains("***"))
    }

    @Test func linkDropsMidWorkflowAreRecoveredByReconnectAndRetry() async throws {
        let line = try TestLine()
        defer { line.remove() }
        var faults: [Int: String] = [:]
        for n in 1...10 { faults[n] = "{ faults: { drop: 0.08 } }" }
        let loaded = try line.load(try line.write(count: 10, workflow: TestLine.workflow(retryAttempts: 4, reconnect: "{ attempts: 3, delay: 10ms }"), faults: faults))
        let sim = try line.simulator(loaded, seed: 7)
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [sim], options: line.options())
        let dump = await sim.dump()
        let dropped = dump.devices.reduce(0) { $0 + ($1.faults["drop"] ?? 0) }
        #expect(dropped >= 3, "the seed should drop several links")
        // Most devices get through despite the drops; every one ends definitely, none committed twice.
        #expect((report.summary.outcomes["succeeded"] ?? 0) >= 7)
        for d in report.devices {
            #expect(d.outcome == .succeeded || d.error?.kind == .disconnected || d.error?.kind == .timeout, "\(d.id): \(d.error?.message ?? "")")
        }
        #expect(dump.devices.allSatisfy { $0.commits <= 1 })
        let reconnected = dump.devices.filter { $0.connections > 1 }
        #expect(!reconnected.isEmpty, "some devices were reconnected")
        for d in reconnected where report.devices.first(where: { $0.id == d.id })?.outcome == .succeeded {
            #expect(d.state == "02")
        }
    }

    @Test func junitHasOneTestCasePerDevice() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let loaded = try line.load(try line.write(count: 3, faults: [2: "{ firmware: \"1.0.0\" }"]))
        var options = line.options()
        options.junitPath = line.directory + "/junit.xml"
        _ = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                 adapters: [try line.simulator(loaded)], options: options)
        let xml = try String(contentsOfFile: line.directory + "/junit.xml", encoding: .utf8)
        #expect(xml.components(separatedBy: "<testcase ").count - 1 == 3)
        #expect(xml.contains("tests=\"3\" failures=\"1\""))
        #expect(xml.contains("<failure type=\"verify_failed\""))
        #expect(xml.contains("name=\"SN-0002\""))
    }

    @Test func aDeviceWhoseLinksKeepFailingOnOneAdapterIsRetriedOnAnotherThatHearsIt() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let loaded = try line.load(try line.write(count: 8, workflow: TestLine.workflow(retryAttempts: 3)))
        let model = try DeviceModel.load(path: line.directory + "/models/sensor-v2.yaml")
        // Two radios hearing the same line: on "weak" every connection fails (a bad antenna); "good" works.
        func central(_ id: String, faults: String?) throws -> SimulatedCentral {
            let specs = try loaded.inventory.devices.map { d -> SimulatedDeviceSpec in
                let overrides = try faults.map { try #require(try YAMLParser().parse("faults: \($0)")) }
                return SimulatedDeviceSpec(id: d.id, name: d.name, address: d.address, variables: d.vars, overrides: overrides)
            }
            return try SimulatedCentral(models: [model.name: model], devices: specs, defaultModel: model.name,
                                        options: SimulatorOptions(id: id, seed: 3, latencyScale: 0))
        }
        let weak = try central("weak", faults: "{ connect_fail: 1.0 }")
        let good = try central("good", faults: nil)
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [weak, good], options: line.options())
        #expect(report.summary.outcomes["succeeded"] == 8, "\(report.summary.errors)")
        #expect(report.devices.allSatisfy { $0.adapter == "good" })
        // Some devices were sent to the weak radio first and moved after its connect failed.
        let moved = report.devices.filter { ($0.steps.first { $0.kind == "connect" }?.attempts ?? 0) > 1 }
        #expect(!moved.isEmpty, "the seed sends some devices to the weak radio first")
        let weakDump = await weak.dump()
        #expect(weakDump.devices.reduce(0) { $0 + $1.connectAttempts } == moved.count)
        let goodDump = await good.dump()
        #expect(goodDump.devices.allSatisfy { $0.commits == 1 })
    }

    @Test func aJournalInUseByAnotherRunIsRefused() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let path = line.directory + "/locked.journal"
        let first = try Journal(path: path, fsync: false)
        #expect(throws: FileError.self) { _ = try Journal(path: path, fsync: false) }
        _ = first
    }
}
