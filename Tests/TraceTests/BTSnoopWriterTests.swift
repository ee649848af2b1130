import Foundation
import Testing
@testable import Trace

@Suite struct BTSnoopWriterTests {
    @Test func theFileIsTheHeaderThenEveryRecordInOrder() throws {
        let dir = try TraceDirectory()
        let writer = try BTSnoopWriter(path: dir.file("hci.btsnoop"), bufferLimit: 64)
        let records: [BTSnoopRecord] = (0..<1_000).map { (i: Int) -> BTSnoopRecord in
            let sent = i % 2 == 0
            return BTSnoopRecord(direction: sent ? .sent : .received, packet: sent ? BTSnoopTests.reset : BTSnoopTests.resetComplete,
                                 timestamp: BTSnoopTests.time + Int64(i))
        }
        for r in records { try writer.write(r) }
        try writer.close()
        let bytes = dir.bytes("hci.btsnoop")
        #expect(Array(bytes.prefix(16)) == BTSnoop.header)
        #expect(try BTSnoop.records(in: bytes) == records)
    }

    @Test func packetsWithoutATimestampGetTheWallClock() throws {
        let dir = try TraceDirectory()
        let writer = try BTSnoopWriter(path: dir.file("hci.btsnoop"))
        let before = TraceTime.nowMicroseconds()
        try writer.write(BTSnoopTests.reset, direction: .sent)
        let after = TraceTime.nowMicroseconds()
        try writer.close()
        let records = try BTSnoop.records(in: dir.bytes("hci.btsnoop"))
        #expect(records.count == 1)
        #expect((before...after).contains(records[0].timestamp))
    }

    /// Reads the file with Wireshark's tshark: it must recognise the btsnoop H4 file, each packet's
    /// type and direction, the ATT Write Request inside the ACL packet, and the timestamps.
    @Test(.enabled(if: Tshark.path != nil, "tshark is not installed (apt-get install tshark): the btsnoop bytes are checked by BTSnoopTests only"),
          .timeLimit(.minutes(1)))
    func wiresharkReadsTheFile() async throws {
        let dir = try TraceDirectory()
        let path = dir.file("hci.btsnoop")
        let writer = try BTSnoopWriter(path: path)
        try writer.write(BTSnoopTests.reset, direction: .sent, timestamp: BTSnoopTests.time)
        try writer.write(BTSnoopTests.resetComplete, direction: .received, timestamp: BTSnoopTests.time + 1_000)
        try writer.write(BTSnoopTests.attWrite, direction: .sent, timestamp: BTSnoopTests.time + 2_000)
        try writer.close()

        let lines = try await Tshark.fields(path, ["frame.number", "hci_h4.type", "hci_h4.direction", "btatt.opcode", "btatt.handle", "frame.time_epoch"])
        #expect(lines.count == 3, "\(lines)")
        guard lines.count == 3 else { return }
        #expect(lines.map { $0[1] } == ["0x01", "0x04", "0x02"])
        #expect(lines.map { $0[2] } == ["0x00", "0x01", "0x00"])
        #expect(lines[2][3] == "0x12")
        #expect(lines[2][4] == "0x0012")
        #expect(lines.map { $0[5] } == ["1767323045.123456000", "1767323045.124456000", "1767323045.125456000"])
    }
}

/// Wireshark's command-line reader, when installed.
enum Tshark {
    static let path: String? = ["/usr/bin/tshark", "/usr/local/bin/tshark"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// The chosen fields of every packet in `file`, one array per packet. Waits for tshark without
    /// blocking a thread; a cancelled wait (the test's time limit) stops it.
    static func fields(_ file: String, _ names: [String]) async throws -> [[String]] {
        guard let path else { return [] }
        let output = file + ".tshark.txt"
        guard FileManager.default.createFile(atPath: output, contents: nil) else {
            Issue.record("cannot create \(output)")
            return []
        }
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["-r", file, "-T", "fields", "-E", "separator=|"] + names.flatMap { ["-e", $0] }
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        let (exits, exited) = AsyncStream.makeStream(of: Int32.self)
        process.terminationHandler = { exited.yield($0.terminationStatus); exited.finish() }
        try process.run()
        let pid = process.processIdentifier
        let status = await withTaskCancellationHandler {
            var status: Int32?
            for await s in exits { status = s }
            return status
        } onCancel: {
            kill(pid, SIGTERM)
        }
        try out.close()
        #expect(status == 0, "tshark exited with \(status.map(String.init) ?? "no status")")
        let text = String(decoding: FileManager.default.contents(atPath: output) ?? Data(), as: UTF8.self)
        return text.split(separator: "\n").map { $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init) }
    }
}
