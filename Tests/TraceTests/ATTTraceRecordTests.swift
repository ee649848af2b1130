import BLE
import Foundation
import Testing
@testable import Trace

@Suite struct ATTTraceRecordTests {
    private let t = BTSnoopTests.time

    private func record(_ pdu: [UInt8], _ direction: TraceDirection = .sent) -> ATTTraceRecord {
        ATTTraceRecord(pdu: pdu, link: "D001", direction: direction, timestamp: t)
    }

    @Test func handlesAreTakenFromThePDUsThatCarryOne() {
        let write = record([0x12, 0x12, 0x00, 0x01, 0x02])
        #expect(write.opcode == .writeRequest)
        #expect(write.handle == 0x0012)
        #expect(write.value == [0x01, 0x02])
        let notify = record([0x1B, 0x15, 0x00, 0x4F, 0x4B], .received)
        #expect(notify.handle == 0x0015)
        #expect(notify.value == [0x4F, 0x4B])
        let blob = record([0x0C, 0x03, 0x00, 0x16, 0x00])
        #expect(blob.handle == 3)
        #expect(blob.value == [0x16, 0x00], "the offset stays in the value")
        let error = record([0x01, 0x0A, 0x30, 0x00, 0x0A], .received)
        #expect(error.handle == 0x0030)
        #expect(error.value == [0x0A, 0x0A], "request opcode and error code")
    }

    @Test func otherPDUsKeepAllTheirParameters() {
        let response = record([0x0B, 0x32, 0x2E, 0x34], .received)
        #expect(response.opcode == .readResponse)
        #expect(response.handle == nil)
        #expect(response.value == [0x32, 0x2E, 0x34])
        let mtu = record([0x02, 0xF7, 0x00])
        #expect(mtu.handle == nil)
        #expect(mtu.value == [0xF7, 0x00])
    }

    @Test func shortAndEmptyPDUsNeverTrap() {
        let short = record([0x12, 0x01])
        #expect(short.handle == nil)
        #expect(short.value == [0x01])
        let empty = record([])
        #expect(empty.opcode == nil)
        #expect(empty.name == "empty PDU")
        #expect(empty.value == [])
        let unknown = record([0x7F, 1])
        #expect(unknown.name == "opcode 0x7f")
    }

    @Test func theJSONLine() {
        #expect(record([0x12, 0x12, 0x00, 0x01, 0x02]).jsonLine
            == #"{"direction":"sent","handle":18,"link":"D001","name":"Write Request","opcode":18,"time":"2026-01-02T03:04:05.123456Z","value":"0102"}"#)
        #expect(record([0x0B], .received).jsonLine
            == #"{"direction":"received","link":"D001","name":"Read Response","opcode":11,"time":"2026-01-02T03:04:05.123456Z","value":""}"#)
        #expect(record([]).jsonLine
            == #"{"direction":"sent","link":"D001","name":"empty PDU","time":"2026-01-02T03:04:05.123456Z","value":""}"#)
    }

    @Test func theTextLine() {
        #expect(record([0x12, 0x12, 0x00, 0x01, 0x02]).textLine
            == "2026-01-02T03:04:05.123456Z D001 sent Write Request (0x12) handle 0x0012 value 0102")
        #expect(record([0x13], .received).textLine == "2026-01-02T03:04:05.123456Z D001 received Write Response (0x13)")
    }

    @Test func timesAreUTCWithMicroseconds() {
        #expect(TraceTime.iso8601(microseconds: 0) == "1970-01-01T00:00:00.000000Z")
        #expect(TraceTime.iso8601(microseconds: -1) == "1969-12-31T23:59:59.999999Z")
        #expect(TraceTime.iso8601(microseconds: t) == "2026-01-02T03:04:05.123456Z")
        #expect(TraceTime.iso8601(microseconds: 951_782_400_000_001) == "2000-02-29T00:00:00.000001Z")
    }

    @Test func aHostileLinkNameStaysValidJSON() throws {
        let r = ATTTraceRecord(pdu: [0x13], link: "D\"1\n\\/é", direction: .received, timestamp: t)
        let object = try JSONSerialization.jsonObject(with: Data(r.jsonLine.utf8)) as? [String: Any]
        #expect(object?["link"] as? String == "D\"1\n\\/é")
    }
}

@Suite struct ATTTraceWriterTests {
    @Test func jsonLinesOneRecordALine() throws {
        let dir = try TraceDirectory()
        let writer = try ATTTraceWriter(path: dir.file("att.jsonl"), format: .jsonLines, bufferLimit: 128)
        for i in 0..<300 {
            try writer.write(pdu: [0x1B, UInt8(i % 256), 0x00, 0x4F, 0x4B], link: "D\(i % 3)", direction: .received, timestamp: Int64(i))
        }
        try writer.close()
        let lines = String(decoding: dir.bytes("att.jsonl"), as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 300)
        for (i, line) in lines.enumerated() {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["link"] as? String == "D\(i % 3)")
            #expect(object?["handle"] as? Int == i % 256)
            #expect(object?["name"] as? String == "Handle Value Notification")
            #expect(object?["value"] as? String == "4f4b")
            #expect(object?["direction"] as? String == "received")
        }
    }

    @Test func textOneRecordALine() throws {
        let dir = try TraceDirectory()
        let writer = try ATTTraceWriter(path: dir.file("att.txt"), format: .text)
        try writer.write(pdu: [0x0A, 0x03, 0x00], link: "D001", direction: .sent, timestamp: 0)
        try writer.write(pdu: [0x0B, 0x32], link: "D001", direction: .received, timestamp: 1_500)
        try writer.close()
        #expect(String(decoding: dir.bytes("att.txt"), as: UTF8.self) == """
            1970-01-01T00:00:00.000000Z D001 sent Read Request (0x0a) handle 0x0003
            1970-01-01T00:00:00.001500Z D001 received Read Response (0x0b) value 32

            """)
    }
}
