import Foundation
import Testing
import SystemIO
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A temporary directory, removed at the end.
final class Scratch {
    let path: String

    init() throws {
        var template = Array((NSTemporaryDirectory() + "/systemio-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw FileError(path: "mkdtemp", operation: "mkdtemp", errno: errno) }
        path = String(cString: made)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func file(_ name: String) -> String { path + "/" + name }

    func read(_ name: String) -> String? {
        (try? Data(contentsOf: URL(fileURLWithPath: file(name)))).map { String(decoding: $0, as: UTF8.self) }
    }

    func write(_ name: String, _ text: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: file(name)))
    }

    /// Every name in the directory (a leftover temporary file shows here).
    var names: Set<String> { Set((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []) }

    func info(_ name: String, follow: Bool = false) -> stat? {
        var st = stat()
        let r = follow ? stat(file(name), &st) : lstat(file(name), &st)
        return r == 0 ? st : nil
    }
}

func fileType(_ st: stat?) -> mode_t? { st.map { $0.st_mode & S_IFMT } }

/// The output-path rule: regular files replaced atomically with their documented mode, FIFOs and devices
/// written as they are, symbolic links followed to their target.
@Suite(.timeLimit(.minutes(1)))
struct OutputPathTests {
    @Test func aNewDocumentGetsItsModeAndNoTemporaryFileIsLeft() throws {
        let dir = try Scratch()
        try AtomicFile.write(Array("secret".utf8), to: dir.file("dump.json"), mode: 0o600)
        try AtomicFile.write(Array("report".utf8), to: dir.file("report.json"))
        #expect(dir.read("dump.json") == "secret")
        #expect(dir.read("report.json") == "report")
        #expect(dir.info("dump.json")!.st_mode & 0o777 == 0o600)
        let mask = umask(0)
        umask(mask)
        #expect(dir.info("report.json")!.st_mode & 0o777 == 0o644 & ~mask)
        #expect(dir.names == ["dump.json", "report.json"])
    }

    @Test func replacingAFileLeavesOtherLinksToTheOldOneAndTakesTheNewMode() throws {
        let dir = try Scratch()
        try dir.write("report.json", "old")
        chmod(dir.file("report.json"), 0o666)
        link(dir.file("report.json"), dir.file("hard-link"))
        let before = dir.info("report.json")!.st_ino
        try AtomicFile.write(Array("new".utf8), to: dir.file("report.json"), mode: 0o600)
        #expect(dir.read("report.json") == "new")
        #expect(dir.read("hard-link") == "old")
        #expect(dir.info("report.json")!.st_ino != before)
        #expect(dir.info("report.json")!.st_mode & 0o777 == 0o600)
    }

    @Test func aDocumentWhoseWriterFailsLeavesTheOldFileAndNoTemporary() throws {
        struct Stop: Error {}
        let dir = try Scratch()
        try dir.write("report.json", "old")
        #expect(throws: Stop.self) {
            try AtomicFile.write(to: dir.file("report.json")) { file in
                try file.write(Array("half".utf8))
                throw Stop()
            }
        }
        #expect(dir.read("report.json") == "old")
        #expect(dir.names == ["report.json"])
    }

    @Test func aSymbolicLinkIsFollowedTheTargetReplacedAndTheLinkKept() throws {
        let dir = try Scratch()
        try FileManager.default.createDirectory(atPath: dir.file("shared"), withIntermediateDirectories: false)
        try dir.write("shared/report.json", "old")
        // A relative link, to a relative link, to the file.
        symlink("shared/report.json", dir.file("inner"))
        symlink("inner", dir.file("report.json"))
        try AtomicFile.write(Array("new".utf8), to: dir.file("report.json"))
        #expect(fileType(dir.info("report.json")) == S_IFLNK)
        #expect(fileType(dir.info("inner")) == S_IFLNK)
        #expect(dir.read("shared/report.json") == "new")
        #expect(dir.names == ["report.json", "inner", "shared"])
        #expect(try OutputPath.resolve(dir.file("report.json")) == .regularFile(dir.path + "/shared/report.json"))
    }

    @Test func aLinkToAFileNotYetThereCreatesTheTarget() throws {
        let dir = try Scratch()
        symlink(dir.file("elsewhere.json"), dir.file("report.json"))
        try AtomicFile.write(Array("made".utf8), to: dir.file("report.json"))
        #expect(fileType(dir.info("report.json")) == S_IFLNK)
        #expect(dir.read("elsewhere.json") == "made")
    }

    @Test func aLoopOfLinksIsAnError() throws {
        let dir = try Scratch()
        symlink("b", dir.file("a"))
        symlink("a", dir.file("b"))
        #expect { try AtomicFile.write(Array("x".utf8), to: dir.file("a")) } throws: { ($0 as? FileError)?.errno == ELOOP }
    }

    @Test func aFIFOWithAReaderReceivesTheDocumentAndStaysAFIFO() async throws {
        let dir = try Scratch()
        let fifo = dir.file("events")
        #expect(mkfifo(fifo, 0o640) == 0)
        // The reader opens first (without waiting for a writer), then reads to the end on a thread.
        let received = try FIFOReader(path: fifo)
        let payload = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 % 251) }
        try AtomicFile.write(payload, to: fifo, mode: 0o600)
        #expect(await received.bytes() == payload)
        #expect(fileType(dir.info("events")) == S_IFIFO)
        #expect(dir.info("events")!.st_mode & 0o777 == 0o640 & ~currentUmask())
        #expect(dir.names == ["events"])
    }

    @Test func aFIFOWithNoReaderFailsAtOnceAndIsLeftAsItIs() throws {
        let dir = try Scratch()
        let fifo = dir.file("events")
        #expect(mkfifo(fifo, 0o644) == 0)
        #expect { try OutputFile(path: fifo, mode: 0o600, replacement: .replacingNow) } throws: { error in
            guard let e = error as? FileError else { return false }
            return e.errno == ENXIO && e.description.contains("no process is reading")
        }
        #expect(fileType(dir.info("events")) == S_IFIFO)
        #expect(dir.names == ["events"])
    }

    @Test func aWriteThatMakesNoProgressFailsAfterTheStallLimit() throws {
        var fds: [Int32] = [-1, -1]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK)
        // Nobody reads: the pipe fills and the write cannot go on.
        let big = [UInt8](repeating: 7, count: 1 << 20)
        #expect { try FileIO.writeAll(fds[1], big, path: "pipe", stallLimit: .milliseconds(50)) } throws: { error in
            (error as? FileError)?.errno == ETIMEDOUT
        }
    }

    @Test func aNonBlockingPipeReadSlowlyGetsEveryByteInOrder() async throws {
        var fds: [Int32] = [-1, -1]
        #expect(pipe(&fds) == 0)
        _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK)
        let received = FIFOReader(descriptor: fds[0], chunk: 4096)
        let payload = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try FileIO.writeAll(fds[1], payload, path: "pipe")
        close(fds[1])
        #expect(await received.bytes() == payload)
    }

    @Test func aCharacterDeviceIsWrittenAsItIs() throws {
        let before = try #require(statOf("/dev/null"))
        try AtomicFile.write(Array("discarded".utf8), to: "/dev/null", mode: 0o600)
        let file = try OutputFile(path: "/dev/null", mode: 0o600, replacement: .replacingNow)
        try file.write(Array("more".utf8))
        try file.commit()
        let after = try #require(statOf("/dev/null"))
        #expect(after.st_mode == before.st_mode)
        #expect(after.st_rdev == before.st_rdev)
        #expect(!file.isRegularFile)
    }

    @Test func theStandardStreamsAreWrittenAsTheyAre() throws {
        #expect(try OutputPath.resolve("/dev/stdout") == .asIs("/dev/stdout"))
        #expect(try OutputPath.resolve("/proc/self/fd/2") == .asIs("/proc/self/fd/2"))
    }

    @Test func aDirectoryIsRefused() throws {
        let dir = try Scratch()
        #expect { try AtomicFile.write(Array("x".utf8), to: dir.path) } throws: { ($0 as? FileError)?.errno == EISDIR }
    }

    @Test func aStreamedFileReplacesTheOldOneAtOnceAndGrows() throws {
        let dir = try Scratch()
        try dir.write("events.jsonl", "old lines\n")
        let file = try OutputFile(path: dir.file("events.jsonl"), mode: 0o644, replacement: .replacingNow)
        #expect(dir.read("events.jsonl") == "")
        try file.write(Array("one\n".utf8))
        #expect(dir.read("events.jsonl") == "one\n")
        try file.write(Array("two\n".utf8))
        try file.commit()
        #expect(dir.read("events.jsonl") == "one\ntwo\n")
        #expect(dir.names == ["events.jsonl"])
    }

    @Test func aDocumentNotCommittedLeavesTheTargetAndNoTemporary() throws {
        let dir = try Scratch()
        try dir.write("report.json", "old")
        do {
            let file = try OutputFile(path: dir.file("report.json"), mode: 0o644, replacement: .replacingOnCommit)
            try file.write(Array("new".utf8))
        }
        #expect(dir.read("report.json") == "old")
        #expect(dir.names == ["report.json"])
    }
}

func statOf(_ path: String) -> stat? {
    var st = stat()
    return stat(path, &st) == 0 ? st : nil
}

func currentUmask() -> mode_t {
    let mask = umask(0)
    umask(mask)
    return mask
}

