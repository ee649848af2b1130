import Foundation
import Testing
@testable import Engine
import SystemIO
import EngineTestSupport
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The file journal as a run store: what it refuses, what resume repairs, and what a failed write leaves.
@Suite struct FileJournalTests {
    final class Directory {
        let path = NSTemporaryDirectory() + "file-journal-\(UUID().uuidString)"
        init() throws { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    static let header = JournalLine.header(JournalHeader(runId: "run-1", workflow: FileRef(name: "w", path: "w.yaml", sha256: "ab"),
                                                         inventory: FileRef(path: "i.yaml", sha256: "cd"), adapters: ["sim"], options: [:],
                                                         started: wallTime("2026-11-30T05:00:00.000Z"), toolVersion: "test", resumed: false), at: wallTime("2026-11-30T05:00:00.000Z"))

    static func bytes(_ lines: [JournalLine]) -> [UInt8] {
        lines.flatMap { RecordEncoder.compact($0) + [0x0A] }
    }

    static func write(_ bytes: [UInt8], _ path: String) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    static func contents(_ path: String) -> [UInt8] {
        [UInt8](FileManager.default.contents(atPath: path) ?? Data())
    }

    @Test func aTornLastLineIsCutAndKeptBesideTheJournalBeforeAnythingIsAppended() async throws {
        let dir = try Directory()
        let path = dir.path + "/run.journal"
        let whole: [JournalLine] = [Self.header, .started(device: "SN-1", attempt: 1, at: wallTime("2026-11-30T05:00:00.000Z"))]
        let torn = Array(RecordEncoder.compact(JournalLine.intent(device: "SN-1", step: "commit", stepIndex: 9, at: wallTime("2026-11-30T05:00:00.000Z"))).prefix(23))
        try Self.write(Self.bytes(whole) + torn, path)

        for round in 1...3 {
            let journal = try FileJournal(path: path, fsync: false)
            let opened = try await journal.open(.resume)
            #expect(opened.lines.prefix(2) == whole.prefix(2), "round \(round)")
            if round == 1 {
                #expect(opened.repair?.contains("cut a torn last line (23 bytes") == true)
                #expect(opened.repair?.contains(path + ".torn") == true)
                #expect(Self.contents(path) == Self.bytes(whole), "cut before anything is appended")
            } else {
                #expect(opened.repair == nil, "round \(round): nothing left to repair")
            }
            try await journal.record(.header(JournalHeader(runId: "run-1", workflow: FileRef(path: "w.yaml", sha256: "ab"),
                                                           inventory: FileRef(path: "i.yaml", sha256: "cd"), adapters: [], options: [:],
                                                           started: WallTime(millisecondsSince1970: 1_796_014_800_000 + Int64(round)), toolVersion: "test", resumed: true), at: wallTime("2026-11-30T05:00:00.000Z")))
            await journal.close()
        }
        // The cut bytes, once, with a newline after them.
        #expect(Self.contents(path + ".torn") == torn + [0x0A])
        let state = try JournalState.read(path: path)
        #expect(state.headers.count == 4 && !state.truncatedTail)
    }

    @Test func aWholeLastLineWithoutItsNewlineIsKeptAndCompleted() async throws {
        let dir = try Directory()
        let path = dir.path + "/run.journal"
        let lines: [JournalLine] = [Self.header, .started(device: "SN-1", attempt: 1, at: wallTime("2026-11-30T05:00:00.000Z"))]
        try Self.write(Array(Self.bytes(lines).dropLast()), path)
        let journal = try FileJournal(path: path, fsync: false)
        let opened = try await journal.open(.resume)
        await journal.close()
        #expect(opened.lines == lines && opened.repair == nil)
        #expect(Self.contents(path) == Self.bytes(lines))
        #expect(!FileManager.default.fileExists(atPath: path + ".torn"))
    }

    @Test func aDamagedLineBeforeTheLastIsRefusedAndNothingIsTouched() async throws {
        let dir = try Directory()
        let path = dir.path + "/run.journal"
        let original = Self.bytes([Self.header]) + Array("{\"type\":\"started\",\"at\"\n".utf8) + Self.bytes([.end(stopped: nil, at: wallTime("2026-11-30T05:00:00.000Z"))]) + Array("{\"ty".utf8)
        try Self.write(original, path)
        let journal = try FileJournal(path: path, fsync: false)
        await #expect {
            _ = try await journal.open(.resume)
        } throws: { ($0 as? RunStoreError)?.description == "\(path):2: journal line is damaged; refusing to guess what happened" }
        await journal.close()
        #expect(Self.contents(path) == original)
        #expect(!FileManager.default.fileExists(atPath: path + ".torn"))
    }

    @Test func aFileThatIsNotAJournalIsNeverCut() async throws {
        let dir = try Directory()
        let path = dir.path + "/report.json"
        let original = Array("{\"schema\":\"provision.report/1\",\"devices\":[".utf8)
        try Self.write(original, path)
        let journal = try FileJournal(path: path, fsync: false)
        await #expect(throws: RunStoreError.self) { _ = try await journal.open(.resume) }
        await journal.close()
        #expect(Self.contents(path) == original)
        #expect(!FileManager.default.fileExists(atPath: path + ".torn"))
    }

    @Test func aLineOfAnUnknownTypeIsRefused() async throws {
        let dir = try Directory()
        let path = dir.path + "/run.journal"
        try Self.write(Self.bytes([Self.header]) + Array("{\"type\":\"claim\",\"at\":\"t\"}\n".utf8), path)
        let journal = try FileJournal(path: path, fsync: false)
        await #expect {
            _ = try await journal.open(.resume)
        } throws: { ($0 as? RunStoreError)?.description.contains(":2: unknown journal line type `claim`") == true }
        await journal.close()
    }

    @Test func aNewRunRefusesAJournalThatHoldsOne() async throws {
        let dir = try Directory()
        let path = dir.path + "/run.journal"
        try Self.write(Self.bytes([Self.header]), path)
        let journal = try FileJournal(path: path, fsync: false)
        await #expect {
            _ = try await journal.open(.start)
        } throws: { ($0 as? RunStoreError)?.description.contains("already exists; resume it with --resume") == true }
        await journal.close()
    }

    @Test func aFailedWriteLeavesTheJournalFailedForGood() async throws {
        // /dev/full: every write fails with ENOSPC, as on a full disk.
        let journal = try FileJournal(path: "/dev/full", fsync: false)
        var first: FileError?
        do {
            try await journal.record(Self.header)
        } catch let e as FileError {
            first = e
        }
        #expect(first?.errno == ENOSPC)
        // Later lines, durable or not, and flushes fail the same way: nothing more is written.
        for line in [JournalLine.started(device: "SN-1", attempt: 1, at: wallTime("2026-11-30T05:00:00.000Z")), .intent(device: "SN-1", step: "commit", stepIndex: 9, at: wallTime("2026-11-30T05:00:00.000Z"))] {
            await #expect { try await journal.record(line) } throws: { ($0 as? FileError)?.errno == ENOSPC }
        }
        await #expect { try await journal.flush() } throws: { ($0 as? FileError)?.errno == ENOSPC }
        await journal.close()
    }

    @Test func durableLinesAreOnDiskWhenRecordReturnsAndStartsAreBuffered() async throws {
        let dir = try Directory()
        let path = dir.path + "/run.journal"
        let journal = try FileJournal(path: path, fsync: true)
        _ = try await journal.open(.start)
        try await journal.record(Self.header)
        #expect(Self.contents(path) == Self.bytes([Self.header]))
        try await journal.record(.started(device: "SN-1", attempt: 1, at: wallTime("2026-11-30T05:00:00.000Z")))
        #expect(Self.contents(path) == Self.bytes([Self.header]), "a start waits for the next durable line")
        let intent = JournalLine.intent(device: "SN-1", step: "commit", stepIndex: 9, at: wallTime("2026-11-30T05:00:00.000Z"))
        try await journal.record(intent)
        #expect(Self.contents(path) == Self.bytes([Self.header, .started(device: "SN-1", attempt: 1, at: wallTime("2026-11-30T05:00:00.000Z")), intent]))
        await journal.close()
    }
}
