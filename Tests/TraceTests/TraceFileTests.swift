import Foundation
import Testing
@testable import Trace

@Suite struct TraceFileTests {
    @Test func memoryStaysBelowTheBufferLimitWhateverIsWritten() throws {
        let dir = try TraceDirectory()
        let file = try TraceFile(path: dir.file("t.bin"), bufferLimit: 4096)
        var expected: [UInt8] = []
        for i in 0..<10_000 {
            let chunk = [UInt8](repeating: UInt8(truncatingIfNeeded: i), count: 1 + i % 37)
            try file.append(chunk)
            expected += chunk
            #expect(file.buffered < 4096)
        }
        #expect(file.size == expected.count)
        try file.close()
        #expect(dir.bytes("t.bin") == expected)
    }

    @Test func flushMakesEverythingVisibleWithoutClosing() throws {
        let dir = try TraceDirectory()
        let file = try TraceFile(path: dir.file("t.bin"))
        try file.append([1, 2, 3])
        #expect(dir.bytes("t.bin") == [])
        try file.flush()
        #expect(dir.bytes("t.bin") == [1, 2, 3])
        #expect(file.buffered == 0)
        try file.close()
        try file.close()
        #expect(throws: TraceError.self) { try file.append([4]) }
    }

    @Test func aFileThatCannotBeCreatedSaysWhy() throws {
        let dir = try TraceDirectory()
        do {
            _ = try TraceFile(path: dir.file("missing/t.bin"))
            Issue.record("created")
        } catch {
            #expect(error.description == "cannot create trace file \(dir.file("missing/t.bin")): the directory \(dir.file("missing")) does not exist")
        }
    }

    @Test func anExistingFileIsTruncated() throws {
        let dir = try TraceDirectory()
        try Data([9, 9, 9, 9]).write(to: URL(fileURLWithPath: dir.file("t.bin")))
        let file = try TraceFile(path: dir.file("t.bin"))
        try file.append([1])
        try file.close()
        #expect(dir.bytes("t.bin") == [1])
    }

    @Test func concurrentWritersInterleaveWholeRecords() async throws {
        let dir = try TraceDirectory()
        let file = try TraceFile(path: dir.file("t.bin"), bufferLimit: 256)
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    for _ in 0..<500 { try? file.append([UInt8](repeating: UInt8(writer), count: 16)) }
                }
            }
        }
        try file.close()
        let bytes = dir.bytes("t.bin")
        #expect(bytes.count == 8 * 500 * 16)
        for start in stride(from: 0, to: bytes.count, by: 16) {
            #expect(Set(bytes[start..<start + 16]).count == 1, "record at \(start) is mixed")
        }
    }
}
