import Engine
import EngineTestSupport
import Foundation
import Testing
import TestSupport

/// `provision run --on-device CMD`: a command per finished device with its record on standard input;
/// one that fails or hangs is recorded and stopped, never fatal to the run.
@Suite(.serialized) struct OnDeviceProcessTests {
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
        let child = try ChildProcess(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--quiet", "--sim-latency", "0",
                                      "--concurrency", "1", "--report", "r.json", "--on-device", hook, "--on-device-timeout", "1s"],
                                     directory: line.directory)
        for await _ in child.lines {}
        let stderr = await child.stderr()
        #expect(await child.wait() == 1, "SN-0004's old firmware fails it; the hooks change nothing: \(stderr)")
        let report = try RunReport.read(from: line.directory + "/r.json")
        #expect(report.devices.map(\.outcome) == [.succeeded, .succeeded, .succeeded, .failed])
        // Every finished device's record went to the hook, as the report has it.
        for d in report.devices {
            let path = line.directory + "/labels/\(d.id).\(d.outcome.rawValue).json"
            let record = try DeviceRecord.read(json: Data(contentsOf: URL(fileURLWithPath: path)))
            #expect(record.id == d.id && record.outcome == d.outcome && record.captured == d.captured, "\(d.id)")
        }
        #expect(stderr.contains("warning: --on-device for SN-0002 failed: exit status 3 (the run goes on)"), "\(stderr)")
        #expect(stderr.contains("warning: --on-device for SN-0003 failed: did not finish within 1s (stopped)"), "\(stderr)")
        #expect(stderr.contains("on-device: 4 run, 2 failed (SN-0002, SN-0003)"), "\(stderr)")

        let bad = try await RunProcessTests.run(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim",
                                                 "--on-device-timeout", "1s", "--report", "x.json"], in: line.directory)
        #expect(bad.status == 2, "a timeout without a hook")
    }
}
