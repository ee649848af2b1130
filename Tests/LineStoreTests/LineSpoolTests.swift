import Engine
import Foundation
import LineStore
import Testing

@Suite struct LineSpoolTests {
    static func entry(_ id: String, attempt: Int = 1, outcome: DeviceOutcome = .succeeded) -> LineSpool.Entry {
        LineSpool.Entry(device: id, attempt: attempt,
                        record: DeviceRecord(id: id, address: "C0:5E:00:00:00:01", name: "SNS", outcome: outcome, attempts: attempt,
                                             captured: ["fw": "2.4.1"]),
                        at: "2026-11-30T21:00:00.000Z")
    }

    static func directory() throws -> String {
        let d = NSTemporaryDirectory() + "spool-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        return d
    }

    @Test func anOutcomeIsKeptUntilItIsMarkedWrittenAndTheFileGoesWhenNothingIsLeft() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/station.spool"
        let spool = LineSpool(path: path, header: .init(run: "r1", station: "a/1234", line: "host=db"))
        #expect(!FileManager.default.fileExists(atPath: path), "created on first use only")
        try await spool.append(Self.entry("SN-1"))
        try await spool.append(Self.entry("SN-2", outcome: .failed))
        try await spool.append(Self.entry("SN-1", attempt: 2))
        try await spool.markWritten(Self.entry("SN-1"), result: "recorded")
        // Read back as `provision line flush` does: what is left, with its records.
        let back = try LineSpool.open(existing: path)
        #expect(back.header == LineSpool.Header(run: "r1", station: "a/1234", line: "host=db"))
        let left = await back.unwritten
        #expect(left.map(\.device) == ["SN-2", "SN-1"])
        #expect(left.map(\.attempt) == [1, 2])
        #expect(left[0].record == Self.entry("SN-2", outcome: .failed).record)
        try await back.markWritten(left[0], result: "recorded")
        try await back.markWritten(left[1], result: "recorded")
        await back.close()
        #expect(!FileManager.default.fileExists(atPath: path), "a spool with nothing left is removed")
        await spool.close()
    }

    @Test func aRefusedOutcomeStaysOnRecordInTheSpool() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/station.spool"
        let spool = LineSpool(path: path, header: .init(run: "r1", station: "a/1234", line: "host=db"))
        try await spool.append(Self.entry("SN-1"))
        try await spool.markWritten(Self.entry("SN-1"), result: "refused", refusal: "lease lost: station b holds it now")
        await spool.close()
        #expect(FileManager.default.fileExists(atPath: path))
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains("\"result\":\"refused\"") && text.contains("station b holds it now"))
        #expect(await (try LineSpool.open(existing: path)).unwritten.isEmpty)
    }

    @Test func aTornLastLineIsIgnoredAndADamagedLineIsRefused() async throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/station.spool"
        let spool = LineSpool(path: path, header: .init(run: "r1", station: "a/1234", line: "host=db"))
        try await spool.append(Self.entry("SN-1"))
        await spool.close()
        let whole = try Data(contentsOf: URL(fileURLWithPath: path))
        // A crash mid-append: the last line is cut short.
        try (whole + Data(#"{"at":"2026-11-30T21:00:01.000Z","attempt":1,"device":"SN-2","rec"#.utf8)).write(to: URL(fileURLWithPath: path))
        #expect(await (try LineSpool.open(existing: path)).unwritten.map(\.device) == ["SN-1"])
        // Damage in the middle is not guessed at.
        var lines = String(decoding: whole, as: UTF8.self).split(separator: "\n").map(String.init)
        lines.insert("{not json", at: 1)
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: LineSpool.ReadError.self) { try LineSpool.open(existing: path) }
        // Not a spool at all.
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: LineSpool.ReadError.self) { try LineSpool.open(existing: path) }
    }
}
