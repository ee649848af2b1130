import BLE
import BLESimulator
import EngineTestSupport
import Foundation
import Testing
import Workflow
@testable import Engine
import YAML
import Synchronization
import SystemIO

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
        #expect(report.summary.outcomes[.succeeded] == 24)
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
        #expect(report.summary.outcomes[.succeeded] == 60)
        let peak = try #require(report.run.peakConcurrency)
        #expect(peak <= 12)
        let links = try #require(report.run.adapters.first?.peakLinks)
        #expect(links <= 5)
        #expect(links >= 2, "the run should actually use several slots at once")
        // Measured on the device side too: the simulator never held more links than the slots.
        #expect(sim.peakLinkCount <= 5)
        #expect(sim.peakLinkCount >= 2)
    }

    /// Units the fixture cannot find (`not_found`) point to the fixture: the line stops.
    @Test func stoppingTheLineSkipsTheRestAndSaysSo() async throws {
        let line = try TestLine()
        defer { line.remove() }
        var faults: [Int: String] = [:]
        for n in 1...4 { faults[n] = "{ faults: { no_advertise: true } }" }
        let loaded = try line.load(try line.write(count: 30, faults: faults))
        let sim = try line.simulator(loaded)
        var options = line.options()
        options.concurrency = 1
        options.maxFailures = .count(3)
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [sim], options: options)
        #expect(report.run.stopped?.reason == .failureThreshold)
        #expect(report.summary.outcomes[.failed] == 3)
        #expect(report.summary.outcomes[.skipped] == 27)
        #expect(report.devices.filter { $0.outcome == .skipped }.allSatisfy { $0.skipReason?.contains("line stopped") == true })
        #expect(report.run.stopped?.message.contains("3 of 3 finished devices failed in ways that point to the fixture (threshold 3 failure(s)): not_found 3") == true,
                "\(report.run.stopped?.message ?? "")")
    }

    /// Units the product rejects (old firmware: `verify_failed`) say nothing of the fixture: the line
    /// goes on; failures in a row stop it when asked.
    @Test func productRejectsDoNotStopTheLineButFailuresInARowCan() async throws {
        let line = try TestLine()
        defer { line.remove() }
        var faults: [Int: String] = [:]
        for n in 1...4 { faults[n] = "{ firmware: \"1.0.0\" }" }
        let loaded = try line.load(try line.write(count: 8, faults: faults))
        var options = line.options()
        options.concurrency = 1
        options.maxFailures = .count(3)
        let kept = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                        adapters: [try line.simulator(loaded)], options: options)
        #expect(kept.run.stopped == nil)
        #expect(kept.summary.outcomes[.failed] == 4 && kept.summary.outcomes[.succeeded] == 4)

        var inARow = line.options("in-a-row")
        inARow.concurrency = 1
        inARow.maxConsecutiveFailures = 3
        let stopped = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                           adapters: [try line.simulator(loaded)], options: inARow)
        #expect(stopped.run.stopped?.reason == .failureThreshold)
        #expect(stopped.run.stopped?.message == "line stopped: 3 devices failed in a row (--max-consecutive-failures 3); no fixture failure, product rejects 3")
        #expect(stopped.summary.outcomes[.failed] == 3 && stopped.summary.outcomes[.skipped] == 5)
    }

    @Test func resumeSkipsSucceededDevicesAndRunsTheRest() async throws {
        let line = try TestLine()
        defer { line.remove() }
        var faults: [Int: String] = [:]
        for n in [3, 4] { faults[n] = "{ faults: { no_advertise: true } }" }
        let paths = try line.write(count: 12, faults: faults)
        let loaded = try line.load(paths)
        let statePath = line.directory + "/sim.state"
        var options = line.options()
        options.concurrency = 1
        options.maxFailures = .count(2)
        let first = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                         adapters: [try line.simulator(loaded, statePath: statePath)], options: options)
        #expect(first.summary.outcomes[.succeeded] == 2)
        #expect(first.summary.outcomes[.skipped] == 8)

        options.resume = true
        options.maxFailures = nil
        let sim = try line.simulator(loaded, statePath: statePath)
        let second = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [sim], options: options)
        #expect(second.run.resumed)
        #expect(second.summary.outcomes[.succeeded] == 10)
        #expect(second.summary.outcomes[.failed] == 2)
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

    /// A journal as a run cut after SN-0002's and SN-0003's commit intents leaves it (SN-0003 recorded
    /// `interrupted`, as a second Ctrl-C records it), closed again before a run resumes it.
    static func journalCutAfterTwoCommitIntents(_ loaded: TestLine.Loaded, _ options: TestRunOptions) async throws {
        let t = wallTime("2026-11-30T05:00:00.000Z")
        let cut = DeviceRecord(id: "SN-0003", address: nil, name: nil, outcome: .interrupted, attempts: 1,
                               error: FailureRecord(kind: .interrupted, step: "commit", message: "cut while stopping"))
        try await TestLine.writeJournal(options.journalPath, for: loaded, at: t, [
            .started(device: "SN-0002", attempt: 1, at: t), .intent(device: "SN-0002", step: "commit", stepIndex: 10, at: t),
            .started(device: "SN-0003", attempt: 1, at: t), .intent(device: "SN-0003", step: "commit", stepIndex: 10, at: t),
            .outcome(cut, at: t),
        ])
    }

    /// Without a `confirm` read, a device whose commit may have gone out is never touched again.
    @Test func aDeviceCutAfterAnIrreversibleWriteNeedsReviewOnResume() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 3, workflow: TestLine.workflow(confirm: false))
        let loaded = try line.load(paths)
        var options = line.options()
        try await Self.journalCutAfterTwoCommitIntents(loaded, options)
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
        #expect(report.summary.outcomes[.succeeded] == 1)
    }

    /// With a `confirm` read, the same journal is settled by asking the devices before anything is sent:
    /// SN-0003's commit had reached it (it ends `succeeded`, committed once, its set-up not sent again);
    /// SN-0002's had not (it runs as a first run and is committed once). Nobody needs review.
    @Test func aDeviceCutAfterAConfirmableCommitIsSettledByItsConfirmReadOnResume() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let loaded = try line.load(try line.write(count: 3))
        let statePath = line.directory + "/sim.state"
        // SN-0003 was committed on the device before the run was cut (its ack never recorded).
        let prior = try line.load((loaded.workflow.path, loaded.inventory.path), limit: "SN-0003")
        let before = try await Runner.run(workflow: prior.workflow, inventory: prior.inventory, devices: prior.devices,
                                          adapters: [try line.simulator(prior, statePath: statePath)], options: line.options("prior"))
        #expect(before.devices.map(\.outcome) == [.succeeded])
        var options = line.options()
        try await Self.journalCutAfterTwoCommitIntents(loaded, options)
        options.resume = true
        let sim = try line.simulator(loaded, statePath: statePath)
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [sim], options: options)
        #expect(report.devices.map(\.outcome) == [.succeeded, .succeeded, .succeeded], "\(report.summary.errors)")
        let dump = await sim.dump()
        #expect(dump.devices.allSatisfy { $0.commits == 1 }, "\(dump.devices.map { "\($0.id): \($0.commits)" })")
        #expect(dump.device("SN-0003")?.connections == 2, "asked once more, nothing sent")
        let d3 = try #require(report.devices.first { $0.id == "SN-0003" })
        let commit = try #require(d3.steps.firstIndex { $0.name == "commit" })
        let sends: Set<StepKind> = ["await", "write", "write_blob"]
        #expect(d3.steps[..<commit].allSatisfy { $0.outcome == (sends.contains($0.kind) ? .skipped : .succeeded) },
                "\(d3.steps.map { "\($0.name) \($0.kind) \($0.outcome)" })")
        #expect(d3.steps[..<commit].contains { $0.outcome == .skipped })
        #expect(d3.steps[commit...].allSatisfy { $0.outcome == .succeeded } && d3.steps[commit].attempts == 1)
        let d2 = try #require(report.devices.first { $0.id == "SN-0002" })
        #expect(d2.steps.allSatisfy { $0.outcome == .succeeded }, "SN-0002 ran as a first run")
        #expect(d2.attempts == 2 && d2.resumed == true)
        // The journal is settled: a second resume touches nobody.
        let again = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                         adapters: [try line.simulator(loaded, statePath: statePath)], options: options)
        #expect(again.devices.allSatisfy { $0.outcome == .succeeded && $0.carriedOver == true })
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
        #expect((report.summary.outcomes[.succeeded]) >= 7)
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

    @Test func junitHasATestSuitePerDeviceAndATestCasePerStep() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let loaded = try line.load(try line.write(count: 3, faults: [2: "{ firmware: \"1.0.0\" }"]))
        var options = line.options()
        options.junitPath = line.directory + "/junit.xml"
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [try line.simulator(loaded)], options: options)
        let xml = try String(contentsOfFile: line.directory + "/junit.xml", encoding: .utf8)
        let steps = report.devices.map(\.steps.count).reduce(0, +)
        #expect(steps == 3 * loaded.workflow.steps.count)
        #expect(xml.components(separatedBy: "<testsuite ").count - 1 == 3)
        #expect(xml.components(separatedBy: "<testcase ").count - 1 == steps)
        #expect(xml.contains("<testsuite name=\"SN-0002\" tests=\"\(loaded.workflow.steps.count)\" failures=\"1\""))
        #expect(xml.contains("<failure type=\"verify_failed\""))
        #expect(xml.contains("<property name=\"captured.fw\" value=\"1.0.0\"/>"))
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
        #expect(report.summary.outcomes[.succeeded] == 8, "\(report.summary.errors)")
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
        let first = try FileJournal(path: path, fsync: false)
        #expect(throws: FileError.self) { _ = try FileJournal(path: path, fsync: false) }
        _ = first
    }
}

/// Resume, selection, stopping and a journal that cannot be written, on the simulated line.
@Suite struct RunnerResumeAndStopTests {
    /// A store that fails as a full disk does after `limit` lines: the failing line and everything after
    /// it is refused (ENOSPC) and never written.
    actor FullDiskStore: RunStore {
        let inner: FileJournal
        let limit: Int
        private var count = 0
        private var failed = false
        nonisolated var location: String { inner.location }

        init(path: String, limit: Int) throws {
            inner = try FileJournal(path: path, fsync: false)
            self.limit = limit
        }

        func open(_ mode: RunStoreMode) async throws -> JournalContents { try await inner.open(mode) }

        func record(_ line: JournalLine) async throws {
            count += 1
            if count > limit { failed = true }
            if failed { throw FileError(path: location, operation: "write", errno: ENOSPC) }
            try await inner.record(line)
        }

        func flush() async throws {
            if failed { throw FileError(path: location, operation: "write", errno: ENOSPC) }
            try await inner.flush()
        }

        func close() async { await inner.close() }
    }

    /// Collects events.
    final class Recorder: RunEventSink {
        let events = Mutex<[RunEvent]>([])
        func emit(_ event: RunEvent) { events.withLock { $0.append(event) } }
        func finish() async {}
    }

    /// (The commit without a `confirm` read: with one, the torn device is asked instead, as in
    /// `aDeviceCutAfterAConfirmableCommitIsSettledByItsConfirmReadOnResume`.)
    @Test func aTornJournalIsResumedAgainAndAgain() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let loaded = try line.load(try line.write(count: 6, workflow: TestLine.workflow(confirm: false)))
        let statePath = line.directory + "/sim.state"
        var options = line.options()
        options.concurrency = 2
        _ = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                 adapters: [try line.simulator(loaded, statePath: statePath)], options: options)
        // A crash (or a full disk) while the last outcome was being written: its line is cut in half.
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: options.journalPath)))
        let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: true)
        let outcome = try #require(lines.last { String(decoding: $0, as: UTF8.self).contains("\"type\":\"outcome\"") })
        let tornID = try #require(loaded.devices.map(\.id).first { String(decoding: outcome, as: UTF8.self).contains("\"id\":\"\($0)\"") })
        let cutAt = outcome.startIndex + outcome.count / 2
        let torn = Array(bytes[outcome.startIndex..<cutAt])
        bytes = Array(bytes[..<cutAt])
        try Data(bytes).write(to: URL(fileURLWithPath: options.journalPath))

        options.resume = true
        for round in 1...3 {
            let sim = try line.simulator(loaded, statePath: statePath)
            let events = Recorder()
            let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                              adapters: [sim], options: options, events: EventBus([events]))
            // The torn device sent its commit (the intent is on disk) and its outcome is lost: it needs review.
            let torn = try #require(report.devices.first { $0.id == tornID })
            #expect(torn.error?.kind == .needsReview, "round \(round)")
            #expect(report.devices.filter { $0.id != tornID }.allSatisfy { $0.outcome == .succeeded && $0.carriedOver == true }, "round \(round)")
            let repaired = events.events.withLock { $0.filter { $0.type == .journalRepaired } }
            #expect(repaired.count == (round == 1 ? 1 : 0))
            let dump = await sim.dump()
            #expect(dump.devices.allSatisfy { $0.commits == 1 && $0.connections == 1 }, "no device touched again")
        }
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: options.journalPath + ".torn"))) == torn + [0x0A])
        #expect(try !JournalState.read(path: options.journalPath).truncatedTail)
    }

    @Test func aResumeWithoutLimitKeepsTheSelectionAndAnotherOneIsRefused() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 6)
        let limited = try line.load(paths, limit: "SN-0002,SN-0004")
        var options = line.options()
        options.reportOptions = ["limit": "SN-0002,SN-0004"]
        let statePath = line.directory + "/sim.state"
        _ = try await Runner.run(workflow: limited.workflow, inventory: limited.inventory, devices: limited.devices,
                                 adapters: [try line.simulator(limited, statePath: statePath)], options: options)
        options.resume = true
        options.reportOptions = [:]
        let all = try line.load(paths)
        let sim = try line.simulator(all, statePath: statePath)
        let report = try await Runner.run(workflow: all.workflow, inventory: all.inventory, devices: all.devices,
                                          adapters: [sim], options: options)
        #expect(report.devices.map(\.id) == ["SN-0002", "SN-0004"], "the journal's selection, not the whole inventory")
        #expect(report.summary.total == 2)
        let dump = await sim.dump()
        #expect(dump.devices.filter { $0.connections > 0 }.map(\.id) == ["SN-0002", "SN-0004"])
        let other = try line.load(paths, limit: "SN-0001")
        do {
            _ = try await Runner.run(workflow: other.workflow, inventory: other.inventory, devices: other.devices,
                                     adapters: [try line.simulator(other)], options: options)
            Issue.record("a resume with another selection was accepted")
        } catch let e as Runner.StartError {
            #expect(e.description.contains("the journal's run selected 2 device(s) (--limit SN-0002,SN-0004); this resume selects 1"), "\(e)")
        }
    }

    @Test func resumingAJournalThatDoesNotExistIsRefusedAndCreatesNothing() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let loaded = try line.load(try line.write(count: 2))
        var options = line.options()
        options.resume = true
        do {
            _ = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                     adapters: [try line.simulator(loaded)], options: options)
            Issue.record("resumed a journal that does not exist")
        } catch let e as Runner.StartError {
            #expect(e.description.hasPrefix("cannot resume:"), "\(e)")
        }
        #expect(!FileManager.default.fileExists(atPath: options.journalPath))
    }

    @Test func anIrreversibleWriteThatCouldNotGoOutIsAPlainFailureNotADoubt() async throws {
        let line = try TestLine()
        defer { line.remove() }
        // FFF2 is read-only: the write is refused before it is sent (the characteristic does not allow it).
        let workflow = """
            name: refused
            steps:
              - scan: { name: "${name}", timeout: 500ms }
              - connect: { timeout: 1s }
              - write: { service: FFF0, characteristic: FFF2, value: { hex: "02" }, irreversible: true }
            """
        let loaded = try line.load(try line.write(count: 1, workflow: workflow))
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [try line.simulator(loaded)], options: line.options())
        #expect(report.devices.first?.error?.kind == .unsupportedProperty, "\(report.devices.first?.error?.message ?? "")")
    }

    @Test func theFailureThresholdIsRecordedOnlyWhenItSkippedSomething() async throws {
        let line = try TestLine()
        defer { line.remove() }
        var faults: [Int: String] = [:]
        for n in 1...3 { faults[n] = "{ faults: { no_advertise: true } }" }
        let loaded = try line.load(try line.write(count: 3, faults: faults))
        var options = line.options()
        options.concurrency = 1
        options.maxFailures = .count(3)
        let events = Recorder()
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [try line.simulator(loaded)], options: options, events: EventBus([events]))
        // The third failure was the last device: nothing was left to skip, so the line did not "stop".
        #expect(report.summary.outcomes[.failed] == 3)
        #expect(report.summary.outcomes[.skipped] == 0)
        #expect(report.run.stopped == nil)
        // The run's last event says what happened in words.
        let finished = try #require(events.events.withLock { $0.last })
        #expect(finished.kind == .runFinished(message: "3 device(s): 0 succeeded, 3 failed", total: 3))
    }

    @Test func aJournalThatCannotBeWrittenStopsTheRunWritesTheReportAndStaysResumable() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let count = 24
        let loaded = try line.load(try line.write(count: count))
        let statePath = line.directory + "/sim.state"
        var options = line.options()
        options.concurrency = 4
        // The disk fills after 30 lines: mid-run, with devices in flight.
        options.store = try FullDiskStore(path: options.journalPath, limit: 30)
        let first = try line.simulator(loaded, latency: 0.05, statePath: statePath)
        var failure: Runner.JournalFailure?
        do {
            _ = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                     adapters: [first], options: options)
        } catch let e as Runner.JournalFailure {
            failure = e
        }
        let f = try #require(failure, "the run must say the journal failed")
        #expect(f.error.contains("No space left on device"))
        #expect(f.description.contains("resume with --resume \(options.journalPath)"))
        // The report was written, and says why the run stopped.
        let report = try RunReport.read(from: options.reportPath)
        #expect(f.report?.run == report.run && f.report?.summary == report.summary)
        #expect(f.report?.notSucceeded.map(\.id) == report.devices.filter { $0.outcome != .succeeded }.map(\.id))
        #expect(report.run.stopped?.reason == .journalFailed)
        #expect((report.summary.outcomes[.skipped]) > 0, "no new device started after the failure")
        // No irreversible write went out without its intent on disk.
        let dump = await first.dump()
        let refused = report.devices.filter { $0.error?.message.contains("could not be recorded in ") == true }
        #expect(!refused.isEmpty, "devices in flight reached their commit after the failure")
        for r in refused {
            #expect(r.outcome == .interrupted)
            #expect(r.error?.message.contains("could not be recorded in \(options.journalPath)") == true, "the store is named: \(r.error?.message ?? "")")
            #expect(dump.device(r.id)?.commits == 0, "\(r.id) was committed without a durable intent")
        }
        #expect(dump.devices.allSatisfy { $0.commits <= 1 })

        // Room again: the journal resumes, and every device ends exactly once.
        options.store = nil
        options.resume = true
        let sim = try line.simulator(loaded, latency: 0, statePath: statePath)
        let resumed = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                           adapters: [sim], options: options)
        #expect(resumed.devices.count == count)
        #expect(resumed.devices.allSatisfy { $0.outcome == .succeeded || $0.error?.kind == .needsReview }, "\(resumed.summary.errors)")
        let after = await sim.dump()
        for r in resumed.devices {
            let commits = after.device(r.id)?.commits ?? -1
            #expect(commits <= 1, "\(r.id) committed \(commits) times")
            if r.outcome == .succeeded { #expect(commits == 1) }
        }
    }

    @Test func withHalfTheAcksLostEveryDeviceIsProvisionedAndCommittedOnce() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let count = 120
        var faults: [Int: String] = [:]
        for n in 1...count { faults[n] = "{ faults: { ack_loss: 0.5 } }" }
        let loaded = try line.load(try line.write(count: count, workflow: TestLine.workflow(ackTimeout: "150ms", resend: "[20ms, 20ms, 20ms]", retryAttempts: 8),
                                                  faults: faults))
        let sim = try line.simulator(loaded, seed: 12)
        var options = line.options()
        options.concurrency = 40
        let report = try await Runner.run(workflow: loaded.workflow, inventory: loaded.inventory, devices: loaded.devices,
                                          adapters: [sim], options: options)
        #expect(report.summary.outcomes[.succeeded] == count, "\(report.summary.errors)")
        let dump = await sim.dump()
        #expect(dump.devices.reduce(0) { $0 + ($1.faults["ack_loss"] ?? 0) } >= count, "the seed should lose many acks")
        var restreamed = 0
        for device in loaded.devices {
            let d = try #require(dump.device(device.id))
            let blobPath = loaded.inventory.baseDirectory + "/" + (device.vars["blob"] ?? "")
            #expect(d.state == "02" && d.config == device.vars["config"], "\(device.id)")
            #expect(d.blob?.sha256 == (try TestLine.sha256(ofFile: blobPath)) && d.blob?.ended == true, "\(device.id) blob")
            // Exactly one successful commit: a lost commit ack is settled by reading the state.
            #expect(d.commits == 1, "\(device.id) committed \(d.commits) times")
            #expect(d.commands.filter { $0.opcode == "02" && $0.status == "00" }.count == 1)
            // `04` is never re-sent: a lost `04` ack is recovered by a new `03` and the blob again.
            let codes = d.commands.map { ($0.opcode ?? "") + ($0.status ?? "") }
            #expect(!codes.contains("0401"), "\(device.id) re-sent 04: \(codes)")
            if let firstEnd = codes.firstIndex(of: "0400"), codes[(firstEnd + 1)...].contains("0300") { restreamed += 1 }
        }
        #expect(restreamed > 0, "some device lost a 04 ack and streamed its blob again")
    }
}
