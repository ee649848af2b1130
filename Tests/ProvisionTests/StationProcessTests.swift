import Engine
import Foundation
import PostgresClient
import Testing
import TestSupport
import Trace
#if canImport(Glibc)
import Glibc
#endif

/// Whatever way `provision run` ends, what its station opened is closed, once: the trace is a whole
/// trace (ATT JSON lines, btsnoop records), the events are flushed and whole, the bonds made are on
/// disk, the line is left. Each way out is run for real, in a child process: a normal end, an input the
/// opening finds wrong, an adapter that fails to open, a store that cannot be opened, Ctrl-C once and
/// twice, SIGTERM.
@Suite(.serialized, .timeLimit(.minutes(5))) struct StationProcessTests {
    /// `provision run` of the secure line on the simulator with bonds, a trace and (unless `events` says
    /// otherwise) an events file.
    static func arguments(latency: String = "0", concurrency: Int = 4, events: String = "events.jsonl", extra: [String] = []) -> [String] {
        ["run", "sensor-v2-secure.yaml", "--inventory", "inventory.yaml", "--adapter", "sim", "--sim-latency", latency, "--quiet",
         "--concurrency", "\(concurrency)", "--bonds", "bonds.json", "--sim-state", "devices.state", "--report", "r.json",
         "--trace", "att.jsonl", "--events", events] + extra
    }

    static func run(_ args: [String], in dir: String) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await ChildProcess.run(args, in: dir)
    }

    // MARK: What "closed" means

    /// An ATT trace in JSON lines is whole: every line a PDU record, the last one ended. Returns the records.
    @discardableResult
    static func expectWholeATTTrace(_ path: String, _ comment: Comment) throws -> [[String: Any]] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        if !data.isEmpty { #expect(data.last == 0x0A, "\(comment): the trace ends mid-line") }
        var records: [[String: Any]] = []
        for line in data.split(separator: 0x0A) {
            let o = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any]
            #expect(o?["direction"] != nil && o?["link"] != nil, "\(comment): not a PDU record: \(String(decoding: line, as: UTF8.self))")
            if let o { records.append(o) }
        }
        return records
    }

    /// A btsnoop file is whole: its header, then records that each parse to their end.
    static func expectWholeBTSnoop(_ path: String, _ comment: Comment) throws {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(bytes.starts(with: BTSnoop.header), "\(comment): \(bytes.count) bytes, no btsnoop header")
        #expect(throws: Never.self, comment) { try BTSnoop.records(in: bytes) }
    }

    /// The events were flushed and the file closed: every line is a whole event; a run that started ends with `run_finished`.
    @discardableResult
    static func expectWholeEvents(_ lines: [String], ran: Bool, _ comment: Comment) -> [String] {
        let types = lines.compactMap { l -> String? in
            let o = try? JSONSerialization.jsonObject(with: Data(l.utf8)) as? [String: Any]
            #expect(o?["type"] is String, "\(comment): not an event: \(l)")
            return o?["type"] as? String
        }
        if ran {
            #expect(types.first == "run_started", "\(comment): \(types.prefix(3))")
            #expect(types.last == "run_finished", "\(comment): the events end with \(types.suffix(3))")
        }
        return types
    }

    static func expectWholeEventsFile(_ path: String, ran: Bool, _ comment: Comment) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        if !data.isEmpty { #expect(data.last == 0x0A, "\(comment): the events end mid-line") }
        expectWholeEvents(String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init), ran: ran, comment)
    }

    /// Every device whose record says it made a bond has that bond in the bond store.
    static func expectBondsSaved(_ line: SecureLine, _ comment: Comment) throws {
        let report = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: line.path("r.json")))) as? [String: Any]
        let made = (report?["devices"] as? [[String: Any]] ?? []).filter { ($0["security"] as? [String: Any])?["bond"] as? String == "made" }
            .compactMap { $0["address"] as? String }
        #expect(!made.isEmpty, "\(comment): no device made a bond")
        let store = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: line.path("bonds.json")))) as? [String: Any]
        let peers = Set((store?["stations"] as? [[String: Any]] ?? []).flatMap { ($0["bonds"] as? [[String: Any]]) ?? [] }
            .compactMap { $0["peer"] as? String })
        #expect(Set(made).isSubset(of: peers), "\(comment): bonds made but not saved: \(Set(made).subtracting(peers).sorted())")
    }

    // MARK: The ways out

    @Test func aRunThatEndsClosesEverything() async throws {
        let line = try SecureLine()
        defer { line.remove() }
        let r = try await Self.run(Self.arguments(), in: line.directory)
        #expect(r.status == 1, "SN-S005 fails pairing: \(r.stderr)")
        let pdus = try Self.expectWholeATTTrace(line.path("att.jsonl"), "normal end")
        let succeeded = try RunReport.read(from: line.path("r.json")).devices.filter { $0.outcome == .succeeded }.map(\.id)
        #expect(succeeded.count == 7)
        #expect(Set(succeeded).isSubset(of: Set(pdus.compactMap { $0["link"] as? String })), "every provisioned unit's PDUs are in the trace")
        try Self.expectWholeEventsFile(line.path("events.jsonl"), ran: true, "normal end")
        try Self.expectBondsSaved(line, "normal end")
    }

    @Test func aResumeRefusedAfterOpeningClosesWhatWasOpenedAndTouchesNothing() async throws {
        let line = try SecureLine()
        defer { line.remove() }
        let first = try await Self.run(Self.arguments(extra: ["--journal", "r.journal"]), in: line.directory)
        #expect(first.status == 1, "\(first.stderr)")
        let journal = try Data(contentsOf: URL(fileURLWithPath: line.path("r.journal")))
        let bonds = try Data(contentsOf: URL(fileURLWithPath: line.path("bonds.json")))
        // Another version of the workflow: the journal is refused once the station has opened it.
        try (String(contentsOfFile: line.path("sensor-v2-secure.yaml"), encoding: .utf8) + "\n# edited\n")
            .write(toFile: line.path("sensor-v2-secure.yaml"), atomically: true, encoding: .utf8)
        let args = Self.arguments(events: "events-2.jsonl", extra: ["--resume", "r.journal"])
            .map { $0 == "att.jsonl" ? "att-2.jsonl" : $0 }
        let r = try await Self.run(args, in: line.directory)
        #expect(r.status == 2, "\(r.stderr)")
        #expect(r.stderr.contains("cannot resume"), "\(r.stderr)")
        #expect(try Self.expectWholeATTTrace(line.path("att-2.jsonl"), "refused resume").isEmpty, "no device was touched")
        try Self.expectWholeEventsFile(line.path("events-2.jsonl"), ran: false, "refused resume")
        #expect(try Data(contentsOf: URL(fileURLWithPath: line.path("r.journal"))) == journal, "the journal is as it was")
        #expect(try Data(contentsOf: URL(fileURLWithPath: line.path("bonds.json"))) == bonds, "the bonds are as they were")
    }

    @Test func anAdapterThatFailsToOpenClosesWhatWasOpened() async throws {
        let line = try SecureLine()
        defer { line.remove() }
        // A controller that hangs up at once: the HCI adapter's bring-up fails after the simulator opened.
        let dead = try TCPProxy(targetPort: 1)
        defer { dead.close() }
        let args = Self.arguments(extra: ["--adapter", "hci:tcp:127.0.0.1:\(dead.port)", "--journal", "r.journal"])
            .map { $0 == "att.jsonl" ? "t.trace" : $0 }
        let r = try await Self.run(args, in: line.directory)
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderr.contains("error: adapter `hci:tcp:127.0.0.1:\(dead.port)`"), "\(r.stderr)")
        #expect(try Self.expectWholeATTTrace(line.path("t.1.trace"), "the simulator's trace").isEmpty)
        try Self.expectWholeBTSnoop(line.path("t.2.trace"), "the failed adapter's trace")
        try Self.expectWholeEventsFile(line.path("events.jsonl"), ran: false, "adapter failure")
        #expect(!line.exists("r.journal"), "the journal opened for the run is not left behind empty")
        #expect(!line.exists("r.json") && !line.exists("bonds.json"), "nothing ran")
    }

    @Test func aJournalThatCannotBeOpenedStopsBeforeAnyAdapterOpens() async throws {
        let line = try SecureLine()
        defer { line.remove() }
        // Another process holds the journal (as a second `provision run` on it would).
        let fd = open(line.path("r.journal"), O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        #expect(fd >= 0)
        defer { close(fd) }
        #expect(flock(fd, LOCK_EX | LOCK_NB) == 0)
        let r = try await Self.run(Self.arguments(extra: ["--journal", "r.journal"]), in: line.directory)
        #expect(r.status == 2, "\(r.stderr)")
        #expect(r.stderr.contains("another provision run is using this journal"), "\(r.stderr)")
        try Self.expectWholeEventsFile(line.path("events.jsonl"), ran: false, "journal locked")
        #expect(!line.exists("att.jsonl"), "no adapter was opened")
        #expect(line.exists("r.journal"), "a journal this run did not create is left alone")
    }

    @Test func aLineThatCannotBeReachedStopsBeforeAnyAdapterOpens() async throws {
        let line = try SecureLine()
        defer { line.remove() }
        let r = try await Self.run(Self.arguments(extra: ["--line", "host=127.0.0.1 port=1 dbname=nowhere connect_timeout=2"]),
                                   in: line.directory)
        #expect(r.status == 3, "\(r.stderr)")
        #expect(r.stderr.contains("cannot join the line"), "\(r.stderr)")
        try Self.expectWholeEventsFile(line.path("events.jsonl"), ran: false, "line unreachable")
        #expect(!line.exists("att.jsonl"), "no adapter was opened")
    }

    /// The secure line run slowly with its events on stdout, stopped by `signals` (`ChildProcess.interrupt`).
    static func interrupted(_ line: SecureLine, _ signals: [Int32]) async throws -> (status: Int32, events: [String], stderr: String) {
        try await ChildProcess.interrupt(Self.arguments(latency: "0.5", concurrency: 2, events: "-"), in: line.directory, signals)
    }

    @Test(arguments: [("SIGINT once", [SIGINT]), ("SIGINT twice", [SIGINT, SIGINT]), ("SIGTERM", [SIGTERM])])
    func aStoppedRunClosesEverything(_ name: String, _ signals: [Int32]) async throws {
        let line = try SecureLine()
        defer { line.remove() }
        let r = try await Self.interrupted(line, signals)
        #expect(r.status == 130, "\(name): \(r.stderr)")
        Self.expectWholeEvents(r.events, ran: true, "\(name)")
        let pdus = try Self.expectWholeATTTrace(line.path("att.jsonl"), "\(name)")
        #expect(!pdus.isEmpty, "\(name)")
        try Self.expectBondsSaved(line, "\(name)")
        let report = try RunReport.read(from: line.path("r.json"))
        #expect(report.run.stopped?.reason == .interrupted, "\(name)")
    }
}

/// The same ways out for a station on a line: each one leaves the line (its station row is marked
/// stopped), so its claims go back and `line status` does not show it working.
@Suite(.serialized, .timeLimit(.minutes(5)), .enabled(if: PostgresCluster.shouldRun, "needs PostgreSQL: run `make test`, or apt-get install postgresql"))
struct StationLineProcessTests {
    /// Whether the station named `name` left the line, and why it stopped.
    static func left(_ line: ProcessLine, _ name: String) async throws -> (left: Bool, reason: String?) {
        let rows = try await line.admin.query("SELECT stopped_at IS NOT NULL AS left, stop_reason FROM provision.stations WHERE name = $1",
                                              [.text(name)])
        let row = try #require(rows.first, "station \(name) never joined")
        return (try row.decode("left"), try row.decodeIfPresent("stop_reason", as: String.self))
    }

    @Test func aStationThatEndsLeavesTheLine() async throws {
        let line = try await ProcessLine.make(devices: 4)
        defer { line.close() }
        let status = await ProcessLine.finish(try line.station("s1", latency: "0", extra: ["--trace", "att.jsonl"]))
        #expect(status == 0)
        #expect(try await Self.left(line, "s1").left)
        try StationProcessTests.expectWholeATTTrace(line.directory + "/att.jsonl", "line, normal end")
    }

    @Test func aStationWhoseModelIsMissingLeavesTheLineItJoined() async throws {
        let line = try await ProcessLine.make(devices: 3)
        defer { line.close() }
        // The same inventory without its `simulator:` model: found wrong only when the simulator opens,
        // after the station joined the line.
        let text = try String(contentsOfFile: line.inventory, encoding: .utf8)
        let bare = text.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("simulator:") }.joined(separator: "\n")
        try bare.write(toFile: line.directory + "/bare.yaml", atomically: true, encoding: .utf8)
        let child = try ChildProcess(["run", line.workflow, "--inventory", "bare.yaml", "--adapter", "sim", "--quiet",
                                      "--line", line.connectionString, "--run", line.runID + "-bare", "--station", "s-bare",
                                      "--events", "events.jsonl", "--report", "bare.json"], directory: line.directory)
        let status = await ProcessLine.finish(child)
        let stderr = await child.stderr()
        #expect(status == 2, "\(stderr)")
        #expect(stderr.contains("needs a device model"), "\(stderr)")
        #expect(try await Self.left(line, "s-bare").left)
        try StationProcessTests.expectWholeEventsFile(line.directory + "/events.jsonl", ran: false, "line, model missing")
    }

    @Test func aStationWhoseAdapterFailsLeavesTheLine() async throws {
        let line = try await ProcessLine.make(devices: 3)
        defer { line.close() }
        let dead = try TCPProxy(targetPort: 1)
        defer { dead.close() }
        let child = try line.station("s-dead", extra: ["--adapter", "hci:tcp:127.0.0.1:\(dead.port)", "--trace", "t.trace"])
        let status = await ProcessLine.finish(child)
        #expect(status == 3)
        #expect(try await Self.left(line, "s-dead").left)
        try StationProcessTests.expectWholeBTSnoop(line.directory + "/t.2.trace", "line, adapter failure")
    }

    @Test(arguments: [("SIGINT once", [SIGINT]), ("SIGINT twice", [SIGINT, SIGINT]), ("SIGTERM", [SIGTERM])])
    func aStoppedStationLeavesTheLine(_ name: String, _ signals: [Int32]) async throws {
        let line = try await ProcessLine.make(devices: 12)
        defer { line.close() }
        let child = try line.station("s-\(signals.count)-\(signals[0])", latency: "0.5", concurrency: 2)
        var sent = 0
        let types = await ProcessLine.drain(child) { type in
            let due = sent == 0 ? type == "device_finished" : type == "stop_requested"
            if sent < signals.count, due {
                child.signal(signals[sent])
                sent += 1
            }
        }
        #expect(await child.wait() == 130, "\(name)")
        #expect(types.last == "run_finished", "\(name): \(types.suffix(3))")
        let left = try await Self.left(line, "s-\(signals.count)-\(signals[0])")
        #expect(left.left, "\(name)")
        #expect(left.reason == "interrupted", "\(name)")
    }
}
