import Engine
import Foundation
import LineStore
import Testing
import EngineTestSupport
import TestSupport

@Suite struct LineSpoolTests {
    static let header = LineSpool.Header(run: "r1", station: "a/1234", line: "host=db password=***",
                                         workflow: FileRef(name: "w", path: "w.yaml", sha256: String(repeating: "a", count: 64)),
                                         inventory: FileRef(path: "i.yaml", sha256: String(repeating: "b", count: 64)))

    static func entry(_ id: String, attempt: Int = 1, outcome: DeviceOutcome = .succeeded) -> LineSpool.Entry {
        LineSpool.Entry(device: id, attempt: attempt,
                        record: DeviceRecord(id: id, address: "C0:5E:00:00:00:01", name: "SNS", outcome: outcome, attempts: attempt,
                                             captured: ["fw": "2.4.1"]),
                        at: wallTime("2026-11-30T21:00:00.000Z"))
    }

    static func directory() throws -> String {
        let d = NSTemporaryDirectory() + "spool-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        return d
    }

    @Test func everyOutcomeIsOnDiskBeforeItCountsAndTheFileGoesOnceAllAreOnTheLine() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/station.spool"
        let spool = LineSpool(path: path, header: Self.header)
        #expect(!FileManager.default.fileExists(atPath: path), "created on first use only")
        // Appended at once by several devices: they share the journal's fsyncs.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for e in [Self.entry("SN-1"), Self.entry("SN-2", outcome: .failed), Self.entry("SN-1", attempt: 2)] {
                group.addTask { try await spool.append(e) }
            }
            try await group.waitForAll()
        }
        #expect(spool.unwrittenCount == 3)
        spool.markWritten(Self.entry("SN-1"))
        #expect(Set(spool.unwritten.map { "\($0.device)#\($0.attempt)" }) == ["SN-2#1", "SN-1#2"])
        // The file is the station's record of all three (which reached the line is not written down:
        // writing one again is harmless), a journal with the station and the line in its header.
        let state = try JournalState.read(path: path)
        #expect(state.headers.first?.runId == "r1")
        #expect(state.headers.first?.options["station"] == "a/1234")
        #expect(Set(state.outcomes.keys) == ["SN-1", "SN-2"])
        spool.markWritten(Self.entry("SN-2", outcome: .failed))
        spool.markWritten(Self.entry("SN-1", attempt: 2))
        await spool.close()
        #expect(!FileManager.default.fileExists(atPath: path), "a spool whose outcomes are all on the line is removed")
    }

    @Test func aSpoolLeftBehindIsReadBackWhole() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/station.spool"
        let spool = LineSpool(path: path, header: Self.header)
        try await spool.append(Self.entry("SN-1"))
        try await spool.append(Self.entry("SN-2", attempt: 3, outcome: .interrupted))
        await spool.close()
        #expect(FileManager.default.fileExists(atPath: path), "outcomes not on the line keep the file")
        // A crash mid-append: the last line is cut short; it is cut off and kept aside, as a journal's.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(#"{"at":"2026-11-30T21:00:01.000Z","record":{"id":"SN-3""#.utf8))
        try handle.close()
        let back = try await LineSpool.open(existing: path)
        #expect(back.header == Self.header)
        let left = back.unwritten
        #expect(left.map(\.device) == ["SN-1", "SN-2"])
        #expect(left.map(\.attempt) == [1, 3])
        #expect(left[1].record.outcome == .interrupted)
        // While it is open (being flushed) nobody else can take it.
        await #expect(throws: LineSpool.ReadError.self) { try await LineSpool.open(existing: path) }
        back.markWritten(left[0])
        back.markWritten(left[1], refusal: "lease lost: station b holds it now")
        await back.close()
        #expect(FileManager.default.fileExists(atPath: path), "a refused outcome stays on record")
    }

    @Test func aFileThatIsNoSpoolIsRefused() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/x.spool"
        try Data("hello\nworld\n".utf8).write(to: URL(fileURLWithPath: path))
        await #expect(throws: LineSpool.ReadError.self) { try await LineSpool.open(existing: path) }
        await #expect(throws: LineSpool.ReadError.self) { try await LineSpool.open(existing: dir + "/missing.spool") }
        // A journal of a run (no station in its header) is not a spool either.
        let journal = try FileJournal(path: dir + "/run.journal", fsync: false)
        _ = try await journal.open(.start)
        try await journal.record(.header(JournalHeader(runId: "r", workflow: Self.header.workflow, inventory: Self.header.inventory,
                                                       adapters: [], options: [:], started: wallTime("2026-11-30T21:00:00.000Z"),
                                                       toolVersion: "t", resumed: false), at: wallTime("2026-11-30T21:00:00.000Z")))
        await journal.close()
        await #expect(throws: LineSpool.ReadError.self) { try await LineSpool.open(existing: dir + "/run.journal") }
    }
}
