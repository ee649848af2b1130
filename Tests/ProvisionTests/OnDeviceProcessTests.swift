import Engine
import EngineTestSupport
import Foundation
import Testing
import TestSupport

/// `provision run --on-device CMD`: a command per finished device with its record on standard input;
/// one that fails or hangs is recorded — in the report's `run.on_device` — and stopped, never fatal to
/// the run; a run the operator stops writes its report without waiting for the hooks not yet started.
@Suite(.serialized, .timeLimit(.minutes(2))) struct OnDeviceProcessTests {
    @Test func eachFinishedDeviceRunsTheHookWithItsRecordAndAFailingOrHangingHookNeverStopsTheLine() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 4, faults: [4: "{ firmware: \"1.0.0\" }"])
        try FileManager.default.createDirectory(atPath: line.directory + "/labels", withIntermediateDirectories: true)
        // A label printer: keeps the record; SN-0002's printer is out of paper, SN-0003's hangs.
        let hook = """
            cat > "labels/$PROVISION_DEVICE.$PROVISION_OUTCOME.json"; \
            if [ "$PROVISION_DEVICE" = SN-0002 ]; then echo 'out of paper' >&2; exit 3; fi; \
            if [ "$PROVISION_DEVICE" = SN-0003 ]; then exec sleep 30; fi
            """
        let base = ["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet", "--sim-latency", "0", "--concurrency", "1"]
        // The same run without hooks: what the hooks must not change.
        let plain = try await RunProcessTests.run(base + ["--report", "plain.json"], in: line.directory)
        let without = try RunReport.read(from: line.directory + "/plain.json")
        #expect(plain.status == 1 && without.devices.map(\.outcome) == [.succeeded, .succeeded, .succeeded, .failed], "SN-0004's old firmware fails it")
        #expect(without.run.onDevice == nil)
        #expect(!(try String(contentsOfFile: line.directory + "/plain.json", encoding: .utf8)).contains("on_device"), "no hook, no key")

        let child = try ChildProcess(base + ["--report", "r.json", "--on-device", hook, "--on-device-timeout", "1s"], directory: line.directory)
        for await _ in child.lines {}
        let stderr = await child.stderr()
        #expect(await child.wait() == plain.status, "the hooks change nothing: \(stderr)")
        let report = try RunReport.read(from: line.directory + "/r.json")
        #expect(report.devices.map(\.outcome) == without.devices.map(\.outcome))
        #expect(report.devices.map { $0.error?.kind } == without.devices.map { $0.error?.kind })
        #expect(report.summary.outcomes == without.summary.outcomes)
        // The report records what the hooks did: the auditable record, not only stderr.
        #expect(report.run.onDevice == OnDeviceInfo(command: hook, timeoutMs: 1000, run: 4, failed: [
            OnDeviceInfo.Failure(device: "SN-0002", message: "exit status 3"),
            OnDeviceInfo.Failure(device: "SN-0003", message: "did not finish within 1s (stopped)"),
        ]), "\(String(describing: report.run.onDevice))")
        // Every finished device's record went to the hook, as the report has it.
        for d in report.devices {
            let path = line.directory + "/labels/\(d.id).\(d.outcome.rawValue).json"
            let record = try DeviceRecord.read(json: Data(contentsOf: URL(fileURLWithPath: path)))
            #expect(record.id == d.id && record.outcome == d.outcome && record.captured == d.captured, "\(d.id)")
        }
        #expect(stderr.contains("warning: --on-device for SN-0002 failed: exit status 3 (the run goes on)"), "\(stderr)")
        #expect(stderr.contains("warning: --on-device for SN-0003 failed: did not finish within 1s (stopped)"), "\(stderr)")
        #expect(stderr.components(separatedBy: "on-device: 4 run, 2 failed (SN-0002, SN-0003)\n").count == 2, "said once: \(stderr)")
        // `provision report` shows them with the run, as does its HTML page.
        let shown = try await RunProcessTests.run(["report", "r.json", "--html", "r.html"], in: line.directory)
        #expect(shown.status == 0)
        let at = try #require(shown.stdout.firstIndex(of: "  on-device 4 run, 2 failed (SN-0002, SN-0003)"), "\(shown.stdout)")
        #expect(Array(shown.stdout[(at + 1)...].prefix(2)) == ["    SN-0002  exit status 3", "    SN-0003  did not finish within 1s (stopped)"])
        let html = try String(contentsOfFile: line.directory + "/r.html", encoding: .utf8)
        #expect(html.contains("data-figure=\"on-device\">on-device: 4 run, 2 failed (SN-0002, SN-0003)</p>"))

        let bad = try await RunProcessTests.run(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim",
                                                 "--on-device-timeout", "1s", "--report", "x.json"], in: line.directory)
        #expect(bad.status == 2, "a timeout without a hook")
    }

    @Test func aStoppedRunWritesItsReportWithTheHooksSoFarWithoutStartingTheOthers() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 4)
        // The first hook is the operator: it stops the run (Ctrl-C to provision, once), then hangs until
        // its time limit stops it. The devices in flight finish; the hooks still waiting are not started.
        let hook = """
            cat > /dev/null; echo "$PROVISION_DEVICE" >> started; \
            if [ ! -e stopped ]; then : > stopped; kill -INT $PPID; fi; exec sleep 30
            """
        let child = try ChildProcess(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet", "--sim-latency", "0",
                                      "--concurrency", "4", "--report", "r.json", "--on-device", hook, "--on-device-timeout", "3s"],
                                     directory: line.directory)
        for await _ in child.lines {}
        let stderr = await child.stderr()
        #expect(await child.wait() == 130, "\(stderr)")
        let report = try RunReport.read(from: line.directory + "/r.json")
        #expect(report.run.stopped?.reason == .interrupted)
        let started = try String(contentsOfFile: line.directory + "/started", encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(started.count == 1, "one hook ran: \(started)")
        let first = try #require(started.first)
        let finished = report.devices.filter { $0.outcome == .succeeded || $0.outcome == .failed }.map(\.id)
        #expect(finished.contains(first))
        let hooks = try #require(report.run.onDevice)
        #expect(hooks.run == 1 && hooks.failed == [OnDeviceInfo.Failure(device: first, message: "did not finish within 3s (stopped)")], "\(hooks)")
        // Every other device that finished is on record as not run.
        #expect(Set(hooks.notRun ?? []) == Set(finished).subtracting([first]) && (hooks.notRun ?? []).count == finished.count - 1, "\(hooks)")
        #expect(stderr.contains("on-device: \(hooks.sentence)"), "\(stderr)")
    }
}
