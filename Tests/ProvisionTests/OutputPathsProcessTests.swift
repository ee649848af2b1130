import Engine
import EngineTestSupport
import Foundation
import Testing
@testable import ProvisionCLI

/// Every file `provision run` writes is checked before a device is touched: never an input, never another
/// output, in a directory that exists, not a directory, and an existing report is not replaced silently.
@Suite(.serialized) struct OutputPathsProcessTests {
    /// A line of 3 devices; `args` runs it (relative paths, in the line's directory).
    static func line() throws -> (TestLine, [String]) {
        let line = try TestLine()
        _ = try line.write(count: 3)
        return (line, ["run", "workflow.yaml", "--inventory", "inventory.yaml", "--adapter", "sim", "--sim-latency", "0", "--quiet"])
    }

    static func run(_ args: [String], in dir: String) async throws -> (status: Int32, stderr: String) {
        let child = try ChildProcess(args, directory: dir)
        for await _ in child.lines {}
        let err = await child.stderr()
        return (await child.wait(), err)
    }

    /// The inputs' bytes, to prove a refused run changed none of them.
    static func snapshot(_ dir: String) throws -> [String: Data] {
        var out: [String: Data] = [:]
        for name in ["workflow.yaml", "inventory.yaml", "models/sensor-v2.yaml", "blobs/cert-0.bin", "blobs/cert-1.bin"] {
            out[name] = try Data(contentsOf: URL(fileURLWithPath: dir + "/" + name))
        }
        return out
    }

    @Test func anOutputOntoAnInputOrAnotherOutputIsRefusedWithNothingTouched() async throws {
        let (line, args) = try Self.line()
        defer { line.remove() }
        let dir = line.directory
        try FileManager.default.createSymbolicLink(atPath: dir + "/link.yaml", withDestinationPath: "inventory.yaml")
        try FileManager.default.linkItem(atPath: dir + "/workflow.yaml", toPath: dir + "/hard.yaml")
        let before = try Self.snapshot(dir)
        let cases: [([String], String)] = [
            (["--report", "inventory.yaml"], "`--report inventory.yaml` is the inventory"),
            (["--report", "./inventory.yaml"], "`--report ./inventory.yaml` is the inventory"),
            (["--report", "link.yaml"], "`--report link.yaml` is the inventory"),
            (["--junit", "workflow.yaml"], "`--junit workflow.yaml` is the workflow"),
            (["--junit", "hard.yaml"], "`--junit hard.yaml` is the workflow"),
            (["--report", "r.json", "--journal", "r.json"], "`--report r.json` and `--journal r.json` are the same file"),
            (["--journal", "r.journal", "--events", "./r.journal"], "`--events ./r.journal` and `--journal r.journal` are the same file"),
            (["--sim-dump", "blobs/cert-1.bin"], "`--sim-dump blobs/cert-1.bin` is a file the workflow sends"),
            (["--sim-state", "models/sensor-v2.yaml"], "`--sim-state models/sensor-v2.yaml` is the device model"),
            (["--report", "nowhere/r.json"], "`--report nowhere/r.json`: directory \(dir)/nowhere does not exist"),
            (["--report", "blobs"], "`--report blobs` is a directory"),
            (["--report", "r.json", "--events", "blobs/cert-0.bin/x"], "is not a directory"),
        ]
        for (extra, message) in cases {
            let r = try await Self.run(args + extra, in: dir)
            #expect(r.status == 2, "\(extra)")
            #expect(r.stderr.contains(message), "\(extra): \(r.stderr)")
            #expect(r.stderr.contains("nothing was touched"), "\(extra)")
            #expect(try Self.snapshot(dir) == before, "\(extra) changed an input")
            let left = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".journal") || $0.hasSuffix(".json") || $0 == "reports" }
            #expect(left.isEmpty, "\(extra) left \(left)")
        }
    }

    @Test func everyOptionThatWritesAFileIsChecked() async throws {
        let outputs = RunCommand().options.filter { $0.role == .output }.map(\.name)
        #expect(Set(outputs) == ["report", "journal", "resume", "events", "junit", "html", "trace", "sim-state", "sim-dump", "bonds", "spool"])
        // Every option that takes a path says whether the run reads or writes it.
        for o in RunCommand().options {
            if case .value(let meta) = o.kind, ["PATH", "FILE", "JOURNAL"].contains(meta) {
                #expect(o.role != nil, "`--\(o.name)` names a file but says neither input nor output")
            }
        }
        let (line, args) = try Self.line()
        defer { line.remove() }
        for name in outputs {
            // The spool is a line station's (the paths are checked before the line is reached).
            let onLine = name == "spool" ? ["--line", "host=127.0.0.1 port=1 dbname=nowhere connect_timeout=1"] : []
            let r = try await Self.run(args + onLine + ["--\(name)", "inventory.yaml"], in: line.directory)
            #expect(r.status == 2, "--\(name)")
            #expect(r.stderr.contains("`--\(name) inventory.yaml` is the inventory"), "--\(name): \(r.stderr)")
        }
    }

    @Test func anExistingReportIsReplacedOnlyWithForceOrByTheRunItBelongsTo() async throws {
        let (line, args) = try Self.line()
        defer { line.remove() }
        let dir = line.directory
        #expect(try await Self.run(args + ["--report", "r.json"], in: dir).status == 0)
        let first = try RunReport.read(from: dir + "/r.json")
        // Another run onto the same report: refused, the first report kept.
        let again = try await Self.run(args + ["--report", "r.json", "--journal", "r2.journal"], in: dir)
        #expect(again.status == 2)
        #expect(again.stderr.contains("`--report r.json` already exists; it is not replaced unless you add `--force`"))
        #expect(try RunReport.read(from: dir + "/r.json") == first)
        #expect(!FileManager.default.fileExists(atPath: dir + "/r2.journal"))
        // Resuming the run the report belongs to replaces it with the continuation.
        #expect(try await Self.run(args + ["--resume", "r.journal"], in: dir).status == 0)
        let resumed = try RunReport.read(from: dir + "/r.json")
        #expect(resumed.run.id == first.run.id && resumed.run.resumed)
        // --force replaces it with another run's report; resuming the first run may then not replace it.
        #expect(try await Self.run(args + ["--report", "r.json", "--journal", "r2.journal", "--force"], in: dir).status == 0)
        let other = try RunReport.read(from: dir + "/r.json")
        #expect(other.run.id != first.run.id)
        let refused = try await Self.run(args + ["--resume", "r.journal", "--report", "r.json"], in: dir)
        #expect(refused.status == 2)
        #expect(try RunReport.read(from: dir + "/r.json") == other)
        // An existing journal is never replaced, --force or not.
        let journal = try await Self.run(args + ["--report", "r3.json", "--journal", "r.journal", "--force"], in: dir)
        #expect(journal.status == 2)
        #expect(journal.stderr.contains("`--journal r.journal` already exists: resume it with `--resume r.journal`"))
    }

    @Test func theDefaultReportsDirectoryIsCreatedOnlyForARealRun() async throws {
        let (line, args) = try Self.line()
        defer { line.remove() }
        #expect(try await Self.run(args + ["--dry-run"], in: line.directory).status == 0)
        #expect(!FileManager.default.fileExists(atPath: line.directory + "/reports"))
        #expect(try await Self.run(args, in: line.directory).status == 0)
        let reports = try FileManager.default.contentsOfDirectory(atPath: line.directory + "/reports")
        #expect(reports.filter { $0.hasSuffix(".json") }.count == 1)
    }
}
