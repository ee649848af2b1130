import Foundation
import Testing
@testable import ProvisionCLI

/// `provision bench` says when its numbers do not measure a clean run, and refuses bad arguments.
@Suite(.serialized) struct BenchCommandTests {
    static let workflow = cliRepositoryRoot + "/workflows/sensor-v2.yaml"

    @Test func aRunInWhichDevicesFailedIsAnError() async throws {
        let dir = FileManager.default.temporaryDirectory.path + "/provision-bench-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Every unit of this model runs firmware the workflow refuses.
        let model = try String(contentsOfFile: cliRepositoryRoot + "/inventory/models/sensor-v2.yaml", encoding: .utf8)
            .replacingOccurrences(of: "firmware: \"2.4.1\"", with: "firmware: \"1.0.0\"")
        try Data(model.utf8).write(to: URL(fileURLWithPath: dir + "/old.yaml"))
        let r = await run(["bench", "throughput", "--devices", "12", "--concurrency", "4", "--workflow", Self.workflow,
                           "--model", dir + "/old.yaml", "--no-fsync"])
        #expect(r.code == 1)
        #expect(r.out.contains("succeeded: 0"))
        #expect(r.err == "error: throughput: 12 of 12 devices did not succeed (verify_failed 12); these numbers do not measure a clean run\n")
        let ok = await run(["bench", "throughput", "--devices", "12", "--concurrency", "4", "--workflow", Self.workflow,
                            "--model", cliRepositoryRoot + "/inventory/models/sensor-v2.yaml", "--no-fsync"])
        #expect(ok.code == 0)
        #expect(ok.err == "")
        // The compared figure: CPU per device, printed for the whole process and for the run alone.
        func figure(_ name: String) -> Double? {
            ok.out.split(separator: "\n").first { $0.hasPrefix(name + ": ") }.flatMap { Double($0.dropFirst(name.count + 2)) }
        }
        #expect((figure("cpu_ms_per_device") ?? 0) > 0 && (figure("run_cpu_ms_per_device") ?? 0) > 0, "\(ok.out)")
        #expect((figure("run_cpu_ms_per_device") ?? 1) <= (figure("cpu_ms_per_device") ?? 0))
    }

    @Test func securityMeasuresWholePairingsAndPairingsOnPacedLinks() async throws {
        let r = await run(["bench", "security", "--devices", "2", "--connection-interval", "7.5ms", "--json",
                           "--model", cliRepositoryRoot + "/inventory/models/sensor-v2-secure.yaml"])
        #expect(r.code == 0, "\(r.err)")
        let lines = r.out.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(lines.filter { $0["scenario"] as? String == "security" }.map { $0["turns"] as? Int } == [8, 86, 6, 6])
        let paced = lines.filter { $0["scenario"] as? String == "security-paced" }
        #expect(paced.map { $0["method"] as? String } == ["Just Works", "Passkey Entry"])
        // A paced Passkey Entry pairing takes at least one connection event per turn.
        #expect((paced.last?["pairing_ms"] as? Double ?? 0) >= 86 * 7.5)
        let plain = await run(["bench", "security", "--devices", "1", "--model", cliRepositoryRoot + "/inventory/models/sensor-v2.yaml"])
        #expect(plain.code == 2 && plain.err.contains("has no `security:` section"))
    }

    @Test func badArgumentsAndInputsAreExitTwo() async {
        for args in [["--devices", "x"], ["--devices", "0"], ["--devices", "-3"], ["--concurrency", "0"], ["--concurrency", "many"]] {
            let r = await run(["bench", "throughput"] + args)
            #expect(r.code == 2, "\(args)")
            #expect(r.err.hasPrefix("error: `\(args[0])` must be a whole number"), "\(args): \(r.err)")
        }
        let missing = await run(["bench", "throughput", "--devices", "3", "--workflow", "/nonexistent/w.yaml"])
        #expect(missing.code == 2)
        #expect(missing.err.contains("no such file"))
        let model = await run(["bench", "sim", "--devices", "3", "--model", "/nonexistent/m.yaml"])
        #expect(model.code == 2)
        #expect(await run(["bench", "fastest"]).code == 2)
    }
}
