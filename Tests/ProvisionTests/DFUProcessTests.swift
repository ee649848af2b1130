import Engine
import Foundation
import MCUboot
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `provision run` with a `dfu` workflow on the simulator, as a child process (the release binary under
/// `make test`): whole updates, the faults' outcomes, a second run, and a 64-device run killed with
/// SIGKILL at random moments and resumed — checked on the device side (`--sim-dump`).
@Suite(.serialized) struct DFUProcessTests {
    static let model = """
        model: zephyr-dfu
        mtu: 247
        advertising: { services: [8D53DC1D-1DB7-4CD3-868B-8A527460AA84] }
        defaults: { firmware_version: "1.0.0" }
        services:
          - uuid: 180A
            characteristics:
              - { uuid: 2A26, properties: [read], value: "${running_version}" }
        mcumgr:
          buffers: { count: 4, size: 2475 }
          flash: { write: 1MB/s, erase: 20ms }
          boot: 100ms
          reset_delay: 10ms
          running: { version: "${firmware_version}" }
        """

    static let workflow = """
        name: dfu-line
        defaults:
          timeout: 10s
          retry: { attempts: 3, backoff: [50ms], on: [timeout, disconnected, connect_failed] }
          reconnect: { attempts: 3, delay: 50ms }
        steps:
          - connect: { mtu: 247, timeout: 3s }
          - name: update
            dfu: { image: "${firmware}", version: "1.1.0", confirm: after_boot, reboot_timeout: 10s }
            timeout: 60s
          - read: { id: fw, service: 180A, characteristic: 2A26, as: version }
          - verify: { value: "${fw}", equals: 1.1.0 }
          - disconnect: {}
        """

    /// A line of `count` devices in a fresh directory, with the image (`size` bytes of body).
    struct Line {
        let dir: String
        let image: MCUbootImage

        init(count: Int, size: Int = 24_000, faults: [Int: String] = [:]) throws {
            dir = NSTemporaryDirectory() + "provision-dfu-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            var body: [UInt8] = []
            var x: UInt64 = 0x1234_5678
            for _ in 0..<size {
                x = x &* 6364136223846793005 &+ 1442695040888963407
                body.append(UInt8(truncatingIfNeeded: x >> 33))
            }
            image = try MCUbootImage.build(body: body, version: ImageVersion(major: 1, minor: 1, revision: 0), headerSize: 512)
            try Data(image.bytes).write(to: URL(fileURLWithPath: dir + "/app-1.1.0.bin"))
            try Data(DFUProcessTests.model.utf8).write(to: URL(fileURLWithPath: dir + "/zephyr-dfu.yaml"))
            try Data(DFUProcessTests.workflow.utf8).write(to: URL(fileURLWithPath: dir + "/dfu.yaml"))
            var text = "simulator: { model: zephyr-dfu.yaml }\ndevices:\n"
            for i in 1...count {
                let sim = faults[i].map { ", simulator: \($0)" } ?? ""
                text += "  - { id: DFU-\(String(format: "%04d", i)), address: \"C0:DF:00:00:\(String(format: "%02X:%02X", i / 256, i % 256))\", vars: { firmware: app-1.1.0.bin }\(sim) }\n"
            }
            try Data(text.utf8).write(to: URL(fileURLWithPath: dir + "/line.yaml"))
        }

        func remove() { try? FileManager.default.removeItem(atPath: dir) }

        var hash: String { image.hash.map { String(format: "%02x", $0) }.joined() }

        func run(_ extra: [String]) async throws -> (status: Int32, lines: [String]) {
            let child = try ChildProcess(["run", "dfu.yaml", "--inventory", "line.yaml", "--adapter", "sim", "--quiet", "--sim-latency", "1"] + extra,
                                         directory: dir)
            var out: [String] = []
            for await l in child.lines { out.append(l) }
            return (await child.wait(), out)
        }

        /// The devices' MCUmgr side, from a `--sim-dump` file.
        func devices(_ dump: String) throws -> [String: [String: Any]] {
            let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir + "/" + dump))) as? [String: Any]
            var out: [String: [String: Any]] = [:]
            for d in (json?["devices"] as? [[String: Any]]) ?? [] {
                if let id = d["id"] as? String, let m = d["mcumgr"] as? [String: Any] { out[id] = m }
            }
            return out
        }
    }

    static func running(_ m: [String: Any]) -> (hash: String, confirmed: Bool)? {
        guard let r = m["running"] as? [String: Any], let h = r["hash"] as? String, let c = m["confirmed"] as? Bool else { return nil }
        return (h, c)
    }

    @Test func aLineIsUpdatedAndEachFaultEndsAsItShould() async throws {
        let line = try Line(count: 6, size: 256 * 1024, faults: [2: "{ faults: { drop_mid_upload: 0.5 } }", 3: "{ faults: { revert: true } }",
                                                             4: "{ firmware_version: \"1.2.0\" }", 5: "{ faults: { not_bootable: true } }"])
        defer { line.remove() }
        let first = try await line.run(["--report", "r1.json", "--sim-state", "sim.state", "--sim-dump", "d1.json", "--concurrency", "6"])
        #expect(first.status == 1)
        let report = try RunReport.read(from: line.dir + "/r1.json")
        let byID = Dictionary(uniqueKeysWithValues: report.devices.map { ($0.id, $0) })
        for id in ["DFU-0001", "DFU-0002", "DFU-0006"] {
            #expect(byID[id]?.outcome == .succeeded, "\(id): \(byID[id]?.error?.message ?? "")")
            #expect(byID[id]?.captured["dfu_result"] == .string("updated"))
        }
        #expect(byID["DFU-0003"]?.error?.kind == .dfuReverted)
        #expect(byID["DFU-0003"]?.error?.message.contains("runs 1.0.0 after the reset, not 1.1.0") == true)
        #expect(byID["DFU-0004"]?.error?.kind == .dfuDowngrade)
        #expect(byID["DFU-0005"]?.error?.kind == .dfuNotBootable)
        // The device that dropped its link resumed: bytes sent at most 1.1 × the image (the issue's 256 KiB).
        guard case .integer(let sent)? = byID["DFU-0002"]?.captured["dfu_bytes_sent"] else {
            Issue.record("no dfu_bytes_sent")
            return
        }
        #expect(Double(sent) <= 1.1 * Double(line.image.bytes.count))
        let devices = try line.devices("d1.json")
        for id in ["DFU-0001", "DFU-0002", "DFU-0006"] {
            let d = try #require(devices[id])
            #expect(Self.running(d)?.hash == line.hash && Self.running(d)?.confirmed == true, "\(id)")
            #expect(d["uploads_started"] as? Int == 1 && d["uploads_completed"] as? Int == 1 && d["resets"] as? Int == 1)
        }
        #expect(devices["DFU-0003"]?["reverts"] as? Int == 1 && devices["DFU-0003"]?["confirms"] as? Int == 0)
        #expect(devices["DFU-0005"]?["resets"] as? Int == 0)
        #expect(devices["DFU-0004"]?["uploads_started"] as? Int == 0)

        // A second run on the updated line uploads nothing to the units that run the image.
        _ = try await line.run(["--report", "r2.json", "--sim-state", "sim.state", "--sim-dump", "d2.json", "--concurrency", "6",
                                "--limit", "DFU-0001,DFU-0002,DFU-0006"])
        let again = try RunReport.read(from: line.dir + "/r2.json")
        #expect(again.devices.allSatisfy { $0.outcome == .succeeded && $0.captured["dfu_result"] == .string("already_current") })
        let after = try line.devices("d2.json")
        for id in ["DFU-0001", "DFU-0002", "DFU-0006"] {
            #expect(after[id]?["uploads_started"] as? Int == 1 && after[id]?["resets"] as? Int == 1, "\(id)")
        }
    }

    /// A 64-device DFU killed with SIGKILL at random moments and resumed each time, then run to its end:
    /// every device runs the new image, confirmed, or has a definite failure; none received the image
    /// twice in full; none confirmed an image it did not run.
    @Test func a64DeviceDFUKilledAtRandomMomentsLeavesEveryDeviceUpdatedOrDefinitelyFailed() async throws {
        let count = 64
        let line = try Line(count: count, size: 24_000)
        defer { line.remove() }
        let common = ["--sim-state", "sim.state", "--report", "run.json", "--concurrency", "16", "--events", "-"]
        var rng = SystemRandomNumberGenerator()
        var kills = 0
        for round in 0..<6 {
            let resume = round == 0 ? ["--journal", "run.journal"] : ["--resume", "run.journal"]
            let child = try ChildProcess(["run", "dfu.yaml", "--inventory", "line.yaml", "--adapter", "sim", "--quiet", "--sim-latency", "1"]
                                            + common + resume, directory: line.dir)
            let (status, killed) = await child.drain(killingAfterEvent: Int.random(in: 10...400, using: &rng))
            if killed && status != 0 && status != 1 { kills += 1 }
            if !killed { break }
        }
        #expect(kills >= 1, "at least one run was killed")
        let final = try await line.run(common + ["--resume", "run.journal", "--sim-dump", "dump.json"])
        #expect(final.status == 0 || final.status == 1)
        let report = try RunReport.read(from: line.dir + "/run.json")
        #expect(report.devices.count == count)
        let devices = try line.devices("dump.json")
        let imageSize = line.image.bytes.count
        for d in report.devices {
            let m = try #require(devices[d.id])
            // Updated and confirmed, or a definite failure (never needs_review: the image state decides).
            if d.outcome == .succeeded {
                #expect(Self.running(m)?.hash == line.hash && Self.running(m)?.confirmed == true, "\(d.id) succeeded but runs something else")
            } else {
                #expect(d.error != nil && d.error?.kind != .needsReview, "\(d.id): \(d.outcome) \(d.error?.message ?? "")")
            }
            // Never received the image twice in full.
            let written = m["upload_bytes"] as? Int ?? -1
            #expect((m["uploads_completed"] as? Int ?? 9) <= 1 && written < 2 * imageSize, "\(d.id) received \(written) bytes")
            // Never confirmed an image it did not run (and verify): a confirm only with the new image running.
            let confirms = m["confirms"] as? Int ?? -1
            #expect(confirms <= 1, "\(d.id) confirmed \(confirms) times")
            if confirms == 1 { #expect(Self.running(m)?.hash == line.hash, "\(d.id) confirmed another image") }
            #expect((m["reverts"] as? Int ?? -1) == 0, "\(d.id) reverted")
        }
        #expect(report.devices.filter { $0.outcome == .succeeded }.count == count, "\(report.devices.filter { $0.outcome != .succeeded }.map { "\($0.id): \($0.error?.message ?? "")" })")
    }
}
