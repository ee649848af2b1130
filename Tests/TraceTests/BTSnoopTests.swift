import Support
import Testing
@testable import Trace

@Suite struct BTSnoopTests {
    /// HCI Reset, as an H4 command.
    static let reset: [UInt8] = [0x01, 0x03, 0x0C, 0x00]
    /// Command Complete for HCI Reset, status success.
    static let resetComplete: [UInt8] = [0x04, 0x0E, 0x04, 0x01, 0x03, 0x0C, 0x00]
    /// ACL on handle 0x0040 carrying an ATT Write Request to handle 0x0012 with value 01 02.
    static let attWrite: [UInt8] = [0x02, 0x40, 0x00, 0x09, 0x00, 0x05, 0x00, 0x04, 0x00, 0x12, 0x12, 0x00, 0x01, 0x02]
    /// 2026-01-02T03:04:05.123456Z in microseconds since the Unix epoch.
    static let time: Int64 = 1_767_323_045_123_456

    @Test func theHeaderIsTheIdentificationVersionOneAndDatalinkH4() {
        #expect(BTSnoop.header == [0x62, 0x74, 0x73, 0x6E, 0x6F, 0x6F, 0x70, 0x00, 0, 0, 0, 1, 0, 0, 0x03, 0xEA])
    }

    @Test func aRecordIsItsBigEndianHeaderThenThePacket() {
        let r = BTSnoopRecord(direction: .sent, packet: Self.reset, timestamp: Self.time)
        #expect(r.encoded == [
            0, 0, 0, 4,                                       // original length
            0, 0, 0, 4,                                       // included length
            0, 0, 0, 2,                                       // flags: sent, command
            0, 0, 0, 0,                                       // drops
            0x00, 0xE3, 0x25, 0x12, 0x05, 0x7E, 0x55, 0x80,   // µs since 0 AD: time + 0x00DCDDB30F2F8000
            0x01, 0x03, 0x0C, 0x00,
        ])
    }

    @Test func flagsSayDirectionAndCommandOrEvent() {
        #expect(BTSnoopRecord(direction: .sent, packet: Self.reset, timestamp: 0).flags == 2)
        #expect(BTSnoopRecord(direction: .received, packet: Self.resetComplete, timestamp: 0).flags == 3)
        #expect(BTSnoopRecord(direction: .sent, packet: Self.attWrite, timestamp: 0).flags == 0)
        #expect(BTSnoopRecord(direction: .received, packet: Self.attWrite, timestamp: 0).flags == 1)
        #expect(BTSnoopRecord(direction: .received, packet: [], timestamp: 0).flags == 1)
    }

    @Test func recordsReadBackAsWritten() throws {
        let records = [
            BTSnoopRecord(direction: .sent, packet: Self.reset, timestamp: Self.time),
            BTSnoopRecord(direction: .received, packet: Self.resetComplete, timestamp: Self.time + 1_500),
            BTSnoopRecord(direction: .sent, packet: Self.attWrite, timestamp: Self.time + 2_000, cumulativeDrops: 3),
            BTSnoopRecord(direction: .received, packet: [], timestamp: -5),
        ]
        let file = BTSnoop.header + records.flatMap(\.encoded)
        #expect(try BTSnoop.records(in: file) == records)
        #expect(try BTSnoop.records(in: BTSnoop.header) == [])
    }

    @Test func badFilesAreErrorsWithTheirOffset() {
        func failure(_ bytes: [UInt8]) -> BTSnoopError? {
            do {
                _ = try BTSnoop.records(in: bytes)
                return nil
            } catch {
                return error
            }
        }
        let record = BTSnoopRecord(direction: .sent, packet: Self.reset, timestamp: 0).encoded
        #expect(failure([]) == BTSnoopError("the file is 0 bytes, shorter than the 16-byte header", offset: 0))
        #expect(failure(Array("snoop\0\0\0".utf8) + [0, 0, 0, 1, 0, 0, 3, 0xEA])?.message == "not a btsnoop file (no `btsnoop\\0` pattern)")
        #expect(failure(Array(BTSnoop.header[0..<8]) + [0, 0, 0, 2, 0, 0, 3, 0xEA])?.offset == 8)
        #expect(failure(Array(BTSnoop.header[0..<12]) + [0, 0, 3, 0xE9])?.message == "datalink 1001; only 1002 (HCI UART H4) is read here")
        #expect(failure(BTSnoop.header + record.prefix(20)) == BTSnoopError("record header cut short: 20 of 24 bytes", offset: 16))
        #expect(failure(BTSnoop.header + record.dropLast()) == BTSnoopError("packet cut short: 3 of 4 bytes", offset: 40))
        var bigger = record
        bigger[7] = 5  // included 5 > original 4
        #expect(failure(BTSnoop.header + bigger)?.message == "included length 5 is above the original length 4")
        var huge = record
        huge[0] = 0xFF; huge[4] = 0xFF  // claims 4 GB
        #expect(failure(BTSnoop.header + huge)?.message.hasPrefix("packet cut short") == true)
    }

    @Test func randomBytesAfterAHeaderNeverTrap() {
        var g = SplitMix64(seed: 0x1234)
        func next() -> UInt64 { g.next() }
        var read = 0, refused = 0
        for _ in 0..<2_000 {
            let body = (0..<Int(next() % 80)).map { _ in UInt8(truncatingIfNeeded: next()) }
            do {
                // What is read accounts for every byte: 24 header bytes and the packet per record.
                let records = try BTSnoop.records(in: BTSnoop.header + body)
                #expect(records.reduce(0) { $0 + 24 + $1.packet.count } == body.count)
                read += 1
            } catch {
                #expect(error.offset >= 16 && error.offset <= BTSnoop.header.count + body.count, "\(error)")
                refused += 1
            }
        }
        // Both ways were taken: an empty body reads as no record, random bytes are mostly refused.
        #expect(read > 0 && refused > 0)
    }
}
