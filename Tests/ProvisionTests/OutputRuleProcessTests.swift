import Engine
import Foundation
import Testing
import EngineTestSupport
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The output-path rule, from outside (docs/reliability.md, "Where outputs go"): `provision run` writes
/// a FIFO, a device or a standard stream as it is — never renamed over, never chmodded — follows a
/// symbolic link to its target (the link stays, the target gets the content; the bond store's lock goes
/// beside the target), and refuses at once, with nothing touched, a FIFO nobody reads.
@Suite(.serialized, .timeLimit(.minutes(3))) struct OutputRuleProcessTests {
    static func run(_ arguments: [String], in dir: String) async throws -> (status: Int32, stderr: String) {
        let child = try ChildProcess(arguments, directory: dir)
        for await _ in child.lines {}
        let stderr = await child.stderr()
        return (await child.wait(), stderr)
    }

    static func info(_ path: String, follow: Bool = false) -> stat? {
        var st = stat()
        return (follow ? stat(path, &st) : lstat(path, &st)) == 0 ? st : nil
    }

    static func type(_ path: String) -> mode_t? { info(path).map { $0.st_mode & S_IFMT } }

    /// A line of 3 simulated devices and the arguments that run it.
    static func line() throws -> (TestLine, [String]) {
        let line = try TestLine()
        _ = try line.write(count: 3)
        return (line, ["run", "workflow.yaml", "--inventory", "inventory.yaml", "--adapter", "sim", "--sim-latency", "0", "--quiet"])
    }

    @Test func aFIFOWithAReaderReceivesTheEventsTheTraceAndTheReportAndStaysAFIFO() async throws {
        let (line, args) = try Self.line()
        defer { line.remove() }
        let dir = line.directory
        var readers: [String: FIFOReader] = [:]
        for name in ["events.fifo", "trace.fifo", "report.fifo"] {
            #expect(mkfifo(dir + "/" + name, 0o644) == 0)
            readers[name] = try FIFOReader(path: dir + "/" + name)
        }
        let modes = readers.keys.reduce(into: [String: mode_t]()) { $0[$1] = Self.info(dir + "/" + $1)?.st_mode }
        let r = try await Self.run(args + ["--events", "events.fifo", "--trace", "trace.fifo", "--report", "report.fifo",
                                           "--journal", "run.journal"], in: dir)
        #expect(r.status == 0, "\(r.stderr)")

        let events = String(decoding: await readers["events.fifo"]!.bytes(), as: UTF8.self).split(separator: "\n")
        let types = events.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }.compactMap { $0["type"] as? String }
        #expect(types.first == "run_started" && types.last == "run_finished")
        #expect(types.filter { $0 == "device_finished" }.count == 3)
        let report = try JSONDecoder().decode(ReportShape.self, from: Data(await readers["report.fifo"]!.bytes()))
        #expect(report.devices.count == 3 && report.devices.allSatisfy { $0.outcome == "succeeded" })
        // The simulator's ATT trace: JSON lines naming the devices by id.
        let trace = String(decoding: await readers["trace.fifo"]!.bytes(), as: UTF8.self)
        #expect(trace.contains("\"link\":\"SN-0001\"") && trace.contains("\"link\":\"SN-0003\""), "\(trace.prefix(300))")

        for (name, mode) in modes {
            #expect(Self.type(dir + "/" + name) == S_IFIFO, "\(name) is no longer a FIFO")
            #expect(Self.info(dir + "/" + name)?.st_mode == mode, "\(name) was chmodded")
        }
        // Nothing was written beside them (no temporary file, no renamed copy).
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: dir))
        #expect(names.filter { $0.contains(".tmp") }.isEmpty)
        #expect(names.isSuperset(of: ["events.fifo", "trace.fifo", "report.fifo", "run.journal"]))
    }

    @Test func aFIFOWithNoReaderIsRefusedAtOnceAndNoDeviceIsTouched() async throws {
        let (line, args) = try Self.line()
        defer { line.remove() }
        let dir = line.directory
        #expect(mkfifo(dir + "/events.fifo", 0o644) == 0)
        let r = try await Self.run(args + ["--events", "events.fifo", "--report", "r.json", "--sim-state", "devices.state"], in: dir)
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderr.contains("events.fifo") && r.stderr.contains("it is a FIFO that no process is reading; start its reader first"), "\(r.stderr)")
        #expect(Self.type(dir + "/events.fifo") == S_IFIFO)
        // No device was touched: no journal, no report, and the simulated devices received nothing.
        #expect(!FileManager.default.fileExists(atPath: dir + "/r.json"))
        #expect(!FileManager.default.fileExists(atPath: dir + "/r.journal"))
        let state = (try? String(contentsOfFile: dir + "/devices.state", encoding: .utf8)) ?? ""
        #expect(state.isEmpty, "devices were touched: \(state)")
    }

    /// A copy of /dev/null made with mknod in the line's directory: written as it is, its type, device
    /// numbers and mode unchanged. mknod needs root (CI runs as root); elsewhere this test is skipped.
    @Test(.enabled(if: getuid() == 0, "mknod of a character device needs root"))
    func aCharacterDeviceKeepsItsTypeAndMode() async throws {
        let (line, args) = try Self.line()
        defer { line.remove() }
        let dir = line.directory
        let null = try #require(Self.info("/dev/null", follow: true))
        for name in ["events.dev", "trace.dev", "report.dev"] {
            #expect(mknod(dir + "/" + name, S_IFCHR | 0o666, null.st_rdev) == 0, "mknod: \(String(cString: strerror(errno)))")
            #expect(chmod(dir + "/" + name, 0o666) == 0)
        }
        let r = try await Self.run(args + ["--events", "events.dev", "--trace", "trace.dev", "--report", "report.dev",
                                           "--journal", "run.journal"], in: dir)
        #expect(r.status == 0, "\(r.stderr)")
        for name in ["events.dev", "trace.dev", "report.dev"] {
            let after = try #require(Self.info(dir + "/" + name))
            #expect(after.st_mode & S_IFMT == S_IFCHR, "\(name) is no longer a character device")
            #expect(after.st_rdev == null.st_rdev)
            #expect(after.st_mode & 0o777 == 0o666, "\(name) was chmodded to \(String(after.st_mode & 0o777, radix: 8))")
        }
        // The journal (a regular file) holds the run: the devices went through.
        let journal = try String(contentsOfFile: dir + "/run.journal", encoding: .utf8)
        #expect(journal.components(separatedBy: "\"outcome\"").count - 1 >= 3)
    }

    @Test func aSymlinkedReportKeepsTheLinkAndItsTargetGetsTheReport() async throws {
        let (line, args) = try Self.line()
        defer { line.remove() }
        let dir = line.directory
        try FileManager.default.createDirectory(atPath: dir + "/shared", withIntermediateDirectories: false)
        // One link to a report that does not exist yet, one to an existing report (replaced with --force).
        try FileManager.default.createSymbolicLink(atPath: dir + "/new.json", withDestinationPath: "shared/new-target.json")
        try Data("old".utf8).write(to: URL(fileURLWithPath: dir + "/shared/old-target.json"))
        try FileManager.default.createSymbolicLink(atPath: dir + "/old.json", withDestinationPath: dir + "/shared/old-target.json")
        for (report, journal) in [("new.json", "new.journal"), ("old.json", "old.journal")] {
            let r = try await Self.run(args + ["--report", report, "--journal", journal, "--force"], in: dir)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(Self.type(dir + "/" + report) == S_IFLNK, "\(report) is no longer a link")
        }
        for target in ["shared/new-target.json", "shared/old-target.json"] {
            let report = try JSONDecoder().decode(ReportShape.self, from: Data(contentsOf: URL(fileURLWithPath: dir + "/" + target)))
            #expect(report.devices.count == 3, "\(target)")
            #expect(Self.type(dir + "/" + target) == S_IFREG)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/shared").sorted() == ["new-target.json", "old-target.json"])
    }

    @Test func aSymlinkedBondStoreKeepsTheLinkItsTargetGetsTheBondsAndTheLockSitsBesideTheTarget() async throws {
        let dir = try SecureLine.copy()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir + "/store", withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: dir + "/bonds.json", withDestinationPath: "store/shared-bonds.json")
        let r = try await Self.run(["run", "sensor-v2-secure.yaml", "--inventory", "inventory.yaml", "--adapter", "sim",
                                    "--sim-latency", "0", "--quiet", "--bonds", "bonds.json", "--sim-state", "devices.state",
                                    "--report", "line.json"], in: dir)
        #expect(r.status == 1, "\(r.stderr)")  // SN-S005's label is misprinted: it fails, the others bond
        #expect(Self.type(dir + "/bonds.json") == S_IFLNK)
        let target = dir + "/store/shared-bonds.json"
        #expect(Self.type(target) == S_IFREG)
        #expect(Self.info(target)!.st_mode & 0o777 == 0o600)
        let store = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: target))) as? [String: Any]
        let bonds = (store?["stations"] as? [[String: Any]] ?? []).flatMap { $0["bonds"] as? [[String: Any]] ?? [] }
        #expect(bonds.count == 7)
        #expect(FileManager.default.fileExists(atPath: target + ".lock"))
        #expect(!FileManager.default.fileExists(atPath: dir + "/bonds.json.lock"))
        // A second run reaches the same store through the link and encrypts with its bonds.
        let audit = try await Self.run(["run", "fleet-audit-secure.yaml", "--inventory", "inventory.yaml", "--adapter", "sim",
                                        "--sim-latency", "0", "--quiet", "--bonds", "bonds.json", "--sim-state", "devices.state",
                                        "--report", "audit.json"], in: dir)
        #expect(audit.status == 1, "\(audit.stderr)")
        let audited = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir + "/audit.json"))) as? [String: Any]
        let used = (audited?["devices"] as? [[String: Any]] ?? []).filter { ($0["security"] as? [String: Any])?["bond"] as? String == "used" }
        #expect(used.count == 7)
    }

    @Test func aReportOnStandardOutputIsWrittenThereAndWhatGoesBesideItGoesToReports() async throws {
        let (line, args) = try Self.line()
        defer { line.remove() }
        let dir = line.directory
        // One device fails (no advertising), so there is a retry file to write.
        _ = try line.write(count: 3, faults: [2: "{ faults: { no_advertise: true } }"])
        let child = try ChildProcess(args + ["--report", "/dev/stdout"], directory: dir)
        var stdout = ""
        for await l in child.lines { stdout += l + "\n" }
        let stderr = await child.stderr()
        #expect(await child.wait() == 1, "\(stderr)")
        #expect(stdout.contains("\"devices\"") && stdout.contains("SN-0002"), "\(stdout.prefix(300))")
        // The journal and the retry file went to reports/, never beside /dev/stdout.
        let reports = try FileManager.default.contentsOfDirectory(atPath: dir + "/reports")
        #expect(reports.contains { $0.hasSuffix(".journal") }, "\(reports)")
        #expect(reports.contains { $0.hasSuffix(".retry") }, "\(reports)")
        for name in ["stdout.journal", "stdout.retry", "stdout.json"] {
            #expect(!FileManager.default.fileExists(atPath: "/dev/" + name), "/dev/\(name) was created")
        }
    }

    @Test func aJournalOrAStateFileThatIsAFIFOIsRefusedBeforeAnythingIsTouched() async throws {
        let (line, args) = try Self.line()
        defer { line.remove() }
        let dir = line.directory
        #expect(mkfifo(dir + "/j.fifo", 0o644) == 0)
        #expect(mkfifo(dir + "/s.fifo", 0o644) == 0)
        let r = try await Self.run(args + ["--journal", "j.fifo", "--sim-state", "s.fifo", "--report", "r.json"], in: dir)
        #expect(r.status == 2)
        #expect(r.stderr.contains("`--journal j.fifo` is a FIFO: it is read back, so it must be a regular file"), "\(r.stderr)")
        #expect(r.stderr.contains("`--sim-state s.fifo` is a FIFO: it is read back, so it must be a regular file"), "\(r.stderr)")
        #expect(r.stderr.contains("nothing was touched"))
    }
}

/// What these tests read of a report.
struct ReportShape: Decodable {
    struct Device: Decodable { var id: String; var outcome: String }
    var devices: [Device]
}

