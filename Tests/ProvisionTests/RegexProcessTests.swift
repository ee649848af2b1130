import Engine
import Foundation
import Testing
import EngineTestSupport
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A regex on a device's value cannot hang a run (issue 17, case 5), checked against the binary users
/// run: `'^(a+)+$'` against 24 `a` and a `!` (which ran for over 9.5 minutes, past three SIGTERMs)
/// gives up at once and fails the device with a message saying so; a pattern that does not compile is
/// refused by `validate` at its position.
@Suite(.serialized) struct RegexProcessTests {
    static let hostile = String(repeating: "a", count: 24) + "!"

    static func workflow(_ pattern: String) -> String {
        """
        name: regex
        defaults: { timeout: 2s }
        steps:
          - scan: { name: "${name}", timeout: 1s }
          - connect: {}
          - read: { id: fw, service: 180A, characteristic: 2A26, as: utf8 }
          - name: firmware pattern
            verify: { value: "${fw}", matches: '\(pattern)' }
          - disconnect: {}
        """
    }

    @Test func aCatastrophicPatternOnADevicesValueFailsTheDeviceAtOnce() async throws {
        let line = try TestLine()
        defer { line.remove() }
        // Every device sends the hostile firmware text; a run of 8 would take hours unbounded.
        let faults = Dictionary(uniqueKeysWithValues: (1...8).map { ($0, "{ firmware: \"\(Self.hostile)\" }") })
        let paths = try line.write(count: 8, workflow: Self.workflow("^(a+)+$"), faults: faults)
        let child = try ChildProcess(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--sim-latency", "0",
                                      "--quiet", "--report", "r.json"], directory: line.directory)
        let stderr = await child.stderr()
        #expect(await child.wait() == 1, "\(stderr)")
        let report = try RunReport.read(from: line.directory + "/r.json")
        #expect(report.devices.count == 8)
        for d in report.devices {
            #expect(d.outcome == .failed)
            #expect(d.error?.kind == .verifyFailed)
            #expect(d.error?.message.contains("the regular expression /^(a+)+$/ gave up on the value: more than 1000000 backtracking steps") == true,
                    "\(d.error?.message ?? "")")
        }
    }

    /// SIGTERM during a run of such devices ends it promptly with 130: the matches give up or see the
    /// cancellation, and the stop follows as for any run.
    @Test func sigtermStopsARunOfHostileValues() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let faults = Dictionary(uniqueKeysWithValues: (1...40).map { ($0, "{ firmware: \"\(Self.hostile)\" }") })
        let paths = try line.write(count: 40, workflow: Self.workflow("^(a+)+$"), faults: faults)
        let child = try ChildProcess(["run", paths.workflow, "--inventory", paths.inventory, "--adapter", "sim", "--sim-latency", "0.2",
                                      "--concurrency", "2", "--quiet", "--report", "r.json", "--events", "-", "--stop-grace", "1s"],
                                     directory: line.directory)
        var signalled = false
        for await l in child.lines where l.contains("\"device_finished\"") && !signalled {
            child.signal(SIGTERM)
            signalled = true
        }
        #expect(await child.wait() == 130)
        let report = try RunReport.read(from: line.directory + "/r.json")
        #expect(report.run.stopped?.reason == .interrupted)
        #expect(report.summary.outcomes[.skipped] > 0, "the stop came long before 40 devices")
    }

    @Test func validateSaysWhereAPatternDoesNotCompile() async throws {
        let line = try TestLine()
        defer { line.remove() }
        let paths = try line.write(count: 1, workflow: Self.workflow(#"^2\.[0-9"#))
        let r = try await ChildProcess.shell("\"$PROVISION\" validate workflow.yaml --inventory inventory.yaml", directory: line.directory)
        #expect(r.status == 2)
        #expect(r.stdout.contains("is not a valid regular expression: missing terminating ] for character class at character 9")
                || r.stderr.contains("is not a valid regular expression: missing terminating ] for character class at character 9"),
                "\(r.stdout)\(r.stderr)")
        _ = paths
    }
}
